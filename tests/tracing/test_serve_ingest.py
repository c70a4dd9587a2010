"""``[tracing] ingest = true``: ``yarn-adapt serve`` runs the ingest worker, and with
``otlp_listen`` the OTLP/HTTP receiver, itself (:mod:`yarn_adapt.service.ingest`), against
a real redis-server: an exporter's request is answered and stored while the block runs,
and the receiver is gone and the worker stopped after it; settings that cannot work are
refused in one line."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import requests

from tests.tracing.conftest import one_span_request
from tracing.redisconn import RedisConfig, make_client
from tracing.store import TraceStore
from yarn_adapt.errors import SettingsError
from yarn_adapt.minicluster.redis_server import RedisServer, free_port
from yarn_adapt.service.ingest import ingesting
from yarn_adapt.service.settings import Settings, defaults, load_settings


def with_tracing(store_config: RedisConfig, **changes: object) -> Settings:
    base = defaults()
    tracing = replace(
        base.tracing, redis_url=store_config.url, prefix=store_config.prefix, **changes
    )
    return base.with_overrides(tracing=tracing)


def test_serve_ingests_and_receives_while_it_runs_and_stops_both_after(
    redis_server: RedisServer, store_config: RedisConfig, tmp_path: Path
) -> None:
    port = free_port()
    token = tmp_path / "otlp-token"
    token.write_text("t0ken\n")
    token.chmod(0o600)
    settings = with_tracing(
        store_config, ingest=True, otlp_listen=f"127.0.0.1:{port}",
        otlp_token_file=str(token), quiet_s=0.2,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1/traces"
    headers = {"Content-Type": "application/x-protobuf"}
    store = TraceStore(make_client(store_config), store_config)
    before = {t.name for t in threading.enumerate()}
    with ingesting(settings):
        assert "ingest" in {t.name for t in threading.enumerate()} - before
        sent = {**headers, "Authorization": "Bearer t0ken"}
        reply = requests.post(url, data=one_span_request(), headers=sent, timeout=10)
        assert reply.status_code == 200, reply.content
        assert (
            requests.post(url, data=one_span_request(), headers=headers, timeout=10).status_code
            == 401
        )
        deadline = time.monotonic() + 30
        while store.load().columns.n_spans < 1 and time.monotonic() < deadline:
            time.sleep(0.1)  # the worker stores the trace once it is quiet
        assert store.load().columns.n_spans == 1
    assert "ingest" not in {t.name for t in threading.enumerate()}
    with pytest.raises(requests.ConnectionError):
        requests.post(url, data=one_span_request(), headers=headers, timeout=5)


def test_without_ingest_nothing_runs(store_config: RedisConfig) -> None:
    before = threading.active_count()
    with ingesting(with_tracing(store_config)):
        assert threading.active_count() == before


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('otlp_listen = "127.0.0.1:4318"', "otlp_listen: '127.0.0.1:4318' needs ingest = true"),
        ('ingest = true\notlp_listen = "4318"', "otlp_listen: '4318' must be HOST:PORT"),
        ('ingest = true\notlp_listen = "h:99999"', "otlp_listen: 'h:99999' must be HOST:PORT"),
    ],
)
def test_a_receiver_that_cannot_work_is_refused_in_one_line(
    tmp_path: Path, table: str, said: str
) -> None:
    config = tmp_path / "yarn-adapt.toml"
    config.write_text(f"[tracing]\n{table}\n")
    with pytest.raises(SettingsError) as refused:
        load_settings(config)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_off_loopback_without_a_token_the_receiver_is_refused(store_config: RedisConfig) -> None:
    settings = with_tracing(store_config, ingest=True, otlp_listen=f"0.0.0.0:{free_port()}")
    with pytest.raises(SettingsError, match="no token is set"), ingesting(settings):
        pass  # pragma: no cover
