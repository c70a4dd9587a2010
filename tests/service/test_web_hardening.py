"""The page's defences: where it may listen, what a token must be, guessing
throttled, ids SQLite cannot hold, a public origin behind a TLS proxy, and the
security headers on every response (Flask's test client; the bind tests use the
real waitress server)."""

from __future__ import annotations

import logging
import re
from importlib import resources
from pathlib import Path

import pytest
import requests
from flask.testing import FlaskClient

from tests.service.factories import TOKEN, settings_for, sim_service
from yarn_adapt.cli import main
from yarn_adapt.errors import SettingsError
from yarn_adapt.service.runner import ensure_token, is_loopback, serving
from yarn_adapt.service.service import Service
from yarn_adapt.service.settings import load_settings, write_token
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.throttle import LoginThrottle

AUTH = {"Authorization": f"Bearer {TOKEN}"}
PUBLIC_URL = "https://yarn-adapt.example.com"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def service(tmp_path: Path) -> Service:
    service = sim_service(tmp_path)
    service.loop.run_round()  # proposal 1, pending
    return service


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(service: Service, clock: FakeClock) -> FlaskClient:
    return create_app(service, LoginThrottle(clock=clock)).test_client()


def csrf_of(page: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', page)
    assert match, "no CSRF field on the page"
    return match.group(1)


# --------------------------------------------------------------------------- binding


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("192.0.2.7", False)],
)  # fmt: skip
def test_loopback_addresses_are_recognised(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_page_is_not_served_off_loopback_without_public(tmp_path: Path) -> None:
    service = sim_service(tmp_path, http={"host": "0.0.0.0", "port": 0})
    try:
        with (
            pytest.raises(
                SettingsError,
                match=r"\[http\] host '0.0.0.0' is not a loopback .*"
                r"public = true",
            ),
            serving(service),
        ):
            pytest.fail("served off loopback")  # pragma: no cover
    finally:
        service.close()


def test_public_serves_off_loopback_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = sim_service(tmp_path, http={"host": "0.0.0.0", "port": 0, "public": True})
    try:
        with caplog.at_level(logging.WARNING), serving(service) as server:
            assert server is not None
            url = f"http://127.0.0.1:{server.port}/healthz"
            reply = requests.get(url, headers={"Connection": "close"}, timeout=10)
            assert reply.json() == {"ok": True}
    finally:
        service.close()
    assert any("off loopback" in record.getMessage() for record in caplog.records)


def test_serve_refuses_an_off_loopback_host_before_starting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "yarn-adapt.toml"
    config.write_text(
        f'[state]\ndir = "{tmp_path / "state"}"\n[http]\nhost = "0.0.0.0"\n'
        '[yarn]\nrm = ["http://127.0.0.1:9"]\n'
    )
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "[http] host '0.0.0.0' is not a loopback address" in err and "--public" in err
    assert err.count("\n") == 1
    assert not (tmp_path / "state").exists()  # nothing started


# --------------------------------------------------------------------------- tokens


def _settings_file(tmp_path: Path, http: str) -> Path:
    path = tmp_path / "yarn-adapt.toml"
    path.write_text(f"[http]\n{http}\n")
    path.chmod(0o600)  # an inline token is refused in a file others may read
    return path


@pytest.mark.parametrize(
    ("environ", "http", "where"),
    [
        ({"YARN_ADAPT_TOKEN": "x"}, "", r"\$YARN_ADAPT_TOKEN"),
        ({}, 'token = "fifteen-chars-x"', r"\[http\] token"),
    ],
)
def test_a_short_token_is_refused(
    tmp_path: Path, environ: dict[str, str], http: str, where: str
) -> None:
    settings = load_settings(_settings_file(tmp_path, http))
    with pytest.raises(SettingsError, match=where + r": the token has \d+ characters; at least 16"):
        write_token(settings, environ)


def test_a_short_token_in_a_file_is_refused_without_showing_it(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("a\n")
    token_file.chmod(0o600)
    settings = load_settings(_settings_file(tmp_path, f'token_file = "{token_file}"'))
    with pytest.raises(SettingsError, match=r"token_file .*token: the token has 1 characters") as e:
        write_token(settings, {})
    assert "'a'" not in str(e.value)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_token_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(mode)
    settings = load_settings(_settings_file(tmp_path, f'token_file = "{token_file}"'))
    with pytest.raises(SettingsError) as refused:
        write_token(settings, {})
    message = refused.value.one_line()
    assert str(token_file) in message and f"mode {mode:04o}" in message
    assert TOKEN not in message and "\n" not in message
    token_file.chmod(0o600)
    assert write_token(settings, {}) == TOKEN


def test_a_generated_token_file_opened_up_is_refused(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    token, path = ensure_token(settings)
    assert path is not None and len(token) >= 16 and path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o644)
    with pytest.raises(SettingsError, match=r"generated token file .*: mode 0644"):
        ensure_token(settings)


# --------------------------------------------------------------------------- throttling


def test_failed_sign_ins_are_throttled_per_address(client: FlaskClient, clock: FakeClock) -> None:
    for _attempt in range(6):  # five free failures, then a one-second lock-out
        assert client.post("/login", data={"token": "not-the-token-at-all"}).status_code == 403
    locked = client.post("/login", data={"token": TOKEN})  # even the right one waits
    assert locked.status_code == 429
    assert locked.headers["Retry-After"] == "1"
    assert "too many invalid tokens" in locked.get_data(as_text=True)
    elsewhere = client.post(
        "/login", data={"token": TOKEN}, environ_base={"REMOTE_ADDR": "127.0.0.9"}
    )
    assert elsewhere.status_code == 302  # another address is not locked out
    clock.now += 1.0
    assert client.post("/login", data={"token": "still-not-the-token"}).status_code == 403
    doubled = client.post("/login", data={"token": TOKEN})
    assert doubled.status_code == 429 and doubled.headers["Retry-After"] == "2"
    clock.now += 2.0
    assert client.post("/login", data={"token": TOKEN}).status_code == 302
    # a success clears the record: five free failures again
    for _attempt in range(5):
        assert client.post("/login", data={"token": "wrong-token-again"}).status_code == 403
    assert client.post("/login", data={"token": TOKEN}).status_code == 302


def test_bearer_guesses_on_the_api_are_throttled(
    client: FlaskClient, service: Service, clock: FakeClock
) -> None:
    wrong = {"Authorization": "Bearer a-wrong-bearer-token"}
    statuses = [
        client.post("/api/proposals/1/approve", headers=wrong).status_code for _ in range(8)
    ]
    assert statuses == [403] * 6 + [429] * 2
    refused = client.post("/api/proposals/1/approve", headers=AUTH)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert "retry in" in refused.get_json()["error"]
    assert service.store.proposal(1).state == "pending"
    clock.now += 300
    assert client.post("/api/proposals/1/approve", headers=AUTH).status_code == 200


# --------------------------------------------------------------------------- ids


HUGE_IDS = [str(2**63), str(2**64 + 5), "9" * 30, "0", str(2**63 - 1)]


@pytest.mark.parametrize("proposal_id", HUGE_IDS)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/proposals/{}"),
        ("POST", "/api/proposals/{}/approve"),
        ("GET", "/proposals/{}"),
        ("POST", "/proposals/{}/approve"),
    ],
)
def test_ids_sqlite_cannot_hold_are_unknown_proposals(
    client: FlaskClient, method: str, path: str, proposal_id: str
) -> None:
    client.post("/login", data={"token": TOKEN})
    csrf = csrf_of(client.get("/proposals/1").get_data(as_text=True))
    form = {"csrf": csrf, "confirm": "yes"}
    reply = client.open(path.format(proposal_id), method=method, headers=AUTH, data=form)
    assert reply.status_code == 404, reply.get_data(as_text=True)[:300]
    assert "Traceback" not in reply.get_data(as_text=True)


