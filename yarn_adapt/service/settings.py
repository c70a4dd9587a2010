"""The service's settings: ``yarn-adapt.toml`` (read with :mod:`tomllib`) into frozen
dataclasses, one per table.

Every key has a default (``conf/yarn-adapt.toml`` lists them all, commented), so an
empty file is a valid configuration. A key the service does not know, a value of the
wrong type or out of range, or a file that is not TOML raises
:class:`~yarn_adapt.errors.SettingsError` naming the file and the key, on one line;
nothing starts with half-read settings.

Secrets -- the write token, the trace store's password -- never end up in logs: the
token comes from the ``YARN_ADAPT_TOKEN`` environment variable, else ``[http]
token_file``, else ``[http] token``; the password from ``YARN_ADAPT_REDIS_PASSWORD``,
else ``[tracing] redis_password_file``, else ``[tracing] redis_password``; the
dataclasses' ``repr`` masks them. The token must be at least
:data:`MIN_TOKEN_LENGTH` characters. As ssh refuses such a key, a secret file is
refused unless only its owner may access it (mode 0600 or stricter) and that owner
is the service's user or root; and a secret written inline (``token``,
``redis_password``) is refused while group or others may read the settings file --
the message names both fixes (a ``*_file`` setting of mode 0600, or ``chmod 600`` on
the settings file). The environment variables are never checked: they are the
operator's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tracing.receiver_process import RECEIVER_PROCESSES
from yarn_adapt.colocation.mirror import DEFAULT_REFRESH_COMMAND as MIRROR_REFRESH_COMMAND
from yarn_adapt.colocation.model import (
    DEFAULT_HIGH_SLACK_RATIO,
    DEFAULT_LOW_SLACK_RATIO,
    DEFAULT_MIN_PATH_FRACTION,
    DEFAULT_MIN_RAW_RISK,
    DEFAULT_MIN_VISIBLE_FRACTION,
    GuardMode,
    GuardPolicy,
)
from yarn_adapt.demand.shared import SharePolicy
from yarn_adapt.errors import SettingsError
from yarn_adapt.service.cilantro_settings import (
    PROPOSERS,
    CilantroSection,
    check_cilantro,
)
from yarn_adapt.tomlsettings import read_sections, read_toml
from yarn_adapt.tuning.executors import parse_executor_spec
from yarn_adapt.yarn.apply.activation import DEFAULT_REFRESH_COMMAND

TOKEN_ENV = "YARN_ADAPT_TOKEN"
MIN_TOKEN_LENGTH = 16
REDIS_PASSWORD_ENV = "YARN_ADAPT_REDIS_PASSWORD"


class Mode(StrEnum):
    """What a round does with a proposal (see :mod:`yarn_adapt.service.loop.actuators`)."""

    OBSERVE = "observe"  # log what it would propose; store nothing, change nothing
    RECOMMEND = "recommend"  # store the proposal for an operator to approve
    ENFORCE = "enforce"  # apply it when the hysteresis gates allow


def default_state_dir() -> str:
    """``$YARN_ADAPT_STATE_DIR``, else ``$XDG_STATE_HOME/yarn-adapt``, else
    ``~/.local/state/yarn-adapt`` (the same place ``yarn-adapt apply`` uses)."""
    configured = os.environ.get("YARN_ADAPT_STATE_DIR")
    if configured:
        return configured
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(base) / "yarn-adapt")


@dataclass(frozen=True, kw_only=True)
class ServiceSection:
    mode: Mode = Mode.RECOMMEND
    interval_s: float = 120.0
    auto_approve: bool = False
    shutdown_grace_s: float = 150.0


@dataclass(frozen=True, kw_only=True)
class YarnSection:
    rm: tuple[str, ...] = ()
    history: str = ""
    user: str = ""
    timeout_s: float = 30.0
    retries: int = 3
    kerberos: bool = False
    kerberos_principal: str = ""
    kerberos_keytab: str = ""
    ca_bundle: str = ""
    verify_tls: bool = True
    app_window_s: float = 900.0


@dataclass(frozen=True, kw_only=True)
class SchedulerSection:
    file: str = ""
    via: str = "file"
    refresh_command: tuple[str, ...] = DEFAULT_REFRESH_COMMAND
    verify_timeout_s: float = 60.0
    shared_file: bool = False


@dataclass(frozen=True, kw_only=True)
class TuningSection:
    min_improvement: float = 0.05
    cooldown_s: float = 600.0
    max_queue_changes: int = 8
    max_share_step: float = 30.0
    seed: int = 0
    executor: str = "process"
    proposer: str = "adaptiveconfig"
    # the per-group gates (yarn_adapt.service.loop.gates)
    min_jobs: int = 3
    miss_tolerance: float = 0.25
    oscillation_window_s: float = 3600.0
    oscillation_gain: float = 2.0


@dataclass(frozen=True, kw_only=True)
class StateSection:
    dir: str = field(default_factory=default_state_dir)
    database: str = ""

    @property
    def state_dir(self) -> Path:
        return Path(self.dir).expanduser()

    @property
    def database_path(self) -> Path:
        if self.database:
            return Path(self.database).expanduser()
        return self.state_dir / "yarn-adapt.db"


@dataclass(frozen=True, kw_only=True)
class HttpSection:
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8765
    token: str = field(default="", repr=False)
    token_file: str = ""
    public: bool = False
    public_url: str = ""


@dataclass(frozen=True, kw_only=True)
class BackoffSection:
    initial_s: float = 10.0
    max_s: float = 600.0


@dataclass(frozen=True, kw_only=True)
class RealizedSection:
    intervals: int = 3


@dataclass(frozen=True, kw_only=True)
class TracingSection:
    """The Redis trace store (TopoSch tracing) and the risk over its traces."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_password: str = field(default="", repr=False)
    redis_password_file: str = ""
    tls: bool = False
    ca_bundle: str = ""
    verify_tls: bool = True
    timeout_s: float = 5.0
    prefix: str = "yat"
    quiet_s: float = 5.0
    retention_s: float = 3600.0
    memory_budget_mb: float = 256.0
    dead_letter_entries: int = 1000
    max_clock_ahead_s: float = 5.0
    window_s: float = 60.0
    alpha: float = 0.5
    critical_min_share: float = 0.0
    # serve runs the ingest worker (and, with otlp_listen, the OTLP/HTTP receiver) itself
    ingest: bool = False
    otlp_listen: str = ""
    otlp_token_file: str = ""
    otlp_public: bool = False
    otlp_processes: int = RECEIVER_PROCESSES


