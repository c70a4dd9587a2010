"""The Redis edge: connection settings, the client, and the one place where redis-py's
exceptions become :mod:`tracing.errors`.

Keys (``prefix`` defaults to ``yat``)::

    {prefix}:spans         stream of span batches (tracing.wire), written by exporters
    {prefix}:dead          stream of entries the ingest worker could not decode (bounded:
                           the problem, size and first bytes of each, at most MAXLEN)
    {prefix}:seg:<n>       one stored segment of assembled traces and their names
                           (tracing.segment), expiring after the retention
    {prefix}:segments      sorted set: segment key -> newest span end (µs) in it
    {prefix}:segsize       hash: segment key -> its size in bytes (the memory budget)
    {prefix}:seq           segment counter

Earlier versions shared interned names through three more keys, which the store now only
reads (for segments of the first format) and deletes once no such segment is left:
``{prefix}:names`` (text -> id), ``{prefix}:names:rev`` (id -> text) and
``{prefix}:names:seq``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tracing.errors import StoreError, StoreUnavailable

DEFAULT_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True, kw_only=True)
class RedisConfig:
    """How to reach the trace store. The password never shows in a repr or a message."""

    url: str = DEFAULT_URL
    password: str = field(default="", repr=False)
    password_setting: str = "the password"  # where it came from, named in auth errors
    tls: bool = False  # also on for rediss:// URLs
    ca_bundle: str = ""
    verify_tls: bool = True
    timeout_s: float = 5.0
    prefix: str = "yat"

    @property
    def uses_tls(self) -> bool:
        return self.tls or self.url.startswith("rediss://")

    def display_url(self) -> str:
        """The URL with any password in it masked."""
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        netloc = f"{parts.username or ''}:***@{parts.hostname}"
        if parts.port:
            netloc += f":{parts.port}"
        return urlunsplit(parts._replace(netloc=netloc))


def config_problem(config: RedisConfig) -> str | None:
    """Why ``config`` cannot work, or None (checked before anything connects)."""
    scheme = urlsplit(config.url).scheme
    if scheme not in ("redis", "rediss", "unix"):
        return f"url {config.display_url()!r}: scheme must be redis://, rediss:// or unix://"
    if config.timeout_s <= 0:
        return f"timeout_s {config.timeout_s} must be positive"
    if not config.prefix or any(c.isspace() for c in config.prefix):
        return f"prefix {config.prefix!r} must be a non-empty word"
    return None


def make_client(config: RedisConfig, *, retries: int | None = None) -> redis.Redis:
    """A client for the trace store (bytes in, bytes out). Connects lazily.

    ``retries``: how often redis-py itself retries a command after a connection error
    (None: its default, 3 with growing back-off). Give the exporter 0: it retries whole
    batches itself and must not sit in back-off while its buffer fills."""
    problem = config_problem(config)
    if problem:
        raise StoreError(problem)
    url = config.url
    if config.tls and url.startswith("redis://"):
        url = "rediss://" + url[len("redis://") :]
    options: dict[str, Any] = {
        "socket_timeout": config.timeout_s,
        "socket_connect_timeout": config.timeout_s,
        "health_check_interval": 30,
    }
    if retries is not None:
        options["retry"] = Retry(NoBackoff(), retries)
    if config.password:
        options["password"] = config.password
    if url.startswith("rediss://"):
        options["ssl_cert_reqs"] = "required" if config.verify_tls else "none"
        if config.ca_bundle:
            options["ssl_ca_certs"] = config.ca_bundle
    return redis.Redis.from_url(url, **options)


@contextlib.contextmanager
def store_errors(config: RedisConfig, doing: str) -> Iterator[None]:
    """Turn redis-py's exceptions raised while ``doing`` into the tracing error tree."""
    try:
        yield
    except redis.AuthenticationError as exc:
        raise StoreUnavailable(
            f"redis {config.display_url()}: {doing}: {auth_problem(config, exc)}"
        ) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise StoreUnavailable(f"redis {config.display_url()}: {doing}: {exc}") from exc
    except redis.RedisError as exc:
        raise StoreError(f"redis {config.display_url()}: {doing}: {exc}") from exc


def auth_problem(config: RedisConfig, exc: redis.AuthenticationError) -> str:
    """What went wrong with the password, naming the setting it came from."""
    if config.password:
        return f"the server refused {config.password_setting} ({exc})"
    return f"the server requires a password and none is set; set {config.password_setting}"


def is_transient(exc: BaseException) -> bool:
    """Errors a writer retries: the connection, a timeout, Redis loading or read-only.
    A refused password is not one: waiting does not fix the setting."""
    if isinstance(exc, redis.AuthenticationError):
        return False
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return True
    text = str(exc)
    return isinstance(exc, redis.ResponseError) and text.startswith(("LOADING", "READONLY"))


def as_text(value: object) -> str:
    """A Redis reply item (bytes from this client) as text."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def as_bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


@dataclass(frozen=True)
class Keys:
    """The key names under one prefix."""

    prefix: str

    @property
    def stream(self) -> str:
        return f"{self.prefix}:spans"

    @property
    def group(self) -> str:
        return f"{self.prefix}-ingest"

    @property
    def dead(self) -> str:
        return f"{self.prefix}:dead"

    @property
    def segments(self) -> str:
        return f"{self.prefix}:segments"

    @property
    def seq(self) -> str:
        return f"{self.prefix}:seq"

    @property
    def names(self) -> str:
        return f"{self.prefix}:names"

    @property
    def names_rev(self) -> str:
        return f"{self.prefix}:names:rev"

    @property
    def names_seq(self) -> str:
        return f"{self.prefix}:names:seq"

    @property
    def shared_names(self) -> tuple[str, str, str]:
        """The name keys of earlier versions (see the module docstring)."""
        return (self.names, self.names_rev, self.names_seq)

    def segment(self, number: int) -> str:
        return f"{self.prefix}:seg:{number}"
