"""The one seam between yarn-adapt and the network: HTTP to the RM and JobHistory.

:class:`Transport` sends one request over a shared ``requests.Session`` with the
timeouts, TLS and authentication of :class:`HttpSettings`, retries what is safe to
retry, and translates every library exception into the project's error tree in one
place (:func:`_mapped_errors`), always ``raise ... from exc``.

:class:`ResourceManagerEndpoints` sits on top and finds the *active* ResourceManager
among several configured web addresses (RM high availability).

What is retried (exponential backoff with full jitter, capped):

==============================================  =========  ================
failure                                         GET        PUT / POST
==============================================  =========  ================
connection refused / connect timeout (not sent) retried    retried
read timeout, connection dropped mid-request    retried    never (may have
                                                           reached the RM)
HTTP 5xx                                        retried    never
HTTP 4xx                                        never      never
==============================================  =========  ================

Errors raised (see :mod:`yarn_adapt.errors`): ``YarnUnavailable`` (nothing accepted a
connection, TLS failed), ``YarnTimeout`` (an address answered too slowly),
``YarnHTTPError`` (4xx/5xx with the server's own message, a refused redirect),
``YarnMalformedResponse`` (a body that is not JSON), ``YarnStandby`` (every RM is a
standby). Every message is one line naming the method and the URL.
"""

from __future__ import annotations

import json
import logging
import random
import re
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Literal
from urllib.parse import urlencode, urlsplit

import requests
import urllib3.exceptions

from yarn_adapt.errors import (
    SettingsError,
    YarnError,
    YarnHTTPError,
    YarnMalformedResponse,
    YarnStandby,
    YarnTimeout,
    YarnUnavailable,
)
from yarn_adapt.model import HAState
from yarn_adapt.yarn.parse import parse_cluster_info
from yarn_adapt.yarn.spnego import failure_of, spnego_auth

log = logging.getLogger(__name__)

AuthMode = Literal["simple", "kerberos"]
Params = Mapping[str, str | int]

_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_MESSAGE_LIMIT = 300
_SECRET_FIELDS = frozenset({"client_key"})


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True, kw_only=True)
class HttpSettings:
    """How yarn-adapt talks HTTP to YARN. Times in seconds.

    ``retries`` counts extra attempts after the first. With ``auth="simple"`` the
    ``user`` is sent as the ``user.name`` query parameter (Hadoop's pseudo
    authentication); ``auth="kerberos"`` negotiates SPNEGO through the optional
    ``kerberos`` extra (requests-gssapi; see :mod:`yarn_adapt.yarn.spnego`), logging
    in from ``kerberos_keytab`` as ``kerberos_principal`` when a keytab is given, else
    from the ticket cache of ``kinit``. ``ca_bundle`` overrides ``verify_tls``.
    """

    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    retries: int = 3
    backoff_base_s: float = 0.25
    backoff_cap_s: float = 8.0
    verify_tls: bool = True
    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    auth: AuthMode = "simple"
    user: str | None = None
    kerberos_principal: str | None = None
    kerberos_keytab: str | None = None

    def __post_init__(self) -> None:
        for problem in self._problems():
            raise SettingsError(f"http settings: {problem}")

    def _problems(self) -> Iterator[str]:
        if self.connect_timeout_s <= 0 or self.read_timeout_s <= 0:
            yield "timeouts must be positive"
        if self.retries < 0:
            yield f"retries must be >= 0, got {self.retries}"
        if not 0 <= self.backoff_base_s <= self.backoff_cap_s:
            yield "need 0 <= backoff_base_s <= backoff_cap_s"
        if self.auth not in ("simple", "kerberos"):
            yield f"auth must be 'simple' or 'kerberos', got {self.auth!r}"
        if self.client_key and not self.client_cert:
            yield "client_key given without client_cert"
        if self.kerberos_keytab and self.auth != "kerberos":
            yield "kerberos_keytab given without auth = 'kerberos'"
        if self.kerberos_keytab and not self.kerberos_principal:
            yield "kerberos_keytab given without kerberos_principal"

    @property
    def timeout(self) -> tuple[float, float]:
        return (self.connect_timeout_s, self.read_timeout_s)

    @property
    def tls_verify(self) -> bool | str:
        return self.ca_bundle if self.ca_bundle else self.verify_tls

    @property
    def tls_client_cert(self) -> str | tuple[str, str] | None:
        if self.client_cert and self.client_key:
            return (self.client_cert, self.client_key)
        return self.client_cert

    def backoff_s(self, retry: int, unit_random: float) -> float:
        """Full-jitter exponential backoff before retry number ``retry`` (0-based)."""
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2.0**retry)
        return ceiling * unit_random

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={self._shown(f.name)}" for f in fields(self))
        return f"HttpSettings({shown})"

    def _shown(self, name: str) -> str:
        value = getattr(self, name)
        return "'***'" if name in _SECRET_FIELDS and value else repr(value)