@dataclass(frozen=True, kw_only=True)
class ColocationSection:
    """The co-location guard (see yarn_adapt.colocation): batch visibility per node,
    decided every ``period_s`` on the guard's own clock."""

    enabled: bool = False
    mode: GuardMode = GuardMode.RECOMMEND
    policy: GuardPolicy = GuardPolicy.SLACK
    period_s: float = 5.0
    failure_budget: int = 3
    slo_window_s: float = 30.0
    low_slack_ratio: float = DEFAULT_LOW_SLACK_RATIO
    high_slack_ratio: float = DEFAULT_HIGH_SLACK_RATIO
    min_path_fraction: float = DEFAULT_MIN_PATH_FRACTION
    max_step_down_fraction: float = 0.25
    throttle_settle_s: float = 15.0
    actuator: str = "node-resource"
    batch_queue: str = ""
    nu: float = 1.0
    zero_violation: bool = False
    min_visible_fraction: float = DEFAULT_MIN_VISIBLE_FRACTION
    min_raw_risk: float = DEFAULT_MIN_RAW_RISK
    dead_band_fraction: float = 0.05
    max_step_up_fraction: float = 0.25
    cooldown_s: float = 300.0
    stale_after_s: float = 300.0
    demand: str = "learned"  # observed usage while a learner has too few rounds
    applications: tuple[str, ...] = ()
    demand_headroom: float = 0.25
    vcores_per_core: float = 1.0
    millicores_per_vcore: int = 1000
    qos_percentile: float = 95.0
    qos_targets: tuple[str, ...] = ()
    latency_metrics: tuple[str, ...] = ()  # "app=URL": its P95 from that metrics endpoint
    latency_histogram: str = ""  # the histogram those endpoints export (..._seconds)
    node_hosts: tuple[str, ...] = ()
    reclaim_ttl_s: float = 0.0
    verify_timeout_s: float = 30.0
    dynamic_resources_file: str = ""  # mirror the guard's totals there ("": off)
    min_total_memory_mb: int = 1024  # the RM's yarn.scheduler.minimum-allocation-mb
    min_total_vcores: int = 1  # the RM's yarn.scheduler.minimum-allocation-vcores
    refresh_nodes_resources_command: tuple[str, ...] = MIRROR_REFRESH_COMMAND
    stated_demand: tuple[str, ...] = ()
    warm_start: tuple[str, ...] = ()
    reserve: str = "upper"
    learn_round_s: float = 60.0
    learn_range: float = 4.0
    learn_slope: float = 200.0
    learn_min_requests: int = 50
    learn_confidence: float = 0.9
    learn_min_rounds: int = 5  # fewer feedback rounds: observed usage, said in the reason
    share_policy: SharePolicy = SharePolicy.LEAST  # services sharing a node


