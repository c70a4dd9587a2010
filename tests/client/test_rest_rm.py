"""ResourceManagerClient behaviour a real RM cannot be made to show on demand: an RM
without the validation endpoint. Bodies are real RM answers (record_rm_extra.py)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from rest_faults import Answer, ScriptedServer, recorded, replayed, replayed_rm

from yarn_adapt.errors import YarnHTTPError, YarnMalformedResponse, YarnNotSupported
from yarn_adapt.yarn.history import JobHistoryClient
from yarn_adapt.yarn.http import INFO_PATH, HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

VALIDATE = "/ws/v1/cluster/scheduler-conf/validate"
BODY = "<sched-conf/>"


def _rm(fault_server: Callable[[], ScriptedServer], answer_name: str) -> ScriptedServer:
    server = fault_server().on("GET", INFO_PATH, replayed("active-info"))
    return server.on("POST", VALIDATE, replayed_rm(answer_name))


def test_validation_returns_the_would_be_configuration(
    fault_server: Callable[[], ScriptedServer], fast_settings: HttpSettings
):
    server = _rm(fault_server, "validate-accepted")
    with ResourceManagerClient(server.url, fast_settings) as rm:
        would_be = dict(rm.validate_scheduler_conf(BODY))
    assert would_be["yarn.scheduler.capacity.root.a.capacity"] == "50"
    assert server.seen[-1].body == BODY


def test_a_refused_validation_is_an_http_error_with_the_reason(
    fault_server: Callable[[], ScriptedServer], fast_settings: HttpSettings
):
    server = _rm(fault_server, "validate-refused")
    with (
        ResourceManagerClient(server.url, fast_settings) as rm,
        pytest.raises(YarnHTTPError) as caught,
    ):
        rm.validate_scheduler_conf(BODY)
    assert not isinstance(caught.value, YarnNotSupported)
    assert caught.value.status == 400
    assert "Illegal capacity sum of 1.5" in caught.value.message
    assert server.count("POST", VALIDATE) == 1


@pytest.mark.parametrize("answer", ["unknown-path-404", "wrong-method-405"])
def test_an_rm_without_the_endpoint_is_reported_as_not_supported(
    fault_server: Callable[[], ScriptedServer], fast_settings: HttpSettings, answer: str
):
    server = _rm(fault_server, answer)
    with (
        ResourceManagerClient(server.url, fast_settings) as rm,
        pytest.raises(YarnNotSupported) as caught,
    ):
        rm.validate_scheduler_conf(BODY)
    assert "this RM has no validation endpoint" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert server.count("POST", VALIDATE) == 1


def test_a_wrong_shape_names_the_full_request_url(
    fault_server: Callable[[], ScriptedServer], fast_settings: HttpSettings
):
    apps = json.loads(recorded("rm/capacity-apps.json"))
    del apps["apps"]["app"][1]["id"]
    server = fault_server().on("GET", INFO_PATH, replayed("active-info"))
    server.on("GET", "/ws/v1/cluster/apps", Answer(200, json.dumps(apps)))
    with (
        ResourceManagerClient(server.url, fast_settings) as rm,
        pytest.raises(YarnMalformedResponse) as caught,
    ):
        rm.apps(states=["RUNNING"], limit=3)
    assert str(caught.value) == (
        f"{server.url}/ws/v1/cluster/apps?states=RUNNING&limit=3&deSelects=resourceRequests"
        ": malformed response: apps.app[1].id: missing"
    )


def test_an_html_page_instead_of_json_is_malformed(
    fault_server: Callable[[], ScriptedServer], fast_settings: HttpSettings
):
    page = replayed_rm("unknown-path-404")
    server = fault_server().on("GET", INFO_PATH, replayed("active-info"))
    server.on("GET", "/ws/v1/cluster/metrics", Answer(200, page.body, content_type="text/html"))
    with (
        ResourceManagerClient(server.url, fast_settings) as rm,
        pytest.raises(
            YarnMalformedResponse,
            match=r"/ws/v1/cluster/metrics: malformed response: body is not JSON",
        ),
    ):
        rm.cluster_metrics()


def test_job_history_redirects_are_refused(
    fault_server: Callable[[], ScriptedServer], fast_settings: HttpSettings
):
    server = fault_server().on(
        "GET", "/ws/v1/history/info", Answer(307, "", {"Location": "http://elsewhere.invalid/"})
    )
    with (
        JobHistoryClient(server.url, fast_settings) as history,
        pytest.raises(
            YarnHTTPError, match=r"HTTP 307: unexpected redirect to http://elsewhere.invalid/"
        ),
    ):
        history.info()
