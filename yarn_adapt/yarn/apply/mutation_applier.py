"""Apply a Capacity Scheduler configuration through the RM's mutation API
(``PUT /ws/v1/cluster/scheduler-conf``), for RMs with a mutable configuration store
(``yarn.scheduler.configuration.store.class`` = memory, leveldb, zk or fs).

The RM applies a body atomically: it logs the mutation, re-initialises the queues and
confirms, or rolls back and answers 400 with the reason (RMWebServices
updateSchedulerConfiguration). So a refusal leaves nothing to undo here. What this
applier adds: the minimal body from the diff, YARN's rules checked first, the
``/validate`` dry run where the RM has it, verification through ``/scheduler``, and a
reverse body when the RM took the change but does not report it.

Every journal entry carries the fingerprints of the configuration before and after
and both bodies (forward and reverse), so :meth:`MutationApplier.recover` can decide
from the RM alone: ``GET /scheduler-conf`` holds one of the two configurations (the
RM applies a body whole or not at all), and ``/scheduler`` must report it.
"""

from __future__ import annotations

import time

from lxml import etree

from yarn_adapt.errors import (
    ApplyNotVerified,
    ApplyRejected,
    RollbackFailed,
    YarnError,
    YarnHTTPError,
    YarnNotSupported,
)
from yarn_adapt.model import CapacitySchedulerConfig
from yarn_adapt.yarn.apply.backup import sha256_text
from yarn_adapt.yarn.apply.base import (
    ApplyOutcome,
    ApplyPlan,
    ApplyResult,
    ApplySettings,
    Settled,
    new_apply_id,
)
from yarn_adapt.yarn.apply.expectations import mismatches
from yarn_adapt.yarn.apply.journal import ApplyHistory, ApplyJournal, ApplyStep, ApplyTrail
from yarn_adapt.yarn.apply.polling import poll_until
from yarn_adapt.yarn.confxml import (
    CapacityDocument,
    diff_configs,
    mutation_body,
    parse_capacity_xml,
    raise_if_invalid,
)
from yarn_adapt.yarn.rm import ConfProperties, ResourceManagerClient

NAME = "scheduler-conf mutation"


def document_from_properties(properties: ConfProperties, source: str) -> CapacityDocument:
    """A ``GET /scheduler-conf`` answer as a capacity-scheduler.xml document (a new
    configuration renders as a patch of it)."""
    root = etree.Element("configuration")
    for name, value in properties:
        prop = etree.SubElement(root, "property")
        etree.SubElement(prop, "name").text = name
        etree.SubElement(prop, "value").text = value
    return parse_capacity_xml(etree.tostring(root), source)


def config_from_properties(properties: ConfProperties, source: str) -> CapacitySchedulerConfig:
    """The Capacity Scheduler configuration a ``GET /scheduler-conf`` answer holds."""
    return document_from_properties(properties, source).config


def scheduler_conf_source(rm: ResourceManagerClient) -> str:
    return f"{'|'.join(rm.endpoints.base_urls)}/ws/v1/cluster/scheduler-conf"


def running_document(rm: ResourceManagerClient) -> CapacityDocument:
    """What an RM with a mutable configuration store runs, as a document."""
    return document_from_properties(rm.scheduler_conf(), scheduler_conf_source(rm))


def _fingerprint(config: CapacitySchedulerConfig) -> str:
    """Identifies a configuration by meaning: the empty body from it to itself is
    not enough, so hash the body that builds it from nothing."""
    empty = CapacitySchedulerConfig(root=type(config.root)(path="root"))
    return sha256_text(mutation_body(empty, config))


