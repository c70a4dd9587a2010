"""Kerberos settings refused before any request (the live SPNEGO tests are in
tests/service/test_secured_live.py, against a Kerberized mini cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from yarn_adapt.errors import SettingsError
from yarn_adapt.service.settings import settings_from_mapping
from yarn_adapt.yarn.http import HttpSettings, Transport


def test_a_keytab_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "absent.keytab"
    settings = HttpSettings(
        auth="kerberos", kerberos_principal="yarn-adapt@EXAMPLE.COM", kerberos_keytab=str(missing)
    )
    with pytest.raises(SettingsError, match=rf"keytab {missing}: No such file"):
        Transport(settings)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"kerberos_keytab": "/k.keytab", "kerberos_principal": "p@R"}, "without auth ="),
        ({"auth": "kerberos", "kerberos_keytab": "/k.keytab"}, "without kerberos_principal"),
    ],
)
def test_a_keytab_needs_kerberos_and_a_principal(kwargs: dict[str, str], problem: str) -> None:
    with pytest.raises(SettingsError, match=problem):
        HttpSettings(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("yarn", "message"),
    [
        ({"kerberos_keytab": "/k.keytab", "kerberos_principal": "p@R"}, "needs kerberos = true"),
        ({"kerberos": True, "kerberos_keytab": "/k.keytab"}, "must name the keytab's principal"),
    ],
)
def test_the_service_settings_check_the_keytab_too(yarn: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        settings_from_mapping({"yarn": yarn}, "yarn-adapt.toml")
