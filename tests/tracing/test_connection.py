"""The ``[tracing]`` connection settings against a real redis-server that needs a
password and also serves TLS: ``redis_password``, ``redis_password_file`` (refused when
group or others may read it, like ``[http] token_file``), ``tls``, ``ca_bundle`` and
``verify_tls``; a wrong or missing password is a one-line error naming the setting."""

from __future__ import annotations

import logging
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.tracing.conftest import span, unavailable
from tracing.__main__ import PASSWORD_ENV
from tracing.__main__ import main as standalone
from tracing.errors import StoreUnavailable
from tracing.exporter import ExporterConfig, RedisStreamExporter
from tracing.redisconn import Keys, RedisConfig, make_client
from tracing.store import TraceStore
from yarn_adapt.cli import main
from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.redis_server import RedisServer, find_redis_server, free_port
from yarn_adapt.minicluster.security import TlsMaterial, make_tls_material
from yarn_adapt.service.guard.build import trace_store_opener
from yarn_adapt.service.settings import load_settings

PASSWORD = "s3cret-" + uuid.uuid4().hex


class SecuredRedis(RedisServer):
    """A redis-server with ``requirepass`` on its plain port and TLS on a second port."""

    def __init__(self, directory: Path, tls: TlsMaterial) -> None:
        super().__init__(directory)
        self.tls = tls
        self.tls_port = free_port()
        self.cert, self.key = _pem_files(tls, directory)

    def _config(self) -> str:
        return super()._config() + "\n".join(
            [
                f"requirepass {PASSWORD}",
                f"tls-port {self.tls_port}",
                f"tls-cert-file {self.cert}",
                f"tls-key-file {self.key}",
                f"tls-ca-cert-file {self.tls.ca_cert}",
                "tls-auth-clients no",
                "",
            ]
        )

    def client(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            password=PASSWORD,
            socket_timeout=5,
            retry=Retry(NoBackoff(), 0),
        )


def _pem_files(tls: TlsMaterial, directory: Path) -> tuple[Path, Path]:
    """The server certificate and key out of the PKCS#12 keystore, as redis wants them."""
    key, cert, _ = pkcs12.load_key_and_certificates(
        tls.keystore.read_bytes(), tls.keystore_password.encode()
    )
    assert key is not None and cert is not None
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredRedis]:
    directory = tmp_path_factory.mktemp("redis-secured")
    if find_redis_server() is None:
        unavailable("redis-server is not installed (tests/setup.sh installs it)")
    server = SecuredRedis(directory, make_tls_material(directory / "tls"))
    try:
        server.start()
    except MiniClusterError as exc:
        unavailable(f"redis-server with requirepass and TLS did not start: {exc.one_line()}")
    yield server
    server.kill()


def write_settings(tmp_path: Path, server: SecuredRedis, lines: str) -> Path:
    path = tmp_path / "yarn-adapt.toml"
    path.write_text(
        f'[tracing]\nredis_url = "{server.url}"\nprefix = "c{uuid.uuid4().hex[:8]}"\n{lines}'
    )
    path.chmod(0o600)  # an inline redis_password is refused in a file others may read
    return path


def trace_risk(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["trace", "--config", str(config), "risk", "--json"])
    return code, capsys.readouterr().err


def test_password_from_the_settings_and_from_a_private_file(
    secured: SecuredRedis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("YARN_ADAPT_REDIS_PASSWORD", raising=False)
    config = write_settings(tmp_path, secured, f'redis_password = "{PASSWORD}"\n')
    assert trace_risk(config, capsys) == (0, "")
    secret = tmp_path / "redis.pass"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o600)
    config = write_settings(tmp_path, secured, f'redis_password_file = "{secret}"\n')
    assert trace_risk(config, capsys) == (0, "")
    secret.chmod(0o640)
    code, err = trace_risk(config, capsys)
    assert code == 2 and err.count("\n") == 1
    assert f"[tracing] redis_password_file {secret}: mode 0640" in err and "chmod 600" in err
    assert PASSWORD not in err


