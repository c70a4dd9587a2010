"""Transport: retries, timeouts, error mapping, auth and settings, against a local
scripted server (faults a real RM cannot be made to produce on demand)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace

import pytest
from rest_faults import Answer, ScriptedServer, TlsFiles

from yarn_adapt.errors import (
    SettingsError,
    YarnHTTPError,
    YarnMalformedResponse,
    YarnTimeout,
    YarnUnavailable,
)
from yarn_adapt.yarn.http import Body, HttpSettings, Transport, server_message

ServerFactory = Callable[[], ScriptedServer]
OK = Answer(200, '{"ok": true}')
REMOTE_EXCEPTION = (
    '{"RemoteException":{"exception":"BadRequestException",'
    '"message":"java.lang.Exception: Invalid application id: app_bogus",'
    '"javaClassName":"org.apache.hadoop.yarn.webapp.BadRequestException"}}'
)


def _one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text
    return text


def test_500_then_success_is_retried(fault_server: ServerFactory, fast_settings: HttpSettings):
    server = fault_server().on("GET", "/x", Answer(500, "busy"), Answer(502, "busy"), OK)
    with Transport(fast_settings) as transport:
        reply = transport.request("GET", server.url + "/x")
    assert reply.json() == {"ok": True}
    assert server.count("GET", "/x") == 3


def test_500_forever_gives_up_with_one_line_error(
    fault_server: ServerFactory, fast_settings: HttpSettings
):
    server = fault_server().on("GET", "/x", Answer(500, REMOTE_EXCEPTION))
    started = time.monotonic()
    with Transport(fast_settings) as transport, pytest.raises(YarnHTTPError) as caught:
        transport.request("GET", server.url + "/x", params={"states": "RUNNING"})
    elapsed = time.monotonic() - started
    message = _one_line(caught.value)
    assert caught.value.status == 500
    assert message.startswith(f"GET {server.url}/x?states=RUNNING")
    assert "Invalid application id: app_bogus" in message
    assert "(attempt 3)" in message
    assert server.count("GET", "/x") == fast_settings.retries + 1
    assert elapsed < 1.0


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409])
def test_4xx_is_never_retried(
    fault_server: ServerFactory, fast_settings: HttpSettings, status: int
):
    server = fault_server().on("GET", "/x", Answer(status, REMOTE_EXCEPTION))
    with Transport(fast_settings) as transport, pytest.raises(YarnHTTPError) as caught:
        transport.request("GET", server.url + "/x")
    assert caught.value.status == status
    assert caught.value.message == "java.lang.Exception: Invalid application id: app_bogus"
    assert server.count("GET", "/x") == 1


@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_5xx_on_a_write_is_not_retried(
    fault_server: ServerFactory, fast_settings: HttpSettings, method: str
):
    server = fault_server().on(method, "/w", Answer(500, "boom", content_type="text/plain"))
    with Transport(fast_settings) as transport, pytest.raises(YarnHTTPError):
        transport.request(method, server.url + "/w", body=Body.xml("<sched-conf/>"))
    assert server.count(method, "/w") == 1


def test_slow_get_times_out_after_retries(fault_server: ServerFactory, fast_settings: HttpSettings):
    server = fault_server().on("GET", "/slow", Answer(200, "{}", delay_s=2.0))
    started = time.monotonic()
    with Transport(fast_settings) as transport, pytest.raises(YarnTimeout) as caught:
        transport.request("GET", server.url + "/slow")
    assert isinstance(caught.value, TimeoutError)
    assert "read timeout" in _one_line(caught.value)
    assert server.count("GET", "/slow") == fast_settings.retries + 1
    assert time.monotonic() - started < 3 * (fast_settings.read_timeout_s + 0.3)


def test_slow_post_is_not_sent_twice(fault_server: ServerFactory, fast_settings: HttpSettings):
    server = fault_server().on("POST", "/slow", Answer(200, "{}", delay_s=2.0))
    with Transport(fast_settings) as transport, pytest.raises(YarnTimeout):
        transport.request("POST", server.url + "/slow", body=Body.json({"a": 1}))
    assert server.count("POST", "/slow") == 1


def test_connection_refused_is_unavailable_quickly(
    closed_port_url: str, fast_settings: HttpSettings
):
    started = time.monotonic()
    with Transport(fast_settings) as transport, pytest.raises(YarnUnavailable) as caught:
        transport.request("PUT", closed_port_url + "/ws", body=Body.xml("<x/>"))
    assert isinstance(caught.value, ConnectionError)
    assert "Connection refused" in _one_line(caught.value)
    assert "(attempt 3)" in str(caught.value)  # never sent, so even a PUT is retried
    assert time.monotonic() - started < 1.0


def test_malformed_json_names_the_url(fault_server: ServerFactory, fast_settings: HttpSettings):
    server = fault_server().on(
        "GET", "/x", Answer(200, "<html>oops</html>", content_type="text/html")
    )
    with Transport(fast_settings) as transport:
        reply = transport.request("GET", server.url + "/x")
    with pytest.raises(YarnMalformedResponse) as caught:
        reply.json()
    assert _one_line(caught.value).startswith(
        f"{server.url}/x: malformed response: body is not JSON"
    )


def test_simple_auth_sends_user_name(fault_server: ServerFactory, fast_settings: HttpSettings):
    server = fault_server().on("GET", "/x", OK)
    with Transport(fast_settings) as transport:
        transport.request("GET", server.url + "/x", params={"limit": 5})
    assert server.seen[0].query == {"limit": ["5"], "user.name": ["yarn-adapt-test"]}


def test_body_is_sent_with_its_content_type(
    fault_server: ServerFactory, fast_settings: HttpSettings
):
    server = fault_server().on("PUT", "/w", Answer(200, "done", content_type="text/plain"))
    with Transport(fast_settings) as transport:
        reply = transport.request("PUT", server.url + "/w", body=Body.xml("<sched-conf/>"))
    assert (reply.status, reply.text) == (200, "done")
    assert server.seen[0].body == "<sched-conf/>"


def test_redirects_are_returned_not_followed(
    fault_server: ServerFactory, fast_settings: HttpSettings
):
    server = fault_server().on("GET", "/x", Answer(307, "moved", {"Location": "http://x.invalid/"}))
    with Transport(fast_settings) as transport:
        reply = transport.request("GET", server.url + "/x")
    assert reply.is_redirect
    assert reply.location == "http://x.invalid/"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (REMOTE_EXCEPTION, "java.lang.Exception: Invalid application id: app_bogus"),
        ('{"RemoteException":{"exception":"NotFoundException"}}', "NotFoundException"),
        (
            "Failed to re-init queues : Illegal capacity\n sum",
            "Failed to re-init queues : Illegal capacity sum",
        ),
        (
            "<html><head><title>Error 500</title><style>p{}</style></head>"
            "<body><h2>HTTP ERROR 500</h2><pre>Server Error</pre></body></html>",
            "Error 500 HTTP ERROR 500 Server Error",
        ),
        ("", "(empty body)"),
        ("x" * 1000, "x" * 297 + "..."),
    ],
)
def test_server_message_is_one_short_line(body: str, expected: str):
    assert server_message(body) == expected


def test_backoff_grows_and_is_capped():
    settings = HttpSettings(backoff_base_s=0.5, backoff_cap_s=3.0)
    assert [settings.backoff_s(retry, 1.0) for retry in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert settings.backoff_s(2, 0.25) == 0.5  # full jitter scales the ceiling


def test_settings_repr_masks_the_client_key():
    settings = HttpSettings(client_cert="/etc/yarn-adapt/cert.pem", client_key="/secret/key.pem")
    assert "/secret/key.pem" not in repr(settings)
    assert "client_key='***'" in repr(settings)
    assert "/etc/yarn-adapt/cert.pem" in repr(settings)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"read_timeout_s": 0}, "timeouts must be positive"),
        ({"retries": -1}, "retries must be >= 0"),
        ({"backoff_base_s": 2.0, "backoff_cap_s": 1.0}, "backoff_base_s <= backoff_cap_s"),
        ({"auth": "digest"}, "auth must be 'simple' or 'kerberos'"),
        ({"client_key": "/k.pem"}, "client_key given without client_cert"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], problem: str):
    with pytest.raises(SettingsError, match=problem):
        HttpSettings(**kwargs)  # type: ignore[arg-type]


def test_settings_are_keyword_only():
    with pytest.raises(TypeError):
        HttpSettings(1.0)  # type: ignore[misc]


def test_kerberos_without_the_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "requests_gssapi", None)
    with pytest.raises(SettingsError, match=r"pip install 'yarn-adapt\[kerberos\]'"):
        Transport(HttpSettings(auth="kerberos"))


def test_invalid_url_is_a_settings_error(fast_settings: HttpSettings):
    with Transport(fast_settings) as transport, pytest.raises(SettingsError, match="invalid URL"):
        transport.request("GET", "localhost:8088/ws")


def test_tls_server_unknown_to_us_is_refused(
    fault_server: Callable[..., ScriptedServer], tls_files: TlsFiles, fast_settings: HttpSettings
):
    server = fault_server(tls_files).on("GET", "/x", OK)
    with Transport(fast_settings) as transport, pytest.raises(YarnUnavailable) as caught:
        transport.request("GET", server.url + "/x")
    assert "TLS failed" in _one_line(caught.value)
    assert "certificate verify failed" in str(caught.value)
    assert "(attempt" not in str(caught.value)  # not retried
    assert server.count("GET", "/x") == 0


def test_tls_with_ca_bundle_and_client_certificate(
    fault_server: Callable[..., ScriptedServer], tls_files: TlsFiles, fast_settings: HttpSettings
):
    server = fault_server(tls_files).on("GET", "/x", OK)
    settings = replace(
        fast_settings,
        ca_bundle=str(tls_files.server_cert),
        client_cert=str(tls_files.client_cert),
        client_key=str(tls_files.client_key),
    )
    with Transport(settings) as transport:
        assert transport.request("GET", server.url + "/x").json() == {"ok": True}


def test_tls_server_requiring_a_client_certificate_refuses_us_without_one(
    fault_server: Callable[..., ScriptedServer], tls_files: TlsFiles, fast_settings: HttpSettings
):
    server = fault_server(tls_files).on("GET", "/x", OK)
    settings = replace(fast_settings, ca_bundle=str(tls_files.server_cert), retries=0)
    with Transport(settings) as transport, pytest.raises(YarnUnavailable):
        transport.request("GET", server.url + "/x")
