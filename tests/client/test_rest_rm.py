"""ResourceManagerClient behaviour a real RM cannot be made to show on demand: an RM
without the validation endpoint. Bodies are real RM answers (record_rm_extra.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_faults import ScriptedServer, replayed, replayed_rm

from yarn_adapt.errors import YarnHTTPError, YarnNotSupported
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