DEFAULT_HTTP_SETTINGS = HttpSettings()


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class HttpReply:
    """A response with status < 400 (errors are raised, never returned)."""

    method: str
    url: str
    status: int
    text: str
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_redirect(self) -> bool:
        return self.status in _REDIRECT_STATUSES

    @property
    def location(self) -> str | None:
        return self.headers.get("location")

    def json(self) -> object:
        """The body as JSON; :class:`YarnMalformedResponse` naming the URL if it is not."""
        try:
            return json.loads(self.text)
        except ValueError as exc:
            problem = f"body is not JSON ({exc.__class__.__name__}: {exc}): {_excerpt(self.text)!r}"
            raise YarnMalformedResponse(self.url, problem) from exc


def _excerpt(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def server_message(text: str) -> str:
    """The server's own explanation from an error body, on one line.

    Hadoop's web services answer errors with ``{"RemoteException": {"exception",
    "message", "javaClassName"}}`` (``GenericExceptionHandler``); some endpoints, such
    as ``PUT /scheduler-conf``, answer with plain text, and Jetty with an HTML page.
    """
    remote = _remote_exception_message(text)
    if remote is not None:
        return remote
    plain = re.sub(r"<(script|style)\b.*?</\1>|<[^>]+>", " ", text, flags=re.S | re.I)
    return _excerpt(plain, _MESSAGE_LIMIT) or "(empty body)"


def _remote_exception_message(text: str) -> str | None:
    try:
        document = json.loads(text)
    except ValueError:
        return None
    remote = document.get("RemoteException") if isinstance(document, dict) else None
    if not isinstance(remote, dict):
        return None
    for key in ("message", "exception", "javaClassName"):
        if remote.get(key):
            return _excerpt(str(remote[key]), _MESSAGE_LIMIT)
    return None


# --------------------------------------------------------------------------- error mapping


def _display_url(url: str, params: Params | None) -> str:
    return f"{url}?{urlencode(params)}" if params else url


def _innermost(exc: BaseException) -> BaseException:
    """The root library cause: requests and urllib3 wrap it in args[0] or ``reason``."""
    for _depth in range(8):
        wrapped = exc.args[0] if exc.args else None
        inner = wrapped if isinstance(wrapped, BaseException) else getattr(exc, "reason", None)
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return exc


def _reason(exc: BaseException) -> str:
    """A short cause such as ``[Errno 111] Connection refused``."""
    text = str(_innermost(exc))
    errno = re.search(r"\[Errno -?\d+\] [^'\")\]]+", text)
    if errno:
        return errno.group(0).strip()
    return _excerpt(text, 160) or exc.__class__.__name__


TLS_HINT = "trust the server's CA with --ca-bundle or [yarn] ca_bundle"


def _tls_failure(exc: BaseException) -> str:
    reason = _reason(exc)
    hint = f"; {TLS_HINT}" if "CERTIFICATE_VERIFY_FAILED" in reason else ""
    return f"TLS failed: {reason}{hint}"


def _attempt_note(attempt: int) -> str:
    return f" (attempt {attempt})" if attempt > 1 else ""


@contextmanager
def _mapped_errors(method: str, url: str, attempt: int) -> Iterator[None]:
    """Translate ``requests`` exceptions into the error tree: the one place it happens."""
    where = f"{method} {url}"
    note = _attempt_note(attempt)
    try:
        yield
    except requests.exceptions.SSLError as exc:
        raise YarnUnavailable(f"{where}: {_tls_failure(exc)}{note}") from exc
    except requests.exceptions.ConnectTimeout as exc:
        raise YarnUnavailable(f"{where}: connect timed out{note}") from exc
    except requests.exceptions.ReadTimeout as exc:
        raise YarnTimeout(f"{where}: no answer within the read timeout{note}") from exc
    except requests.exceptions.ConnectionError as exc:
        raise YarnUnavailable(f"{where}: cannot connect: {_reason(exc)}{note}") from exc
    except (
        requests.exceptions.InvalidURL,
        requests.exceptions.InvalidSchema,
        requests.exceptions.MissingSchema,
    ) as exc:
        raise SettingsError(f"{where}: invalid URL: {exc}") from exc
    except requests.exceptions.RequestException as exc:
        raise YarnError(f"{where}: {exc.__class__.__name__}: {_reason(exc)}{note}") from exc


def _never_sent(error: YarnError) -> bool:
    """True when the request cannot have reached the server (refused, DNS, connect
    timeout): then even a PUT or POST may be sent again."""
    cause = error.__cause__
    if isinstance(cause, requests.exceptions.ConnectTimeout):
        return True
    if not isinstance(cause, requests.exceptions.ConnectionError) or not cause.args:
        return False
    inner = cause.args[0]
    reason = getattr(inner, "reason", inner)
    return isinstance(reason, urllib3.exceptions.NewConnectionError)


def _may_retry_failure(method: str, error: YarnError) -> bool:
    if isinstance(error, YarnHTTPError):
        return error.status >= 500 and method in _IDEMPOTENT_METHODS
    if isinstance(error.__cause__, requests.exceptions.SSLError):
        return False  # a certificate problem does not heal by asking again
    if isinstance(error, (YarnUnavailable, YarnTimeout)):
        return method in _IDEMPOTENT_METHODS or _never_sent(error)
    return False


# --------------------------------------------------------------------------- transport


@dataclass(frozen=True)
class Body:
    """A request body and its content type."""

    content: str
    content_type: str

    @classmethod
    def json(cls, value: object) -> Body:
        return cls(json.dumps(value), "application/json")

    @classmethod
    def xml(cls, text: str) -> Body:
        return cls(text, "application/xml")


class Transport:
    """Sends requests with retries and error mapping over one ``requests.Session``."""

    def __init__(
        self,
        settings: HttpSettings = DEFAULT_HTTP_SETTINGS,
        *,
        sleep: Callable[[float], None] = time.sleep,
        unit_random: Callable[[], float] = random.random,
    ) -> None:
        self.settings = settings
        self._session = _build_session(settings)
        self._sleep = sleep
        self._unit_random = unit_random

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Params | None = None,
        body: Body | None = None,
        retries: int | None = None,
    ) -> HttpReply:
        """Send with retries; return a reply with status < 400 (redirects included,
        never followed) or raise from the error tree."""
        allowed = self.settings.retries if retries is None else retries
        for retry in range(allowed + 1):
            try:
                return self._attempt(method, url, params, body, retry + 1)
            except YarnError as error:
                if retry == allowed or not _may_retry_failure(method, error):
                    raise
                log.info("retrying after: %s", error.one_line())
            self._sleep(self.settings.backoff_s(retry, self._unit_random()))
        raise AssertionError("unreachable: the loop returns or raises")

    def _attempt(
        self, method: str, url: str, params: Params | None, body: Body | None, attempt: int
    ) -> HttpReply:
        shown = _display_url(url, params)
        with _mapped_errors(method, shown, attempt):
            response = self._session.request(
                method,
                url,
                params=self._with_auth(params),
                data=body.content.encode() if body else None,
                headers={"Content-Type": body.content_type} if body else None,
                timeout=self.settings.timeout,
                allow_redirects=False,
                # per request: requests lets REQUESTS_CA_BUNDLE override a session's verify
                verify=self.settings.tls_verify,
                cert=self.settings.tls_client_cert,
            )
            reply = _reply_of(method, shown, response)
        if reply.status >= 400:
            explained = self._auth_failure(reply) + server_message(reply.text)
            message = explained + _attempt_note(attempt)
            raise YarnHTTPError(method, shown, reply.status, message)
        return reply

    def _auth_failure(self, reply: HttpReply) -> str:
        """Why a 401 happened, as a prefix of the error message: SPNEGO failed, or
        the server wants Kerberos and we did not offer it."""
        if reply.status != 401:
            return ""
        if self.settings.auth == "kerberos":
            failure = failure_of(self._session.auth)
            return f"Kerberos negotiation failed ({failure}): " if failure else ""
        if reply.headers.get("www-authenticate", "").lower().startswith("negotiate"):
            return "the server asks for Kerberos (--kerberos, [yarn] kerberos = true): "
        return ""

    def _with_auth(self, params: Params | None) -> dict[str, str | int]:
        merged = dict(params or {})
        if self.settings.auth == "simple" and self.settings.user:
            merged["user.name"] = self.settings.user
        return merged


