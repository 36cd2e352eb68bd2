"""Pod groups in the engine: which pods form a group, and the group's state.

Why a module of its own: api.md's "Pod groups (gangs)" makes a group of pods one unit of
admission and eviction. The decision loop admits and evicts units (`gang_admission.py`);
this part keeps the groups it works on, in front of the pod intake (`intake.py`):

- which group a pod belongs to: its label and annotations, or its Job's facts
  (`observe_job`); a pod of a Job not known yet, or one that disagrees with its group's
  other pods (`groups.disagreement`), waits alone, holding nothing, with a reason;
- an incomplete group (fewer than `min` pods exist) holds nothing: its pods are kept
  here, gated, with a reason, and never reach the intake (no demand, no queue);
- once complete, all its pods are taken in at once, charged (a waiting group counts
  in its quota's raw request, so runtime makes room) and queued together in the group's
  place (`PodRecord.rank`: priority, the time it became complete, its name);
- a group whose pods drop below `min` before it is admitted is held again; an admitted
  group that lost all its admitted pods waits again whole.

A group's state is "incomplete", "pending" or "admitted". It reads no clock: the
timeouts are `gang_admission`'s, given `decide(now)`'s time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from quotree.groups import GroupSpec, JobFacts, disagreement, group_spec
from quotree.ledger import Ledger
from quotree.models import ConfigError
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState
from quotree.resolution import Coverage

if TYPE_CHECKING:
    from quotree.intake import PodIntake

__all__ = ["GroupLedger", "GroupRecord", "GroupView", "Groups"]

INCOMPLETE = "incomplete"
PENDING = "pending"
ADMITTED = "admitted"


@dataclass(frozen=True, slots=True)
class GroupView:
    """One pod group as the shells show it (plugin, page, `quotree simulate -o json`)."""

    key: str  # "namespace/name"
    quota: str | None
    state: str  # "incomplete", "pending" or "admitted"
    size: int
    min: int
    pods: tuple[str, ...]  # its pods' keys, by creation
    reason: str


@dataclass(slots=True)
class GroupRecord:
    """The engine's record of one pod group."""

    key: str
    spec: GroupSpec
    quota: str | None
    priority: int
    job: str | None  # the Job whose pods form it, if any
    pods: dict[str, PodFacts] = field(default_factory=dict)  # its pods, by key
    held: set[str] = field(default_factory=set)  # its pods kept here (incomplete)
    state: str = INCOMPLETE
    completed: float = 0.0  # when it became complete: its min-th pod's creation
    reason: str = ""
    #: `gang_admission`'s clocks: since when it is incomplete, warned of it; since when
    #: admitted, all its pods bound to Nodes; requeue backoff (seconds) and its end.
    incomplete_since: float | None = None
    warned: bool = False
    admitted_since: float | None = None
    placed: bool = False
    backoff: float = 0.0
    not_before: float = 0.0
    evicted: bool = False  # its eviction was asked for: its pods leave
    #: The pods admitted as the unit (an elastic group's first `min`); the others joined
    #: one by one afterwards and are evicted one by one.
    core: set[str] = field(default_factory=set)

    @property
    def declaration(self) -> tuple[str | None, GroupSpec, int]:
        return (self.quota, self.spec, self.priority)

    def view(self) -> GroupView:
        pods = tuple(sorted(self.pods, key=lambda k: (self.pods[k].created, k)))
        return GroupView(
            self.key, self.quota, self.state, self.spec.size, self.spec.min, pods, self.reason
        )


class Groups(Mapping[str, GroupView]):
    """A read-only view of the groups, "namespace/name" -> `GroupView`."""

    def __init__(self, records: Mapping[str, GroupRecord]) -> None:
        self._records = records

    def __getitem__(self, key: str) -> GroupView:
        return self._records[key].view()

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)