@dataclass(frozen=True, kw_only=True)
class Settings:
    """All of ``yarn-adapt.toml``; ``source`` is the file it came from."""

    service: ServiceSection = field(default_factory=ServiceSection)
    yarn: YarnSection = field(default_factory=YarnSection)
    scheduler: SchedulerSection = field(default_factory=SchedulerSection)
    tuning: TuningSection = field(default_factory=TuningSection)
    state: StateSection = field(default_factory=StateSection)
    http: HttpSection = field(default_factory=HttpSection)
    backoff: BackoffSection = field(default_factory=BackoffSection)
    realized: RealizedSection = field(default_factory=RealizedSection)
    cilantro: CilantroSection = field(default_factory=CilantroSection)
    tracing: TracingSection = field(default_factory=TracingSection)
    colocation: ColocationSection = field(default_factory=ColocationSection)
    source: str = "<defaults>"

    def with_overrides(self, **sections: object) -> Settings:
        return replace(self, **sections)  # type: ignore[arg-type]


SECTIONS: dict[str, type[Any]] = {
    "service": ServiceSection,
    "yarn": YarnSection,
    "scheduler": SchedulerSection,
    "tuning": TuningSection,
    "state": StateSection,
    "http": HttpSection,
    "backoff": BackoffSection,
    "realized": RealizedSection,
    "cilantro": CilantroSection,
    "tracing": TracingSection,
    "colocation": ColocationSection,
}

# --------------------------------------------------------------------------- reading


def load_settings(path: str | os.PathLike[str]) -> Settings:
    """Read and check ``path``; SettingsError (one line, file and key) when wrong."""
    toml = read_toml(path)
    settings = settings_from_mapping(toml.raw, toml.source)
    check_inline_secrets(settings, toml.mode)
    return settings


# (table, key, where to put it instead, its environment variable)
INLINE_SECRETS = (
    ("http", "token", "[http] token_file", TOKEN_ENV),
    ("tracing", "redis_password", "[tracing] redis_password_file", REDIS_PASSWORD_ENV),
)


def check_inline_secrets(settings: Settings, file_mode: int) -> None:
    """A secret written in the settings file, while group or others may read it, is
    refused (naming both fixes)."""
    if not file_mode & 0o077:
        return
    for table, key, instead, variable in INLINE_SECRETS:
        if getattr(getattr(settings, table), key):
            raise SettingsError(
                f"{settings.source}: [{table}] {key} is written in a file group or others may "
                f"read (mode {file_mode:04o}): move it to {instead} (a file of mode 0600) or "
                f"${variable}, or chmod 600 {settings.source}"
            )


def settings_from_mapping(raw: Mapping[str, Any], source: str = "<settings>") -> Settings:
    sections = read_sections(raw, SECTIONS, source)
    settings = Settings(**sections, source=source)  # type: ignore[arg-type]
    check_settings(settings)
    return settings


# --------------------------------------------------------------------------- checking