def test_a_wrong_or_missing_password_is_one_line_naming_the_setting(
    secured: SecuredRedis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("YARN_ADAPT_REDIS_PASSWORD", raising=False)
    config = write_settings(tmp_path, secured, 'redis_password = "wrong-password"\n')
    code, err = trace_risk(config, capsys)
    assert code == 3 and err.count("\n") == 1 and "Traceback" not in err
    assert f"the server refused {config}: [tracing] redis_password" in err
    assert "wrong-password" not in err
    secret = tmp_path / "wrong.pass"
    secret.write_text("wrong-password\n")
    secret.chmod(0o600)
    config = write_settings(tmp_path, secured, f'redis_password_file = "{secret}"\n')
    code, err = trace_risk(config, capsys)
    assert code == 3 and f"refused {config}: [tracing] redis_password_file" in err
    monkeypatch.setenv("YARN_ADAPT_REDIS_PASSWORD", "also-wrong")
    code, err = trace_risk(config, capsys)
    assert code == 3 and "refused $YARN_ADAPT_REDIS_PASSWORD" in err
    monkeypatch.delenv("YARN_ADAPT_REDIS_PASSWORD")
    config = write_settings(tmp_path, secured, "")
    code, err = trace_risk(config, capsys)
    assert code == 3 and err.count("\n") == 1
    assert f"requires a password and none is set; set {config}: [tracing] redis_password" in err


def test_the_exporter_ships_with_the_password_and_buffers_when_refused(
    secured: SecuredRedis,
) -> None:
    good = RedisConfig(url=secured.url, password=PASSWORD, prefix=f"x{uuid.uuid4().hex[:8]}")
    bad = RedisConfig(url=secured.url, password="nope", prefix=good.prefix)
    fast = ExporterConfig(batch_spans=2, max_buffered_spans=4, retry_initial_s=0.05)
    refused = RedisStreamExporter(make_client(bad, retries=0), Keys(bad.prefix).stream, fast)
    for name in "abc":
        refused.export(span(name, None, 0, 10))
    assert not refused.flush(timeout_s=0.3)
    stats = refused.stats()
    assert not stats.redis_up and stats.exported == 0 and stats.buffered == 3
    refused.close(timeout_s=0.2)
    accepted = RedisStreamExporter(make_client(good, retries=0), Keys(good.prefix).stream, fast)
    for name in "abc":
        accepted.export(span(name, None, 0, 10))
    assert accepted.flush(timeout_s=5)
    assert accepted.stats().exported == 3 and accepted.stats().redis_up
    accepted.close()
    assert secured.client().xlen(Keys(good.prefix).stream) >= 1


def tls_config(secured: SecuredRedis, **options: object) -> RedisConfig:
    return RedisConfig(
        url=f"redis://127.0.0.1:{secured.tls_port}/0",
        password=PASSWORD,
        prefix=f"s{uuid.uuid4().hex[:8]}",
        timeout_s=3,
        **options,  # type: ignore[arg-type]
    )


def test_tls_with_the_ca_bundle_and_refused_with_a_wrong_ca(
    secured: SecuredRedis, tmp_path: Path
) -> None:
    good = tls_config(secured, tls=True, ca_bundle=str(secured.tls.ca_cert))
    exporter = RedisStreamExporter(make_client(good, retries=0), Keys(good.prefix).stream)
    for name in "abc":
        exporter.export(span(name, None, 0, 10))
    assert exporter.flush(timeout_s=5) and exporter.stats().exported == 3
    exporter.close()
    assert secured.client().xlen(Keys(good.prefix).stream) >= 1  # arrived over TLS
    assert TraceStore(make_client(good), good).load().segments == 0
    other_ca = make_tls_material(tmp_path / "other").ca_cert
    wrong = tls_config(secured, tls=True, ca_bundle=str(other_ca))
    with pytest.raises(redis.ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        make_client(wrong, retries=0).ping()
    unverified = tls_config(secured, tls=True, ca_bundle=str(other_ca), verify_tls=False)
    assert make_client(unverified, retries=0).ping()
    plain = tls_config(secured)  # the TLS port does not speak plain RESP
    with pytest.raises(redis.ConnectionError):
        make_client(plain, retries=0).ping()


def test_a_refused_certificate_through_the_cli_is_one_line(
    secured: SecuredRedis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other_ca = make_tls_material(tmp_path / "other").ca_cert
    config = tmp_path / "yarn-adapt.toml"
    config.write_text(
        f'[tracing]\nredis_url = "rediss://127.0.0.1:{secured.tls_port}/0"\n'
        f'redis_password = "{PASSWORD}"\nca_bundle = "{other_ca}"\ntimeout_s = 3\n'
    )
    config.chmod(0o600)  # an inline redis_password is refused in a file others may read
    code, err = trace_risk(config, capsys)
    assert code == 3 and err.count("\n") == 1 and "CERTIFICATE_VERIFY_FAILED" in err
    config.write_text(
        f'[tracing]\nredis_url = "redis://127.0.0.1:{secured.tls_port}/0"\ntls = true\n'
        f'redis_password = "{PASSWORD}"\nca_bundle = "{secured.tls.ca_cert}"\n'
    )
    assert trace_risk(config, capsys) == (0, "")


def test_store_errors_name_the_password_setting_without_the_password(
    secured: SecuredRedis,
) -> None:
    config = RedisConfig(
        url=secured.url, password="hunter2", password_setting="$TRACING_REDIS_PASSWORD"
    )
    with pytest.raises(StoreUnavailable) as caught:
        TraceStore(make_client(config, retries=0), config).load()
    message = caught.value.one_line()
    assert "refused $TRACING_REDIS_PASSWORD" in message and "hunter2" not in message


def test_the_guards_trace_store_names_the_password_setting_too(
    secured: SecuredRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard opens the store through the same connection settings as the CLI."""
    monkeypatch.delenv("YARN_ADAPT_REDIS_PASSWORD", raising=False)
    config = write_settings(tmp_path, secured, 'redis_password = "wrong-password"\n')
    opener = trace_store_opener(load_settings(config))
    with pytest.raises(StoreUnavailable) as caught:
        TraceStore(make_client(opener.config, retries=0), opener.config).load()
    message = caught.value.one_line()
    assert f"refused {config}: [tracing] redis_password" in message
    assert "wrong-password" not in message


def test_the_standalone_worker_stops_at_a_refused_password(
    secured: SecuredRedis, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "wrong-password")
    # in process: keep the test run's root logger and SIGTERM handler as they are
    monkeypatch.setattr(logging, "basicConfig", lambda **_: None)
    monkeypatch.setattr(signal, "signal", lambda *_: None)
    assert standalone(["ingest", "--redis-url", secured.url]) == 2  # not retried for ever
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused $TRACING_REDIS_PASSWORD" in err
