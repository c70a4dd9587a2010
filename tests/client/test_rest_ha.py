"""RM high availability against local servers replaying what real RMs answered.

Every standby answer here was recorded from a real HA pair (record_ha.py,
tests/fixtures/rm-ha/); the local servers only let a test choose *when* each RM
gives which answer. The same behaviour against the real pair is in test_rest_ha_live.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from rest_faults import Answer, ScriptedServer, port_of, replayed

from yarn_adapt.errors import (
    YarnHTTPError,
    YarnStandby,
    YarnTimeout,
    YarnUnavailable,
)
from yarn_adapt.yarn.http import (
    INFO_PATH,
    Body,
    HttpSettings,
    ResourceManagerEndpoints,
    Transport,
)

ServerFactory = Callable[[], ScriptedServer]
METRICS = "/ws/v1/cluster/metrics"
CONF = "/ws/v1/cluster/scheduler-conf"
ROUTED = Answer(200, '{"routed": true}')


def _active(server: ScriptedServer) -> ScriptedServer:
    return server.on("GET", INFO_PATH, replayed("active-info"))


def _standby(server: ScriptedServer) -> ScriptedServer:
    return server.on("GET", INFO_PATH, replayed("standby-info"))


@pytest.fixture
def transport(fast_settings: HttpSettings):
    with Transport(fast_settings) as shared:
        yield shared


def test_the_active_rm_is_found_and_remembered(fault_server: ServerFactory, transport: Transport):
    standby, active = _standby(fault_server()), _active(fault_server())
    active.on("GET", METRICS, ROUTED)
    endpoints = ResourceManagerEndpoints([standby.url, active.url], transport)
    for _ in range(3):
        assert endpoints.request("GET", METRICS).json() == {"routed": True}
    assert endpoints.active == active.url
    assert active.count("GET", INFO_PATH) == 1  # probed once, then remembered
    assert standby.count("GET", METRICS) == 0


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_standby_redirect_is_followed_to_the_configured_active(
    fault_server: ServerFactory, transport: Transport, method: str
):
    old, new = _active(fault_server()), _active(fault_server())
    endpoints = ResourceManagerEndpoints([old.url, new.url], transport)
    assert endpoints.find_active() == old.url
    # rm1 has become standby since: it redirects to rm2 as "localhost:<port>", the
    # way the real RM writes its peer's address.
    old.on(method, CONF, replayed("standby-redirect-metrics", port_of(new.url)))
    new.on(method, CONF, Answer(200, "Configuration change successfully applied."))
    body = Body.xml("<sched-conf/>") if method == "PUT" else None
    reply = endpoints.request(method, CONF, body=body)
    assert reply.text == "Configuration change successfully applied."
    assert endpoints.active == new.url
    assert [s.body for s in new.seen if s.method == method] == [body.content if body else ""]


@pytest.mark.parametrize("host", ["rm.elsewhere.invalid", "127.0.0.2"])
def test_redirect_to_an_unconfigured_host_is_refused(
    fault_server: ServerFactory, transport: Transport, host: str
):
    rm = _active(fault_server())
    other = fault_server()
    rm.on("GET", METRICS, replayed("standby-redirect-metrics", port_of(other.url), host))
    endpoints = ResourceManagerEndpoints([rm.url], transport)
    with pytest.raises(YarnHTTPError) as caught:
        endpoints.request("GET", METRICS)
    assert "refused redirect to http://" + host in str(caught.value)
    assert caught.value.status == 307
    assert other.seen == []


def test_redirect_to_an_unconfigured_port_is_refused(
    fault_server: ServerFactory, transport: Transport
):
    rm, stranger = _active(fault_server()), fault_server()
    rm.on("GET", METRICS, replayed("standby-redirect-metrics", port_of(stranger.url)))
    endpoints = ResourceManagerEndpoints([rm.url], transport)
    with pytest.raises(YarnHTTPError, match="not a configured ResourceManager"):
        endpoints.request("GET", METRICS)
    assert stranger.seen == []


def test_all_standby_raises_standby_naming_each(fault_server: ServerFactory, transport: Transport):
    first, second = _standby(fault_server()), _standby(fault_server())
    endpoints = ResourceManagerEndpoints([first.url, second.url], transport)
    with pytest.raises(YarnStandby) as caught:
        endpoints.request("GET", METRICS)
    message = str(caught.value)
    assert "\n" not in message
    assert f"{first.url} STANDBY" in message
    assert f"{second.url} STANDBY" in message


@pytest.mark.parametrize("recording", ["no-active-metrics", "no-active-gave-up-metrics"])
def test_standby_without_an_active_peer_is_not_taken_for_an_answer(
    fault_server: ServerFactory, transport: Transport, recording: str
):
    rm = _active(fault_server())
    endpoints = ResourceManagerEndpoints([rm.url], transport)
    endpoints.find_active()
    rm.on("GET", METRICS, replayed(recording)).on("GET", INFO_PATH, replayed("standby-info"))
    with pytest.raises(YarnStandby, match="no active ResourceManager"):
        endpoints.request("GET", METRICS)
    assert endpoints.active is None


def test_nothing_answering_is_unavailable_quickly(closed_port_url: str, transport: Transport):
    started = time.monotonic()
    endpoints = ResourceManagerEndpoints([closed_port_url, closed_port_url + "/"], transport)
    assert endpoints.base_urls == (closed_port_url,)  # the same address only once
    with pytest.raises(YarnUnavailable, match=r"no ResourceManager answered.*Connection refused"):
        endpoints.request("GET", METRICS)
    assert time.monotonic() - started < 0.5


def test_a_broken_probe_and_a_standby_is_standby(fault_server: ServerFactory, transport: Transport):
    broken = fault_server().on("GET", INFO_PATH, Answer(500, "oops", content_type="text/plain"))
    standby = _standby(fault_server())
    endpoints = ResourceManagerEndpoints([broken.url, standby.url], transport)
    with pytest.raises(YarnStandby, match=r"answered badly \(GET .* HTTP 500: oops\)"):
        endpoints.find_active()


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_refused_connection_fails_over_even_for_writes(
    fault_server: ServerFactory, closed_port_url: str, transport: Transport, method: str
):
    survivor = _active(fault_server()).on(method, CONF, Answer(200, "applied"))
    endpoints = ResourceManagerEndpoints([closed_port_url, survivor.url], transport)
    endpoints._active = closed_port_url  # it was active until it died
    body = Body.xml("<sched-conf/>") if method == "PUT" else None
    assert endpoints.request(method, CONF, body=body).text == "applied"
    assert endpoints.active == survivor.url


def test_a_write_that_timed_out_is_not_sent_to_another_rm(
    fault_server: ServerFactory, transport: Transport
):
    slow = _active(fault_server()).on("PUT", CONF, Answer(200, "applied", delay_s=2.0))
    other = _active(fault_server()).on("PUT", CONF, Answer(200, "applied"))
    endpoints = ResourceManagerEndpoints([slow.url, other.url], transport)
    with pytest.raises(YarnTimeout):
        endpoints.request("PUT", CONF, body=Body.xml("<sched-conf/>"))
    assert slow.count("PUT", CONF) == 1
    assert other.count("PUT", CONF) == 0


def test_a_read_that_timed_out_fails_over(fault_server: ServerFactory, fast_settings: HttpSettings):
    slow = _active(fault_server()).on("GET", METRICS, Answer(200, "{}", delay_s=2.0))
    other = _active(fault_server()).on("GET", METRICS, ROUTED)
    with Transport(fast_settings) as transport:
        endpoints = ResourceManagerEndpoints([slow.url, other.url], transport)
        endpoints._active = slow.url
        assert endpoints.request("GET", METRICS).json() == {"routed": True}
    assert endpoints.active == other.url