class MutationApplier:
    def __init__(
        self,
        rm: ResourceManagerClient,
        settings: ApplySettings,
        journal: ApplyJournal | None = None,
        *,
        use_validate_endpoint: bool = True,
    ) -> None:
        self.rm = rm
        self.settings = settings
        self.journal = journal or settings.default_journal()
        self.use_validate_endpoint = use_validate_endpoint
        self.source = scheduler_conf_source(rm)

    def running_config(self) -> CapacitySchedulerConfig:
        return config_from_properties(self.rm.scheduler_conf(), self.source)

    def plan(self, desired: CapacitySchedulerConfig) -> ApplyPlan:
        running = self.running_config()
        raise_if_invalid(desired, running, source=self.source)
        return self._plan(running, desired)

    def _plan(
        self, running: CapacitySchedulerConfig, desired: CapacitySchedulerConfig
    ) -> ApplyPlan:
        changes = tuple(diff_configs(running, desired))
        steps = (
            "check the change with POST /scheduler-conf/validate (when the RM has it)",
            "PUT the body to /scheduler-conf (the RM applies it atomically or refuses)",
            f"confirm through /scheduler (up to {self.settings.verify.timeout_s:g} s)",
            "if the RM took it but does not report it: PUT the reverse body",
        )
        body = mutation_body(running, desired) if changes else ""
        return ApplyPlan(NAME, self.source, changes, steps, body)

    # ------------------------------------------------------------------ applying

    def apply(
        self, desired: CapacitySchedulerConfig, *, apply_id: str | None = None
    ) -> ApplyOutcome:
        apply_id = apply_id or new_apply_id()
        with self.settings.lock:
            running = self.running_config()
            plan = self._plan(running, desired)
            trail = ApplyTrail(
                self.journal,
                apply_id,
                NAME,
                self.source,
                old_sha256=_fingerprint(running),
                new_sha256=_fingerprint(desired),
            )
            if plan.is_empty:
                return self._settle_unchanged(trail, plan, desired)
            raise_if_invalid(desired, running, source=self.source)
            trail.forward_body = plan.payload
            trail.reverse_body = mutation_body(desired, running)
            trail.record(ApplyStep.PLANNED, f"{len(plan.changes)} changes")
            self._validate_remotely(trail, plan.payload)
            self._put_forward(trail, plan.payload)
            trail.record(ApplyStep.ACTIVATED)
            self._verify_or_reverse(trail, desired).raise_unless_verified()
            return ApplyOutcome(apply_id, ApplyResult.APPLIED, plan)

    def _settle_unchanged(
        self, trail: ApplyTrail, plan: ApplyPlan, desired: CapacitySchedulerConfig
    ) -> ApplyOutcome:
        problems = self._problems(desired)
        if not problems:
            trail.record(ApplyStep.NOTHING_TO_DO, "the RM already runs it")
            return ApplyOutcome(trail.apply_id, ApplyResult.ALREADY_APPLIED, plan)
        why = f"the RM's configuration says it but /scheduler does not report it: {problems[0]}"
        trail.record(ApplyStep.FAILED, why)
        raise ApplyNotVerified(f"{self.source}: {why}; nothing was changed")

    def _validate_remotely(self, trail: ApplyTrail, body: str) -> None:
        if not self.use_validate_endpoint:
            return
        try:
            self.rm.validate_scheduler_conf(body)
        except YarnNotSupported:
            return
        except YarnHTTPError as exc:
            trail.record(ApplyStep.FAILED, f"the RM's validator refused it: {exc.message}")
            raise ApplyRejected(
                f"{self.source}: the RM's validator refused the change: {exc.message}"
            ) from exc

    def _put_forward(self, trail: ApplyTrail, body: str) -> None:
        """A 4xx is a refusal (the RM rolled the change back itself); any other
        failure leaves the outcome unknown, so it propagates and recovery reads the
        RM to decide."""
        try:
            self.rm.update_scheduler_conf(body)
        except YarnHTTPError as exc:
            if exc.status >= 500:
                raise
            trail.record(ApplyStep.FAILED, f"the RM refused it: {exc.message}")
            raise ApplyRejected(
                f"{self.source}: the RM refused the change (it kept its configuration): "
                f"{exc.message}"
            ) from exc

    def _verify_or_reverse(self, trail: ApplyTrail, desired: CapacitySchedulerConfig) -> Settled:
        problems = self._wait_for(desired)
        if not problems:
            trail.record(ApplyStep.VERIFIED)
            return Settled(ApplyStep.VERIFIED)
        why = f"the RM does not report the change: {problems[0]}"
        trail.record(ApplyStep.ROLLING_BACK, why)
        return self._reverse(trail, why)

    # ------------------------------------------------------------------ rolling back

    def _reverse(self, trail: ApplyTrail, why: str) -> Settled:
        """Put the previous configuration back with the reverse body and confirm it
        (the decision is already journaled)."""
        try:
            self._send_reverse(trail)
            self._confirm_previous(trail)
        except RollbackFailed as exc:
            trail.record(ApplyStep.UNRESOLVED, f"{why}; {exc.one_line()}")
            return Settled(ApplyStep.UNRESOLVED, exc.one_line(), RollbackFailed)
        trail.record(ApplyStep.ROLLED_BACK, why)
        return Settled(
            ApplyStep.ROLLED_BACK, f"{self.source}: {why}; reversed it", ApplyNotVerified
        )

    def _send_reverse(self, trail: ApplyTrail) -> None:
        now = self._fingerprint_now(trail)
        if now == trail.new_sha256:
            try:
                self.rm.update_scheduler_conf(trail.reverse_body)
            except YarnError as exc:
                raise RollbackFailed(
                    f"{self.source}: the reverse change failed: {exc.one_line()}"
                ) from exc
        elif now != trail.old_sha256:
            raise RollbackFailed(
                f"{self.source}: the RM runs neither the previous nor the new configuration; "
                "it changed outside this apply"
            )
        trail.record(ApplyStep.RESTORED)

    def _confirm_previous(self, trail: ApplyTrail) -> None:
        try:
            now = self.running_config()
        except YarnError as exc:
            raise RollbackFailed(f"{self.source}: cannot read it back: {exc.one_line()}") from exc
        if _fingerprint(now) != trail.old_sha256:
            raise RollbackFailed(
                f"{self.source}: after the reverse change the RM does not hold the previous "
                "configuration"
            )
        problems = self._wait_for(now)
        if problems:
            raise RollbackFailed(
                f"{self.source}: the RM does not report the previous configuration: {problems[0]}"
            )

    def _fingerprint_now(self, trail: ApplyTrail) -> str:
        try:
            return _fingerprint(self.running_config())
        except YarnError as exc:
            raise RollbackFailed(f"{self.source}: cannot read it: {exc.one_line()}") from exc

    # ------------------------------------------------------------------ recovery

    def recover(self, history: ApplyHistory) -> ApplyStep:
        """Finish an apply a crash interrupted: the RM holds the previous or the new
        configuration (a body is applied whole or not at all); make ``/scheduler``
        report the new one, or put the previous one back. A YarnError (the RM
        cannot be read) propagates before anything is decided."""
        with self.settings.lock:
            trail = ApplyTrail.resume(self.journal, history)
            _let_a_request_in_flight_land(history)
            running = self.running_config()
            now = _fingerprint(running)
            if now == trail.new_sha256:
                if history.reached(ApplyStep.ROLLING_BACK):
                    return self._reverse(trail, _resumed(history)).step
                return self._verify_or_reverse(trail, running).step
            if now == trail.old_sha256:
                return self._recover_previous(trail, history, running)
            return trail.record(
                ApplyStep.UNRESOLVED,
                "recovery: the RM runs neither the previous nor the new configuration; "
                "it changed outside this apply",
            )

    def _recover_previous(
        self, trail: ApplyTrail, history: ApplyHistory, running: CapacitySchedulerConfig
    ) -> ApplyStep:
        took_it = history.reached(ApplyStep.ACTIVATED) or history.reached(ApplyStep.ROLLING_BACK)
        if not took_it:
            return trail.record(ApplyStep.ABANDONED, "recovered: the RM never took the change")
        why = _resumed(history)
        if not history.reached(ApplyStep.ROLLING_BACK):
            trail.record(ApplyStep.ROLLING_BACK, why)
        if not history.reached(ApplyStep.RESTORED):
            trail.record(ApplyStep.RESTORED)
        problems = self._wait_for(running)
        if problems:
            return trail.record(
                ApplyStep.UNRESOLVED, f"{why}; the RM does not report it: {problems[0]}"
            )
        return trail.record(ApplyStep.ROLLED_BACK, why)

    # ------------------------------------------------------------------ helpers

    def _problems(self, desired: CapacitySchedulerConfig) -> list[str]:
        try:
            return mismatches(desired, self.rm.scheduler())
        except YarnError as exc:
            return [f"cannot read /scheduler: {exc.one_line()}"]

    def _wait_for(self, desired: CapacitySchedulerConfig) -> list[str]:
        _, problems = poll_until(
            lambda: self._problems(desired), lambda p: not p, self.settings.verify
        )
        return problems


IN_FLIGHT_S = 3.0
"""How long a PUT sent just before a crash may still be landing in the RM."""


def _let_a_request_in_flight_land(history: ApplyHistory) -> None:
    """A crash while a PUT (forward or reverse) was on the wire leaves a request the
    RM may still be applying; reading the RM at once could miss it. Wait until the
    last step is ``IN_FLIGHT_S`` old (a restart usually takes longer anyway)."""
    if history.last.step not in (ApplyStep.PLANNED, ApplyStep.ROLLING_BACK):
        return
    remaining = history.last.at + IN_FLIGHT_S - time.time()
    if remaining > 0:
        time.sleep(remaining)


def _resumed(history: ApplyHistory) -> str:
    why = history.rollback_reason
    return f"recovered: {why}" if why else "recovered: the RM runs the previous configuration"