def _reply_of(method: str, shown_url: str, response: requests.Response) -> HttpReply:
    headers = {name.lower(): value for name, value in response.headers.items()}
    return HttpReply(method, shown_url, response.status_code, response.text, headers)


def _build_session(settings: HttpSettings) -> requests.Session:
    session = requests.Session()
    session.headers["Accept"] = "application/json"
    if settings.auth == "kerberos":
        session.auth = spnego_auth(settings.kerberos_principal, settings.kerberos_keytab)
    return session


# --------------------------------------------------------------------------- RM HA

# What a standby RM's web filter answers (RMWebAppFilter.doFilter, apache/hadoop,
# hadoop-yarn-server-resourcemanager .../webapp/RMWebAppFilter.java):
# - it knows the active RM: 307 with Location = active web address + same path and
#   query, body "This is standby RM. The redirect url is: ...";
# - it cannot find one: 307 with only a Refresh header and "Can not find any active
#   RM. Will retry in next N seconds.", or, after enough refreshes, status 200 with
#   "There is no active RM right now." (plain text, not JSON);
# - /ws/v1/cluster/info is never redirected (shouldRedirect), so it is the probe.
_STANDBY_TEXTS = (
    "This is standby RM",
    "Can not find any active RM",
    "There is no active RM right now",
)
INFO_PATH = "/ws/v1/cluster/info"