# --------------------------------------------------------------------------- origin


def test_a_configured_public_origin_passes_the_origin_check(tmp_path: Path) -> None:
    service = sim_service(tmp_path, http={"public_url": PUBLIC_URL})
    service.loop.run_round()
    client = create_app(service).test_client()
    client.post("/login", data={"token": TOKEN})
    csrf = csrf_of(client.get("/proposals/1").get_data(as_text=True))
    form = {"csrf": csrf, "confirm": "yes"}
    foreign = client.post(
        "/proposals/1/approve", data=form, headers={"Origin": "https://evil.example.com"}
    )
    assert foreign.status_code == 403 and service.store.proposal(1).state == "pending"
    proxied = client.post(
        "/proposals/1/approve", data=form, headers={"Origin": PUBLIC_URL + ":443"}
    )
    assert proxied.status_code == 302
    assert service.store.proposal(1).state == "applied"
    assert "Secure" in client.post("/login", data={"token": TOKEN}).headers["Set-Cookie"]
    service.close()


def test_without_a_public_origin_the_proxy_origin_is_foreign(
    client: FlaskClient, service: Service
) -> None:
    client.post("/login", data={"token": TOKEN})
    csrf = csrf_of(client.get("/proposals/1").get_data(as_text=True))
    reply = client.post("/proposals/1/approve", data={"csrf": csrf}, headers={"Origin": PUBLIC_URL})
    assert reply.status_code == 403 and service.store.proposal(1).state == "pending"


@pytest.mark.parametrize(
    "url", ["yarn-adapt.example.com", "ftp://x.example", "https://x.example/path", "https://:1"]
)
def test_a_public_url_that_is_not_an_origin_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(SettingsError, match=r"\[http\] public_url: .* not http\(s\)://host"):
        load_settings(_settings_file(tmp_path, f'public_url = "{url}"'))


# --------------------------------------------------------------------------- headers


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/"), ("GET", "/proposals/1"), ("GET", "/login"), ("GET", "/api/proposals"),
     ("GET", "/metrics"), ("GET", "/healthz"), ("GET", "/static/style.css"),
     ("GET", "/no/such/page"), ("POST", "/api/proposals/1/approve")],
)  # fmt: skip
def test_every_response_carries_the_security_headers(
    client: FlaskClient, method: str, path: str
) -> None:
    reply = client.open(path, method=method)
    headers = reply.headers
    reply.close()
    policy = headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "script-src" not in policy
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"


def test_the_templates_need_no_inline_script_or_style() -> None:
    """The policy allows neither; an inline one would silently stop working."""
    templates = resources.files("yarn_adapt") / "service" / "web" / "templates"
    for template in templates.iterdir():
        text = template.read_text()
        assert "<script" not in text.lower(), template.name
        assert "<style" not in text.lower(), template.name
        assert not re.search(r"\sstyle\s*=", text), template.name
        assert not re.search(r"\son[a-z]+\s*=", text), template.name