def check_settings(settings: Settings) -> None:
    """Ranges and choices the types cannot say."""
    rules: list[tuple[str, bool, str]] = [
        ("[service] interval_s", settings.service.interval_s > 0, "must be positive"),
        ("[service] shutdown_grace_s", settings.service.shutdown_grace_s >= 0, "must be 0 or more"),
        ("[yarn] timeout_s", settings.yarn.timeout_s > 0, "must be positive"),
        ("[yarn] retries", settings.yarn.retries >= 0, "must be 0 or more"),
        ("[yarn] app_window_s", settings.yarn.app_window_s > 0, "must be positive"),
        ("[scheduler] via", settings.scheduler.via in ("file", "mutation"), "file or mutation"),
        ("[scheduler] refresh_command", bool(settings.scheduler.refresh_command), "is empty"),
        ("[scheduler] verify_timeout_s", settings.scheduler.verify_timeout_s > 0, "positive"),
        ("[tuning] min_improvement", 0 <= settings.tuning.min_improvement < 1, "in [0, 1)"),
        ("[tuning] cooldown_s", settings.tuning.cooldown_s >= 0, "must be 0 or more"),
        ("[tuning] min_jobs", settings.tuning.min_jobs >= 0, "must be 0 or more"),
        ("[tuning] miss_tolerance", settings.tuning.miss_tolerance > 0, "must be positive"),
        (
            "[tuning] oscillation_window_s",
            settings.tuning.oscillation_window_s >= 0,
            "must be 0 or more",
        ),
        ("[tuning] oscillation_gain", settings.tuning.oscillation_gain >= 1, "must be 1 or more"),
        ("[tuning] max_queue_changes", settings.tuning.max_queue_changes >= 1, "at least 1"),
        ("[tuning] max_share_step", 0 < settings.tuning.max_share_step <= 100, "in (0, 100]"),
        ("[http] port", 0 <= settings.http.port <= 65535, "in 0..65535"),
        ("[http] host", bool(settings.http.host), "is empty"),
        ("[http] public_url", _is_origin(settings.http.public_url), "not http(s)://host[:port]"),
        (
            "[yarn] kerberos_keytab",
            settings.yarn.kerberos or not settings.yarn.kerberos_keytab,
            "needs kerberos = true",
        ),
        (
            "[yarn] kerberos_principal",
            bool(settings.yarn.kerberos_principal) or not settings.yarn.kerberos_keytab,
            "must name the keytab's principal",
        ),
        ("[backoff] initial_s", settings.backoff.initial_s > 0, "must be positive"),
        ("[backoff] max_s", settings.backoff.max_s >= settings.backoff.initial_s, ">= initial_s"),
        ("[realized] intervals", settings.realized.intervals >= 1, "at least 1"),
        ("[state] dir", bool(settings.state.dir), "is empty"),
        ("[tuning] proposer", settings.tuning.proposer in PROPOSERS, " or ".join(PROPOSERS)),
        ("[tracing] redis_url", _redis_url_ok(settings.tracing.redis_url), "redis://, rediss://"),
        ("[tracing] timeout_s", settings.tracing.timeout_s > 0, "must be positive"),
        ("[tracing] prefix", _is_word(settings.tracing.prefix), "must be one word"),
        ("[tracing] quiet_s", settings.tracing.quiet_s >= 0, "must be 0 or more"),
        ("[tracing] retention_s", settings.tracing.retention_s > 0, "must be positive"),
        ("[tracing] memory_budget_mb", settings.tracing.memory_budget_mb > 0, "positive"),
        ("[tracing] dead_letter_entries", settings.tracing.dead_letter_entries >= 1, ">= 1"),
        ("[tracing] max_clock_ahead_s", settings.tracing.max_clock_ahead_s >= 0, "0 or more"),
        ("[tracing] window_s", settings.tracing.window_s > 0, "must be positive"),
        ("[tracing] alpha", 0 <= settings.tracing.alpha <= 1, "in [0, 1]"),
        ("[tracing] critical_min_share", 0 <= settings.tracing.critical_min_share <= 1, "[0, 1]"),
        ("[tracing] otlp_processes", settings.tracing.otlp_processes >= 1, "at least 1"),
        (
            "[tracing] otlp_listen",
            _listen_ok(settings.tracing.otlp_listen),
            "must be HOST:PORT (e.g. 127.0.0.1:4318), or empty for no receiver",
        ),
        (
            "[tracing] otlp_listen",
            not settings.tracing.otlp_listen or settings.tracing.ingest,
            "needs ingest = true (the receiver's spans wait for the worker in Redis)",
        ),
    ]
    rules += _colocation_rules(settings.colocation)
    for key, ok, expectation in rules:
        if not ok:
            raise SettingsError(f"{settings.source}: {key}: {_value(settings, key)} {expectation}")
    check_cilantro(settings.cilantro, settings.source)
    try:
        parse_executor_spec(settings.tuning.executor)
    except SettingsError as exc:
        raise SettingsError(f"{settings.source}: [tuning] executor: {exc}") from exc