class GroupLedger:
    """The pod groups of one engine, in front of its intake (see module docstring)."""

    def __init__(self, ledger: Ledger, intake: PodIntake, coverage: Coverage) -> None:
        self._ledger = ledger
        self._intake = intake
        self._coverage = coverage
        self.groups: dict[str, GroupRecord] = {}
        self.of_pod: dict[str, str] = {}  # pod key -> its group's key
        self.jobs: dict[str, JobFacts] = {}  # "namespace/name" -> the Job's facts
        self.alone: dict[str, str | None] = {}  # pods held alone -> the Job they wait for

    # ------------------------------------------------------------ Jobs

    def observe_job(self, job: JobFacts) -> None:
        """A Job the operator watches; its pods held for want of it are taken in again."""
        self.jobs[job.key] = job
        for key in [k for k, waits in self.alone.items() if waits == job.key]:
            record = self._ledger.pods.get(key)
            if record is not None:
                self.forget(key)
                self.observe(record.facts)

    def forget_job(self, namespace: str, name: str) -> None:
        self.jobs.pop(f"{namespace}/{name}", None)

    # ------------------------------------------------------------ pods

    def observe(self, facts: PodFacts) -> PodRecord | None:
        """Take in a pod (added or changed): through its group, or straight to the intake."""
        key = facts.key
        if facts.terminal:
            self.forget(key)
            return None
        group_key = self.of_pod.get(key)
        if group_key is not None:
            group = self.groups[group_key]
            group.pods[key] = facts
            if key in group.held:
                record = self._ledger.pods[key]
                record.facts = facts
                if facts.gated:
                    return record
                self._release(group)  # running without the gate: the group runs
                return self._ledger.pods.get(key)
            return self._intake.observe(facts)
        if key in self.alone:
            record = self._ledger.pods[key]
            if facts.gated and facts.group == record.facts.group:
                record.facts = facts
                return record
            self.forget(key)
        if key in self._ledger.pods:
            return self._intake.observe(facts)  # a pod on its own, known already
        try:
            spec, job = self._spec(facts)
        except _Waits as waits:
            return self._hold_alone(facts, str(waits), waits.job)
        if spec is None:
            return self._intake.observe(facts)
        return self._join(facts, spec, job)

    def forget(self, key: str) -> PodRecord | None:
        """The pod is gone: out of its group (which may be held again, or end)."""
        if key in self.alone:
            del self.alone[key]
            return self._unhold(key)
        group_key = self.of_pod.pop(key, None)
        if group_key is None:
            return self._intake.forget(key)
        group = self.groups[group_key]
        group.pods.pop(key, None)
        group.core.discard(key)
        self._ledger.grouped.pop(key, None)
        if key in group.held:
            group.held.discard(key)
            record = self._unhold(key)
            self._say_incomplete(group)
        else:
            record = self._intake.forget(key)
        if not group.pods:
            if not group.not_before:
                del self.groups[group_key]
                return record
            # Requeued: its backoff outlives its pods (their controller makes them again).
            group.state, group.core, group.evicted = INCOMPLETE, set(), False
        elif group.state == ADMITTED and not self._admitted_members(group):
            group.state = PENDING  # evicted or ended: it waits again whole
            group.admitted_since, group.placed, group.evicted = None, False, False
        if group.state == PENDING and len(group.pods) < group.spec.min:
            self._hold_again(group)
        return record

    def members(self, group: GroupRecord) -> list[PodRecord]:
        """The group's pods taken in (not held), by creation then name."""
        records = [self._ledger.pods.get(k) for k in group.pods if k not in group.held]
        found = [r for r in records if r is not None]
        found.sort(key=lambda r: (r.facts.created, r.facts.name))
        return found

    def _admitted_members(self, group: GroupRecord) -> list[PodRecord]:
        return [r for r in self.members(group) if r.state is PodState.ADMITTED]

    def counts(self, quota: str) -> tuple[int, int]:
        """Quota `quota`'s pending (complete or not) and admitted groups."""
        pending = admitted = 0
        for group in self.groups.values():
            if group.quota == quota:
                if group.state == ADMITTED:
                    admitted += 1
                else:
                    pending += 1
        return pending, admitted

    # ------------------------------------------------------------ inside

    def _spec(self, facts: PodFacts) -> tuple[GroupSpec | None, str | None]:
        """The group a new pod declares and the Job that makes it (None: on its own)."""
        if facts.group is not None:
            return facts.group, None
        if facts.owner_job is None or not facts.gated:
            return None, None
        job_key = f"{facts.namespace}/{facts.owner_job}"
        job = self.jobs.get(job_key)
        if job is None:
            raise _Waits(
                f"waiting: its Job {job_key} is not known to quotree yet (pods of a Job with "
                "parallelism above 1 are admitted as one group)",
                job_key,
            )
        try:
            spec = group_spec(facts.labels, facts.group_notes, f"Pod {facts.key}", job=job)
        except ConfigError as exc:
            raise _Waits(f"waiting: {exc}", job_key) from None
        return spec, (job.name if spec is not None and spec.name == job.name else None)

    def _join(self, facts: PodFacts, spec: GroupSpec, job: str | None) -> PodRecord | None:
        key = facts.key
        group_key = f"{facts.namespace}/{spec.name}"
        quota = self._coverage.resolve(facts.namespace, facts.labels).quota
        group = self.groups.get(group_key)
        if group is None:
            group = self.groups[group_key] = GroupRecord(
                group_key, spec, quota, facts.priority, job
            )
        elif group.pods:
            why = disagreement(group_key, (quota, spec, facts.priority), group.declaration)
            if why is not None:
                return self._hold_alone(facts, f"waiting: {why}", None)
        else:
            group.spec, group.quota, group.priority, group.job = spec, quota, facts.priority, job
        self.of_pod[key] = group_key
        group.pods[key] = facts
        if group.state == INCOMPLETE:
            if not facts.gated or len(group.pods) >= spec.min:
                self._release(group, joining=key)
                return self._ledger.pods.get(key)
            group.held.add(key)
            record = self._hold(facts, "")
            self._say_incomplete(group)
            return record
        self._ledger.grouped[key] = (group_key, self._rank(group, facts))
        return self._intake.observe(facts)

    def _rank(self, group: GroupRecord, facts: PodFacts) -> tuple[int, float, str]:
        return (-group.priority, group.completed, f"{group.key}\0{facts.name}")

    def _release(self, group: GroupRecord, joining: str | None = None) -> None:
        """The group is complete (or runs): all its pods are taken in, together."""
        created = sorted(f.created for f in group.pods.values())
        group.completed = created[min(group.spec.min, len(created)) - 1]
        group.state = PENDING
        group.incomplete_since, group.warned = None, False
        for key in sorted(group.pods, key=lambda k: (group.pods[k].created, k)):
            facts = group.pods[key]
            if key in group.held:
                self._unhold(key)
            elif key != joining:
                continue
            self._ledger.grouped[key] = (group.key, self._rank(group, facts))
            self._intake.observe(facts)
        group.held.clear()
        running = {r.key for r in self.members(group) if r.state is PodState.ADMITTED}
        if running:
            group.state, group.core = ADMITTED, running  # it runs already (no gate)

    def _hold_again(self, group: GroupRecord) -> None:
        """A pending group lost pods below its min: its pods hold nothing again."""
        group.state = INCOMPLETE
        for record in self.members(group):
            self._intake.forget(record.key)
            self._ledger.grouped.pop(record.key, None)
            group.held.add(record.key)
            self._hold(record.facts, "")
        self._say_incomplete(group)

    def _say_incomplete(self, group: GroupRecord) -> None:
        if group.state != INCOMPLETE or not group.pods:
            return
        spec = group.spec
        need = f"{spec.min} (of {spec.size})" if spec.elastic else str(spec.size)
        group.reason = (
            f"waiting: pod group {group.key} is incomplete: {len(group.pods)} of {need} pods "
            "exist; none of them holds quota until they all do"
        )
        for key in group.held:
            record = self._ledger.pods[key]
            if record.reason != group.reason:
                record.reason = group.reason
                self._ledger.unannounced[key] = group.reason

    def _hold_alone(self, facts: PodFacts, reason: str, job: str | None) -> PodRecord:
        self.alone[facts.key] = job
        return self._hold(facts, reason)

    def _hold(self, facts: PodFacts, reason: str) -> PodRecord:
        """A gated pod kept out of the intake: it waits, holds nothing, says why."""
        record = PodRecord(facts, None, PodState.PENDING, next(self._ledger.arrivals))
        record.reason = reason
        self._ledger.pods[facts.key] = record
        if reason:
            self._ledger.unannounced[facts.key] = reason
        return record

    def _unhold(self, key: str) -> PodRecord | None:
        self._ledger.unannounced.pop(key, None)
        return self._ledger.pods.pop(key, None)


class _Waits(Exception):
    """A pod waits alone: why, and the Job it waits for (if any)."""

    def __init__(self, reason: str, job: str | None) -> None:
        super().__init__(reason)
        self.job = job
