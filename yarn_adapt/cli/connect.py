"""Options shared by the commands that talk to YARN, and the clients they build."""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from yarn_adapt.errors import SettingsError
from yarn_adapt.yarn.history import JobHistoryClient
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient
from yarn_adapt.yarn.site import hadoop_conf_dir, jobhistory_web_address, rm_web_addresses

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class YarnEndpoints:
    rm: tuple[str, ...]
    history: str | None
    settings: HttpSettings

    def rm_client(self) -> ResourceManagerClient:
        return ResourceManagerClient(self.rm, self.settings)

    def history_client(self) -> JobHistoryClient | None:
        return JobHistoryClient(self.history, self.settings) if self.history else None


def yarn_options(fn: F) -> F:
    """Add --rm/--history/--user/--timeout/--retries/--ca-bundle/--insecure/--kerberos
    (with --principal and --keytab)."""
    options = [
        click.option(
            "--rm",
            "rm_urls",
            multiple=True,
            envvar="YARN_ADAPT_RM",
            metavar="URL",
            help="RM web address, http(s)://host:port or host:port (repeat for HA). "
            "Default: from $HADOOP_CONF_DIR/yarn-site.xml.",
        ),
        click.option(
            "--history",
            "history_url",
            envvar="YARN_ADAPT_HISTORY",
            metavar="URL",
            help="JobHistory web address (or host:port). Default: from mapred-site.xml.",
        ),
        click.option("--user", envvar="YARN_ADAPT_USER", help="User for simple auth (user.name)."),
        click.option(
            "--timeout",
            type=float,
            default=30.0,
            show_default=True,
            metavar="SECONDS",
            help="Read timeout.",
        ),
        click.option("--retries", type=int, default=3, show_default=True),
        click.option("--ca-bundle", type=click.Path(exists=True, dir_okay=False)),
        click.option("--insecure", is_flag=True, help="Do not verify TLS certificates."),
        click.option(
            "--kerberos",
            is_flag=True,
            help="SPNEGO (the kerberos extra): from --keytab, else the kinit ticket cache.",
        ),
        click.option(
            "--principal",
            envvar="YARN_ADAPT_PRINCIPAL",
            help="Kerberos principal to authenticate as (with --kerberos).",
        ),
        click.option(
            "--keytab",
            type=click.Path(dir_okay=False),
            envvar="YARN_ADAPT_KEYTAB",
            help="Log in from this keytab as --principal (with --kerberos); no kinit needed.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def endpoints_from_options(
    rm_urls: Sequence[str],
    history_url: str | None,
    user: str | None,
    timeout: float,
    retries: int,
    ca_bundle: str | None,
    insecure: bool,
    kerberos: bool,
    principal: str | None = None,
    keytab: str | None = None,
) -> YarnEndpoints:
    if (principal or keytab) and not kerberos:
        raise SettingsError("--principal and --keytab need --kerberos")
    settings = HttpSettings(
        read_timeout_s=timeout,
        retries=retries,
        ca_bundle=ca_bundle,
        verify_tls=not insecure,
        auth="kerberos" if kerberos else "simple",
        user=user or _login_name(),
        kerberos_principal=principal or None,
        kerberos_keytab=keytab or None,
    )
    rm = _split(rm_urls) or _rm_from_site()
    history = history_url or _history_from_site()
    return YarnEndpoints(tuple(rm), history, settings)


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _rm_from_site() -> list[str]:
    conf_dir = hadoop_conf_dir()
    if conf_dir is None:
        raise SettingsError(
            "no ResourceManager address: pass --rm URL, set YARN_ADAPT_RM or HADOOP_CONF_DIR"
        )
    return rm_web_addresses(conf_dir)


def _history_from_site() -> str | None:
    conf_dir = hadoop_conf_dir()
    return jobhistory_web_address(conf_dir) if conf_dir else None


def _login_name() -> str:
    try:
        return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    except (KeyError, OSError):
        return "yarn-adapt"