def _colocation_rules(guard: ColocationSection) -> list[tuple[str, bool, str]]:
    return [
        ("[colocation] actuator", guard.actuator in ("node-resource", "queue-cap"),
         "node-resource or queue-cap"),
        ("[colocation] batch_queue", guard.actuator != "queue-cap" or bool(guard.batch_queue),
         "must name the batch queue for actuator = queue-cap"),
        ("[colocation] period_s", 0 < guard.period_s < float("inf"), "must be positive"),
        ("[colocation] failure_budget", guard.failure_budget >= 1, "must be 1 or more"),
        ("[colocation] slo_window_s", 0 < guard.slo_window_s < float("inf"), "must be positive"),
        ("[colocation] low_slack_ratio", 0 <= guard.low_slack_ratio < 1, "in [0, 1)"),
        ("[colocation] high_slack_ratio",
         guard.low_slack_ratio < guard.high_slack_ratio < 1,
         "must be above low_slack_ratio and below 1"),
        ("[colocation] min_path_fraction", 0 <= guard.min_path_fraction < float("inf"),
         "must be a number >= 0"),
        ("[colocation] max_step_down_fraction", 0 < guard.max_step_down_fraction <= 1,
         "in (0, 1]"),
        ("[colocation] throttle_settle_s", guard.throttle_settle_s >= 0, "must be 0 or more"),
        ("[colocation] nu", 0 <= guard.nu < float("inf"), "must be a number >= 0"),
        ("[colocation] min_visible_fraction", 0 <= guard.min_visible_fraction <= 1, "[0, 1]"),
        ("[colocation] min_visible_fraction",
         guard.mode is not GuardMode.AUTO or guard.min_visible_fraction > 0,
         f'empties the riskiest node in mode = "auto": set it above 0 (the default is '
         f"{DEFAULT_MIN_VISIBLE_FRACTION:g}), or use mode = \"recommend\""),
        ("[colocation] min_raw_risk", 0 <= guard.min_raw_risk < float("inf"),
         "must be a number >= 0"),
        ("[colocation] dead_band_fraction", 0 <= guard.dead_band_fraction < 1, "in [0, 1)"),
        ("[colocation] max_step_up_fraction", 0 < guard.max_step_up_fraction <= 1, "(0, 1]"),
        ("[colocation] cooldown_s", guard.cooldown_s >= 0, "must be 0 or more"),
        ("[colocation] stale_after_s", guard.stale_after_s > 0, "must be positive"),
        ("[colocation] demand", guard.demand in ("observed", "learned", "stated", "none"),
         "observed, learned, stated or none"),
        ("[colocation] applications", _pairs_ok(guard.applications, numeric=False),
         'entries "application=service,service"'),
        ("[colocation] demand_headroom", guard.demand_headroom >= 0, "must be 0 or more"),
        ("[colocation] vcores_per_core", guard.vcores_per_core > 0, "must be positive"),
        ("[colocation] millicores_per_vcore", guard.millicores_per_vcore > 0, "positive"),
        ("[colocation] qos_percentile", 0 < guard.qos_percentile <= 100, "in (0, 100]"),
        ("[colocation] qos_targets", _pairs_ok(guard.qos_targets, numeric=True),
         'entries "service=milliseconds"'),
        ("[colocation] node_hosts", _pairs_ok(guard.node_hosts, numeric=False),
         'entries "trace-host=node-id"'),
        ("[colocation] reclaim_ttl_s", guard.reclaim_ttl_s >= 0, "must be 0 or more"),
        ("[colocation] verify_timeout_s", guard.verify_timeout_s > 0, "must be positive"),
        (
            "[colocation] refresh_nodes_resources_command",
            bool(guard.refresh_nodes_resources_command) or not guard.dynamic_resources_file,
            "is empty (the RM must re-read the mirrored dynamic_resources_file)",
        ),
        *_learning_rules(guard),
        *_latency_metrics_rules(guard),
    ]  # fmt: skip


