"""SPNEGO (Kerberos over HTTP) to the RM and JobHistory web services.

Uses the ``kerberos`` extra: requests-gssapi over python-gssapi, both kept by the
python-gssapi project, which bind the system's MIT Kerberos library.

Where the credentials come from:

- a keytab and principal (``[yarn] kerberos_keytab`` / ``--keytab``): MIT's
  credential-store acquisition (``gss_acquire_cred_from`` with ``client_keytab``)
  into a private in-memory ticket cache. No ``kinit`` subprocess, no shared ticket
  cache file, no environment variable changed; MIT gets a fresh ticket from the
  keytab by itself when the old one expires, so a service running for weeks never
  needs a renewal job. A keytab that cannot be read, or that lacks the principal,
  is refused at start with a one-line error.
- otherwise the ticket cache ``kinit`` filled (``$KRB5CCNAME``), optionally for a
  given principal.

The server's principal is ``HTTP/<host of the URL>`` after the library's host-name
canonicalisation (krb5.conf ``dns_canonicalize_hostname`` and ``rdns``). The
Kerberos configuration is the system's (``/etc/krb5.conf`` or ``$KRB5_CONFIG``).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from yarn_adapt.errors import SettingsError

INSTALL_HINT = "pip install 'yarn-adapt[kerberos]'"
_CACHE_NUMBERS = itertools.count()


def spnego_auth(principal: str | None = None, keytab: str | None = None) -> Any:
    """A ``requests`` auth object that negotiates SPNEGO with these credentials."""
    try:
        import gssapi
        from requests_gssapi import OPTIONAL, HTTPSPNEGOAuth  # type: ignore[import-untyped]
        from requests_gssapi.exceptions import SPNEGOExchangeError  # type: ignore[import-untyped]
    except ImportError as exc:
        raise SettingsError(f"Kerberos (SPNEGO) needs python-gssapi: {INSTALL_HINT}") from exc

    class ExplainingSPNEGOAuth(HTTPSPNEGOAuth):  # type: ignore[misc]
        """Keeps the reason of the last failed negotiation: requests-gssapi hands
        back the server's bare 401, and the reason is what an operator needs."""

        last_failure: str | None = None

        def generate_request_header(self, *args: Any, **kwargs: Any) -> Any:
            try:
                header = super().generate_request_header(*args, **kwargs)
            except SPNEGOExchangeError as exc:
                self.last_failure = _one_line(str(exc))
                raise
            self.last_failure = None
            return header

    credentials = _credentials(gssapi, principal, keytab)
    # OPTIONAL: Hadoop's filter answers with a mutual-authentication token, which is
    # checked when present; a proxy in front may strip it.
    return ExplainingSPNEGOAuth(creds=credentials, mutual_authentication=OPTIONAL)


def _credentials(gssapi: Any, principal: str | None, keytab: str | None) -> Any:
    if keytab is None:
        if principal is None:
            return None  # the default principal of the default ticket cache
        name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
        return _acquired(gssapi, f"the ticket cache for {principal}", name=name, usage="initiate")
    if not principal:
        raise SettingsError(f"keytab {keytab}: name the principal to log in as")
    _check_readable(Path(keytab))
    name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
    cache = f"MEMORY:yarn-adapt-{os.getpid()}-{next(_CACHE_NUMBERS)}"
    store = {"client_keytab": keytab, "ccache": cache}
    return _acquired(
        gssapi, f"keytab {keytab} ({principal})", name=name, usage="initiate", store=store
    )


def _acquired(gssapi: Any, what: str, **arguments: Any) -> Any:
    try:
        return gssapi.Credentials(**arguments)
    except gssapi.exceptions.GSSError as exc:
        raise SettingsError(f"Kerberos login from {what} failed: {_one_line(str(exc))}") from exc


def _check_readable(path: Path) -> None:
    try:
        with path.open("rb") as stream:
            stream.read(1)
    except OSError as exc:
        raise SettingsError(f"keytab {path}: {exc.strerror or exc}") from exc


def failure_of(auth: Any) -> str | None:
    """Why the last SPNEGO negotiation of ``auth`` failed, if it did."""
    failure = getattr(auth, "last_failure", None)
    return failure if isinstance(failure, str) else None


def _one_line(text: str) -> str:
    return " ".join(text.split())
