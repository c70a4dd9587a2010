"""Apply a Capacity Scheduler configuration through the RM's mutation API
(``PUT /ws/v1/cluster/scheduler-conf``), for RMs with a mutable configuration store
(``yarn.scheduler.configuration.store.class`` = memory, leveldb, zk or fs).

The RM applies a body atomically: it logs the mutation, re-initialises the queues and
confirms, or rolls back and answers 400 with the reason (RMWebServices
updateSchedulerConfiguration). So a refusal leaves nothing to undo here. What this
applier adds: the minimal body from the diff, YARN's rules checked first, the
``/validate`` dry run where the RM has it, verification through ``/scheduler``, and a
reverse body when the RM took the change but does not report it.
"""

from __future__ import annotations

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
    new_apply_id,
)
from yarn_adapt.yarn.apply.expectations import mismatches
from yarn_adapt.yarn.apply.journal import ApplyJournal, ApplyStep, JournalEntry
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

    def apply(
        self, desired: CapacitySchedulerConfig, *, apply_id: str | None = None
    ) -> ApplyOutcome:
        apply_id = apply_id or new_apply_id()
        with self.settings.lock:
            running = self.running_config()
            plan = self._plan(running, desired)
            if plan.is_empty and not self._problems(desired):
                self._record(apply_id, ApplyStep.NOTHING_TO_DO, detail="the RM already runs it")
                return ApplyOutcome(apply_id, ApplyResult.ALREADY_APPLIED, plan)
            raise_if_invalid(desired, running, source=self.source)
            self._record(
                apply_id, ApplyStep.PLANNED, new_sha256=_fingerprint(desired), detail=plan.payload
            )
            self._validate_remotely(apply_id, plan.payload)
            self._put(
                apply_id, plan.payload, "the RM refused the change (it kept its configuration)"
            )
            self._record(apply_id, ApplyStep.ACTIVATED, new_sha256=_fingerprint(desired))
            self._verify_or_reverse(apply_id, desired, running)
            return ApplyOutcome(apply_id, ApplyResult.APPLIED, plan)

    def _validate_remotely(self, apply_id: str, body: str) -> None:
        if not self.use_validate_endpoint or not body:
            return
        try:
            self.rm.validate_scheduler_conf(body)
        except YarnNotSupported:
            return
        except YarnHTTPError as exc:
            self._record(apply_id, ApplyStep.FAILED, detail=exc.message)
            raise ApplyRejected(
                f"{self.source}: the RM's validator refused the change: {exc.message}"
            ) from exc

    def _put(self, apply_id: str, body: str, refusal: str) -> None:
        if not body:
            return
        try:
            self.rm.update_scheduler_conf(body)
        except YarnHTTPError as exc:
            self._record(apply_id, ApplyStep.FAILED, detail=exc.message)
            raise ApplyRejected(f"{self.source}: {refusal}: {exc.message}") from exc

    def _verify_or_reverse(
        self, apply_id: str, desired: CapacitySchedulerConfig, running: CapacitySchedulerConfig
    ) -> None:
        reached, problems = poll_until(
            lambda: self._problems(desired), lambda p: not p, self.settings.verify
        )
        if reached:
            self._record(apply_id, ApplyStep.VERIFIED)
            return
        try:
            now = self.running_config()
            self.rm.update_scheduler_conf(mutation_body(now, running))
        except YarnError as exc:
            self._record(apply_id, ApplyStep.FAILED, detail=f"reverse failed: {exc.one_line()}")
            raise RollbackFailed(
                f"{self.source}: the change is not reported and undoing it failed: {exc.one_line()}"
            ) from exc
        self._record(apply_id, ApplyStep.ROLLED_BACK, detail=problems[0])
        raise ApplyNotVerified(
            f"{self.source}: the RM does not report the change ({problems[0]}); reversed it"
        )

    def recover(self, interrupted: JournalEntry) -> ApplyStep:
        """An interrupted mutation either reached the RM whole or not at all: record
        which, by comparing what the RM runs with the fingerprint journaled."""
        with self.settings.lock:
            took_it = _fingerprint(self.running_config()) == interrupted.new_sha256
            step = ApplyStep.VERIFIED if took_it else ApplyStep.FAILED
            detail = "the RM runs it" if took_it else "the RM never took it"
            self._record(interrupted.apply_id, step, detail=f"recovered: {detail}")
            return step

    def _problems(self, desired: CapacitySchedulerConfig) -> list[str]:
        try:
            return mismatches(desired, self.rm.scheduler())
        except YarnError as exc:
            return [f"cannot read /scheduler: {exc.one_line()}"]

    def _record(
        self, apply_id: str, step: ApplyStep, *, new_sha256: str = "", detail: str = ""
    ) -> None:
        self.journal.record(
            JournalEntry(
                apply_id=apply_id,
                step=step,
                applier=NAME,
                target=self.source,
                new_sha256=new_sha256,
                detail=detail,
            )
        )