def _latency_metrics_rules(guard: ColocationSection) -> list[tuple[str, bool, str]]:
    """Latency from metrics endpoints: each a URL, of an application with a target."""
    named = _pairs(guard.latency_metrics)
    untargeted = sorted(set(named) - set(_pairs(guard.qos_targets)))
    not_urls = sorted(app for app, url in named.items() if not _is_http_url(url))
    unit = guard.latency_histogram.rsplit("_", 1)[-1]
    return [
        ("[colocation] latency_metrics", _pairs_ok(guard.latency_metrics, numeric=False),
         'entries "application=http://host:port/metrics"'),
        ("[colocation] latency_metrics", not not_urls,
         f"must be http(s) URLs: {', '.join(not_urls)}"),
        ("[colocation] latency_metrics", not untargeted,
         f"names an application without a qos_targets entry: {', '.join(untargeted)}"),
        ("[colocation] latency_histogram", not named or unit in ("seconds", "milliseconds"),
         "must name the endpoints' latency histogram, ending in _seconds or _milliseconds "
         "(e.g. http_request_duration_seconds)"),
    ]  # fmt: skip


def _is_http_url(url: str) -> bool:
    parsed = urlsplit(url)
    return parsed.scheme in ("http", "https") and bool(parsed.netloc)


def _learning_rules(guard: ColocationSection) -> list[tuple[str, bool, str]]:
    """The latency-critical applications' demand learners (demand = learned / stated).
    With ``learned`` (the default) an application without a latency target or a
    stated demand is no error: its nodes keep observed usage, and the reason says why;
    without ``applications`` each service of ``qos_targets`` is one."""
    apps = guarded_applications(guard) if _pairs_ok(guard.applications, numeric=False) else {}
    stated = _pairs(guard.stated_demand) if _pairs_ok(guard.stated_demand, numeric=True) else {}
    unknown = sorted((set(stated) | set(_pairs(guard.warm_start))) - set(apps))
    unstated = sorted(set(apps) - set(stated))
    return [
        ("[colocation] stated_demand", _pairs_ok(guard.stated_demand, numeric=True),
         'entries "application=vcores per request/s" (a number > 0)'),
        ("[colocation] warm_start", _pairs_ok(guard.warm_start, numeric=False),
         'entries "application=curve.csv"'),
        ("[colocation] reserve", guard.reserve in ("upper", "recommendation"),
         "upper or recommendation"),
        ("[colocation] learn_round_s", guard.learn_round_s > 0, "must be positive"),
        ("[colocation] learn_range", 1 < guard.learn_range < float("inf"), "must be above 1"),
        ("[colocation] learn_slope", 0 < guard.learn_slope < float("inf"), "must be positive"),
        ("[colocation] learn_min_requests", guard.learn_min_requests >= 1, "must be 1 or more"),
        ("[colocation] learn_confidence", 0 < guard.learn_confidence < 1, "in (0, 1)"),
        ("[colocation] learn_min_rounds", guard.learn_min_rounds >= 1, "must be 1 or more"),
        ("[colocation] applications", guard.demand != "stated" or bool(apps),
         'must name the latency-critical applications for demand = "stated"'),
        ("[colocation] stated_demand", not unknown,
         f"names no application of [colocation] applications: {', '.join(unknown)}"),
        ("[colocation] stated_demand", guard.demand != "stated" or not unstated,
         f'must state the demand of each application for demand = "stated": '
         f"{', '.join(unstated)}"),
    ]  # fmt: skip


def guarded_applications(guard: ColocationSection) -> dict[str, tuple[str, ...]]:
    """The latency-critical applications and their services: ``applications``, else
    each service with a latency target in ``qos_targets`` on its own."""
    named = _pairs(guard.applications)
    if not named:
        return {service: (service,) for service in _pairs(guard.qos_targets)}
    return {
        app: tuple(s.strip() for s in services.split(",") if s.strip())
        for app, services in named.items()
    }


def _pairs(entries: tuple[str, ...]) -> dict[str, str]:
    return {
        key.strip(): value.strip()
        for key, sep, value in (entry.partition("=") for entry in entries)
        if sep
    }


def pairs(entries: tuple[str, ...]) -> dict[str, str]:
    """``("a=1", "b=2")`` -> ``{"a": "1", "b": "2"}`` (checked by :func:`check_settings`)."""
    return dict(entry.split("=", 1) for entry in entries)


def _pairs_ok(entries: tuple[str, ...], *, numeric: bool) -> bool:
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not (sep and key.strip() and value.strip()):
            return False
        if numeric:
            try:
                if not float(value) > 0:
                    return False
            except ValueError:
                return False
    return True


def _is_origin(url: str) -> bool:
    """Empty, or a bare ``http(s)://host[:port]`` (what a browser sends as Origin)."""
    if not url:
        return True
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and parts.path in ("", "/")
        and not (parts.query or parts.fragment or parts.username)
    )