def _standby_text(reply: HttpReply) -> bool:
    return reply.text.lstrip().startswith(_STANDBY_TEXTS)


def _parse_base_url(url: str) -> str:
    text = url.strip()
    if text and "://" not in text:
        text = "http://" + text  # host:port, as yarn-site.xml writes webapp.address
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"ResourceManager address {url!r}: expected http(s)://host:port")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


@dataclass(frozen=True)
class _Endpoint:
    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> _Endpoint:
        parts = urlsplit(url)
        default_port = 443 if parts.scheme == "https" else 80
        return cls(parts.scheme, (parts.hostname or "").lower(), parts.port or default_port)

    def addresses(self) -> frozenset[str]:
        try:
            infos = socket.getaddrinfo(self.host, self.port, proto=socket.IPPROTO_TCP)
        except OSError:
            return frozenset({self.host})
        return frozenset(str(info[4][0]) for info in infos) | {self.host}

    def same_as(self, other: _Endpoint) -> bool:
        """Same scheme and port, and the host names resolve to a common address
        (the RM writes its own host name, e.g. ``localhost`` for ``127.0.0.1``)."""
        if (self.scheme, self.port) != (other.scheme, other.port):
            return False
        return self.host == other.host or bool(self.addresses() & other.addresses())


class ResourceManagerEndpoints:
    """Routes requests to the active RM among ``base_urls`` (``http://host:port``).

    The active address is remembered. On a standby answer, a redirect, or a failure
    to connect, the addresses are probed again (``GET /ws/v1/cluster/info``, which a
    standby answers itself with ``haState: STANDBY``). Redirects are followed only
    to configured addresses. ``YarnStandby`` when no address is active but some
    reported an HA state; ``YarnUnavailable`` when none did.
    """

    def __init__(self, base_urls: str | Sequence[str], transport: Transport) -> None:
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        if not urls:
            raise SettingsError("no ResourceManager address configured")
        self.base_urls = tuple(dict.fromkeys(_parse_base_url(url) for url in urls))
        self._transport = transport
        self._active: str | None = None

    @property
    def active(self) -> str | None:
        """The address last seen active, if any."""
        return self._active

    def request(
        self, method: str, path: str, *, params: Params | None = None, body: Body | None = None
    ) -> HttpReply:
        base = self._active or self.find_active()
        for _hop in range(len(self.base_urls) + 1):
            base, reply = self._send(method, base, path, params, body)
            if not (reply.is_redirect or _standby_text(reply)):
                self._active = base
                return reply
            base = self._next_after_standby(method, reply)
        raise YarnStandby(f"{method} {path}: standby redirects did not reach an active RM")

    def _send(
        self, method: str, base: str, path: str, params: Params | None, body: Body | None
    ) -> tuple[str, HttpReply]:
        """The reply and the address that gave it: another one after a failover."""
        try:
            return base, self._transport.request(method, base + path, params=params, body=body)
        except (YarnUnavailable, YarnTimeout) as error:
            self._active = None
            if len(self.base_urls) == 1 or not _may_fail_over(method, error):
                raise
            log.warning("ResourceManager %s failed, looking for another: %s", base, error)
            other = self.find_active(exclude=base)
            return other, self._transport.request(method, other + path, params=params, body=body)

    def _next_after_standby(self, method: str, reply: HttpReply) -> str:
        self._active = None
        if reply.is_redirect and reply.location:
            target = self._known_base(reply.location)
            if target is None:
                raise YarnHTTPError(
                    method,
                    reply.url,
                    reply.status,
                    f"refused redirect to {reply.location}: not a configured ResourceManager",
                )
            log.info("standby RM redirected %s %s to %s", method, reply.url, target)
            return target
        log.info("standby RM answered %s %s: %s", method, reply.url, _excerpt(reply.text))
        return self.find_active()

    def _known_base(self, location: str) -> str | None:
        wanted = _Endpoint.of(location)
        return next((b for b in self.base_urls if _Endpoint.of(b).same_as(wanted)), None)

    def find_active(self, exclude: str | None = None) -> str:
        """Probe every address (``exclude`` last) and remember the active one."""
        ordered = sorted(self.base_urls, key=lambda base: base == exclude)
        findings = []
        for base in ordered:
            finding = self._probe(base)
            if finding.ha_state is HAState.ACTIVE:
                self._active = base
                return base
            findings.append(finding)
        summary = "; ".join(str(finding) for finding in findings)
        if any(finding.ha_state is not None for finding in findings):
            raise YarnStandby(f"no active ResourceManager: {summary}")
        raise YarnUnavailable(f"no ResourceManager answered: {summary}")

    def _probe(self, base: str) -> _ProbeFinding:
        try:
            reply = self._transport.request("GET", base + INFO_PATH, retries=0)
            state = parse_cluster_info(reply.json(), reply.url).ha_state
            return _ProbeFinding(base, state, state.value)
        except (YarnUnavailable, YarnTimeout) as error:
            if isinstance(error.__cause__, requests.exceptions.SSLError):
                return _ProbeFinding(base, None, _tls_failure(error.__cause__))
            return _ProbeFinding(base, None, f"unreachable ({_short_cause(error)})")
        except YarnError as error:
            return _ProbeFinding(base, None, f"answered badly ({error.one_line()})")


@dataclass(frozen=True)
class _ProbeFinding:
    base: str
    ha_state: HAState | None
    description: str

    def __str__(self) -> str:
        return f"{self.base} {self.description}"


def _short_cause(error: YarnError) -> str:
    return _reason(error.__cause__) if error.__cause__ else error.one_line()


def _may_fail_over(method: str, error: YarnError) -> bool:
    return method in _IDEMPOTENT_METHODS or _never_sent(error)