def _is_word(text: str) -> bool:
    return bool(text) and text == "".join(text.split())


def _redis_url_ok(url: str) -> bool:
    return url.startswith(("redis://", "rediss://", "unix://"))


def _listen_ok(listen: str) -> bool:
    """Empty, or HOST:PORT with a port in 0..65535."""
    if not listen:
        return True
    host, _, port = listen.rpartition(":")
    return bool(host) and port.isdigit() and int(port) <= 65535


def redis_password(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """The trace store's password: ``$YARN_ADAPT_REDIS_PASSWORD``, else the first line of
    ``[tracing] redis_password_file``, else ``[tracing] redis_password`` (may be empty)."""
    environ = os.environ if environ is None else environ
    if environ.get(REDIS_PASSWORD_ENV):
        return environ[REDIS_PASSWORD_ENV].strip()
    if settings.tracing.redis_password_file:
        path = Path(settings.tracing.redis_password_file).expanduser()
        lines = secret_lines(path, f"{settings.source}: [tracing] redis_password_file {path}")
        return lines[0].strip() if lines else ""
    return settings.tracing.redis_password


def redis_password_setting(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """Where :func:`redis_password` takes the password from, for error messages."""
    environ = os.environ if environ is None else environ
    if environ.get(REDIS_PASSWORD_ENV):
        return f"${REDIS_PASSWORD_ENV}"
    if settings.tracing.redis_password_file:
        return f"{settings.source}: [tracing] redis_password_file"
    return f"{settings.source}: [tracing] redis_password"


def _value(settings: Settings, key: str) -> str:
    table, name = key.strip("[").split("] ")
    return repr(getattr(getattr(settings, table), name))


# --------------------------------------------------------------------------- the token


def write_token(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """The token write actions need: ``$YARN_ADAPT_TOKEN``, else the first line of
    ``[http] token_file``, else ``[http] token``; ``None`` when none is configured."""
    environ = os.environ if environ is None else environ
    if environ.get(TOKEN_ENV):
        return checked_token(environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}")
    if settings.http.token_file:
        path = Path(settings.http.token_file).expanduser()
        return token_from_file(path, f"{settings.source}: [http] token_file {path}")
    if settings.http.token:
        return checked_token(settings.http.token, f"{settings.source}: [http] token")
    return None


def token_from_file(path: Path, where: str) -> str:
    """The first line of ``path`` (a secret file: :func:`secret_lines`)."""
    lines = secret_lines(path, where)
    token = lines[0].strip() if lines else ""
    if not token:
        raise SettingsError(f"{where}: the file is empty")
    return checked_token(token, where)


def secret_lines(path: Path, where: str) -> list[str]:
    """The lines of a secret file, refused unless only its owner may access it (mode
    0600 or stricter) and that owner is the service's user or root."""
    try:
        with path.open(encoding="utf-8") as stream:
            status = os.fstat(stream.fileno())
            lines = stream.read().splitlines()
    except OSError as exc:
        raise SettingsError(f"{where}: {exc.strerror or exc}") from exc
    mode = status.st_mode & 0o777
    if mode & 0o077:
        raise SettingsError(
            f"{where}: mode {mode:04o} lets group or others access it; chmod 600 {path}"
        )
    user = os.geteuid()
    if status.st_uid not in (user, 0):
        raise SettingsError(
            f"{where}: owned by uid {status.st_uid}, who may rewrite it; it must belong to "
            f"the service's user (uid {user}) or root: chown {user} {path}"
        )
    return lines


def checked_token(token: str, where: str) -> str:
    """``token`` when it is long enough to resist guessing (never shown in errors)."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise SettingsError(
            f"{where}: the token has {len(token)} characters; "
            f"at least {MIN_TOKEN_LENGTH} are needed (e.g. openssl rand -base64 24)"
        )
    return token


def defaults() -> Settings:
    return Settings()


def field_defaults(section: str) -> dict[str, object]:
    """``{key: default}`` of one table (the example file is checked against it)."""
    result: dict[str, object] = {}
    for f in fields(SECTIONS[section]):
        if f.default is not MISSING:
            result[f.name] = f.default
        elif f.default_factory is not MISSING:
            result[f.name] = f.default_factory()
    return result
