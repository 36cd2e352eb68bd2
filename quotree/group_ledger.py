"""Pod groups in the engine: which pods form a group, and the group's state.

Why a module of its own: docs/reference/pods.md's "Pod groups" makes a group of pods one unit of
admission and eviction. The decision loop admits and evicts units (`gang_admission.py`);
this part keeps the groups it works on, in front of the pod intake (`intake.py`):

- which group a pod belongs to (group_sources.py: its Kubernetes PodGroup, its label
  and annotations, or its Job); a pod whose Job or PodGroup is not known yet, or one that
  disagrees with its group's other pods (`groups.disagreement`), waits alone, holding
  nothing, with a reason;
- an incomplete group (fewer than `min` pods exist) holds nothing: its pods are kept
  here, gated, with a reason, and never reach the intake (no demand, no queue);
- once complete, all its pods are taken in at once, charged (a waiting group counts
  in its quota's raw request, so runtime makes room) and queued together in the group's
  place (`PodRecord.rank`: priority, the time it became complete, its name);
- an admitted group keeps the room of its pods that ended as its reservation
  (`reservations.py`) until it ends (its pods all gone and, for a Job, the Job gone or
  finished) or is evicted; a pod that comes to replace one is queued for the next round
  (`replacing`), which admits it at once within the reservation;
- a group whose pods drop below `min` before it is admitted is held again; an admitted
  group that lost all its admitted pods (evicted, or ended with nothing reserved) waits
  again whole.

A group's state is "incomplete", "pending" or "admitted"; the counts per quota
(`counts`) and the pods held per quota (`held_in`) are kept as they change, so a report
walks no groups. It reads no clock: the timeouts are `group_clocks`', given
`decide(now)`'s time; the groups whose state or pods changed are listed for them (`look`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quotree.group_rebuild import Rebuild
from quotree.group_records import ADMITTED, INCOMPLETE, PENDING, GroupRecord, Groups, GroupView
from quotree.group_sources import PODGROUP, GroupSources, Waits
from quotree.groups import GroupSpec, JobFacts, disagreement
from quotree.ledger import Ledger
from quotree.native_groups import PodGroupFacts
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState
from quotree.reservations import Reservations
from quotree.resolution import Coverage

if TYPE_CHECKING:
    from quotree.intake import PodIntake

__all__ = ["ADMITTED", "INCOMPLETE", "PENDING", "GroupLedger", "GroupRecord", "GroupView", "Groups"]


class GroupLedger:
    """The pod groups of one engine, in front of its intake (see module docstring)."""

    def __init__(
        self, ledger: Ledger, intake: PodIntake, coverage: Coverage, reservations: Reservations
    ) -> None:
        self.ledger = ledger
        self._intake = intake
        self._coverage = coverage
        self.reservations = reservations
        self.groups: dict[str, GroupRecord] = {}
        self.of_pod: dict[str, str] = {}  # pod key -> its group's key
        self.sources = GroupSources()  # the Jobs and PodGroups
        self.jobs = self.sources.jobs  # "namespace/name" -> the Job's facts
        self.alone: dict[str, str | None] = {}  # pods held alone -> the Job they wait for
        self._waiting_for: dict[str, set[str]] = {}  # Job -> the pods held alone for it
        #: quota -> [pending, admitted] groups; and the gated pods kept here, per quota
        self._tally: dict[str, list[int]] = {}
        self.held_in: dict[str, int] = {}
        self.held_quota: dict[str, str] = {}  # pod kept here -> the quota counting it
        #: Groups whose state or pods changed since the last round (their clocks look).
        self.look: dict[str, GroupRecord] = {}
        #: Pending pods of admitted groups with a reservation: the next round admits them.
        self.replacing: set[str] = set()
        #: Groups whose pods run already join their unit as they come (`group_rebuild.py`).
        self.rebuild = Rebuild(self, intake)

    # ------------------------------------------------------------ Jobs

    def observe_job(self, job: JobFacts) -> None:
        """A Job the operator watches; its pods held for want of it are taken in again. A
        finished Job's group keeps no reservation."""
        self.jobs[job.key] = job
        self._retake(job.key)
        if job.finished:
            self._job_over(job.key)

    def observe_pod_group(self, key: str, pod_group: PodGroupFacts | None) -> None:
        """A Kubernetes PodGroup ("namespace/name"; None: it is gone) as the cluster shows
        it; its pods held for want of it are taken in again. Pods that name it once it is
        gone wait for it; the ones in its group stay there."""
        if pod_group is None:
            self.sources.pod_groups.pop(key, None)
            return
        self.sources.pod_groups[key] = pod_group
        self._retake(PODGROUP + key)

    def _retake(self, awaited: str) -> None:
        for key in sorted(self._waiting_for.pop(awaited, ())):
            record = self.ledger.pods.get(key)
            if record is not None:
                self.forget(key)
                self.observe(record.facts)

    def forget_job(self, namespace: str, name: str) -> None:
        key = f"{namespace}/{name}"
        self._job_over(key)
        self.sources.forget_job(key)

    def _job_over(self, key: str) -> None:
        group = self.groups.get(self.sources.group_of_job(key))
        if group is None or group.job is None or not group.slots:
            return
        self.reservations.release(group)
        if not group.pods:
            self.drop(group)

    def _may_replace(self, group: GroupRecord) -> bool:
        """The group goes on: a pod may come to replace one that ended."""
        if group.job is None:
            return bool(group.pods)  # plain pods: it ends with its last pod
        job = self.jobs.get(f"{group.key.split('/', 1)[0]}/{group.job}")
        return job is not None and not job.finished

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
                record = self.ledger.pods[key]
                record.facts = facts
                if facts.gated:
                    return record
                self._release(group)  # running without the gate: the group runs
                return self.ledger.pods.get(key)
            if group.state == ADMITTED and not group.placed:
                self.look[group.key] = group  # bound to a Node, maybe: the clock looks
            return self._taken_in(group, facts)
        if key in self.alone:
            record = self.ledger.pods[key]
            if facts.gated and facts.group == record.facts.group:
                record.facts = facts
                return record
            self.forget(key)
        if key in self.ledger.pods:
            return self._intake.observe(facts)  # a pod on its own, known already
        try:
            spec, job = self.sources.spec(facts)
        except Waits as waits:
            return self._hold_alone(facts, str(waits), waits.job)
        if spec is None:
            return self._intake.observe(facts)
        return self._join(facts, spec, job)

    def forget(self, key: str) -> PodRecord | None:
        """The pod is gone: out of its group (which may keep its room, be held again, or
        end)."""
        if key in self.alone:
            job = self.alone.pop(key)
            if job is not None:
                self._waiting_for.get(job, set()).discard(key)
            return self._unhold(key)
        group_key = self.of_pod.pop(key, None)
        if group_key is None:
            return self._intake.forget(key)
        group = self.groups[group_key]
        group.pods.pop(key, None)
        was_core = key in group.core
        group.core.discard(key)
        self.replacing.discard(key)
        self.ledger.grouped.pop(key, None)
        if key in group.held:
            group.held.discard(key)
            record = self._unhold(key)
            self.say_incomplete(group)
        else:
            record = self._intake.forget(key)
        if (
            record is not None
            and record.state is PodState.ADMITTED
            and group.state == ADMITTED
            and not group.evicted
            and key not in group.dropped
            and self._may_replace(group)
        ):
            if was_core:
                group.core_slots.add(key)
            self.reservations.keep(group, record)  # ended: its room waits for a replacement
        group.dropped.discard(key)
        if not group.pods:
            if group.slots and self._may_replace(group):
                return record  # a Job between pods: its reservation stays
            self.reservations.release(group)
            if not group.not_before:
                self.drop(group)
                return record
            # Requeued: its backoff outlives its pods (their controller makes them again).
            self.set_state(group, INCOMPLETE)
            group.core, group.evicted = set(), False
        elif group.state == ADMITTED and not group.slots and not self._admitted_members(group):
            self.set_state(group, PENDING)  # evicted or ended: it waits again whole
            group.admitted_since, group.placed, group.evicted = None, False, False
        if group.state == PENDING and len(group.pods) < group.spec.min:
            self._hold_again(group)
        return record

    def members(self, group: GroupRecord) -> list[PodRecord]:
        """The group's pods taken in (not held), by creation then name."""
        records = [self.ledger.pods.get(k) for k in group.pods if k not in group.held]
        found = [r for r in records if r is not None]
        found.sort(key=lambda r: (r.facts.created, r.facts.name))
        return found

    def _admitted_members(self, group: GroupRecord) -> list[PodRecord]:
        return [r for r in self.members(group) if r.state is PodState.ADMITTED]

    def counts(self, quota: str) -> tuple[int, int]:
        """Quota `quota`'s pending (complete or not) and admitted groups."""
        tally = self._tally.get(quota)
        return (tally[0], tally[1]) if tally is not None else (0, 0)

    # ------------------------------------------------------------ state

    def set_state(self, group: GroupRecord, state: str) -> None:
        """The group's state changes (the counts per quota follow; its clocks look)."""
        self._count(group, -1)
        group.state = state
        self._count(group, 1)
        self.look[group.key] = group

    def drop(self, group: GroupRecord) -> None:
        """The group's record goes (it ended, or its backoff is over with no pods)."""
        if self.groups.get(group.key) is group:
            self.reservations.release(group)
            self._count(group, -1)
            del self.groups[group.key]
            self.look.pop(group.key, None)

    def _add(self, group: GroupRecord) -> GroupRecord:
        self.groups[group.key] = group
        self._count(group, 1)
        self.look[group.key] = group
        return group

    def _count(self, group: GroupRecord, sign: int) -> None:
        if group.quota is not None:
            tally = self._tally.setdefault(group.quota, [0, 0])
            tally[1 if group.state == ADMITTED else 0] += sign

    # ------------------------------------------------------------ inside

    def _join(self, facts: PodFacts, spec: GroupSpec, job: str | None) -> PodRecord | None:
        key = facts.key
        group_key = f"{facts.namespace}/{spec.name}"
        quota = self._coverage.resolve(facts.namespace, facts.labels).quota
        group = self.groups.get(group_key)
        if group is None:
            group = self._add(GroupRecord(group_key, spec, quota, facts.priority, job))
        elif group.pods or group.slots:
            why = disagreement(group_key, (quota, spec, facts.priority), group.declaration)
            if why is not None:
                return self._hold_alone(facts, f"waiting: {why}", None, quota)
        else:
            self._count(group, -1)
            group.spec, group.quota, group.priority, group.job = spec, quota, facts.priority, job
            self._count(group, 1)
        self.of_pod[key] = group_key
        group.pods[key] = facts
        if group.state == INCOMPLETE:
            if not facts.gated or len(group.pods) >= spec.min:
                self._release(group, joining=key)
                return self.ledger.pods.get(key)
            group.held.add(key)
            record = self._hold(facts, "", quota)
            self.say_incomplete(group)
            self.look[group_key] = group  # its clock starts, if not yet
            return record
        self.ledger.grouped[key] = (group_key, self._rank(group, facts))
        return self._taken_in(group, facts)

    def _taken_in(self, group: GroupRecord, facts: PodFacts) -> PodRecord | None:
        """A pod of a pending or admitted group, through the intake; a pod of an admitted
        group with a reservation takes a slot: running already, at once; gated, in the
        next round (`gang_admission`)."""
        before = self.ledger.pods.get(facts.key)
        state = before.state if before is not None else None
        record = self._intake.observe(facts)
        if record is None or group.state != ADMITTED or not group.slots:
            self.rebuild.came_in(group, record, state)
            return record
        if record.state is PodState.PENDING:
            self.replacing.add(record.key)
        elif record.state is PodState.ADMITTED and state is not PodState.ADMITTED:
            self.replacing.discard(record.key)
            self.reservations.take(group, record, running=True)
        return record

    def _rank(self, group: GroupRecord, facts: PodFacts) -> tuple[int, float, str]:
        return (-group.priority, group.completed, f"{group.key}\0{facts.name}")

    def _release(self, group: GroupRecord, joining: str | None = None) -> None:
        """The group is complete (or runs): all its pods are taken in, together."""
        created = sorted(f.created for f in group.pods.values())
        group.completed = created[min(group.spec.min, len(created)) - 1]
        self.set_state(group, PENDING)
        group.incomplete_since, group.warned, group.told = None, False, None
        for key in sorted(group.pods, key=lambda k: (group.pods[k].created, k)):
            facts = group.pods[key]
            if key in group.held:
                self._unhold(key)
            elif key != joining:
                continue
            self.ledger.grouped[key] = (group.key, self._rank(group, facts))
            self._intake.observe(facts)
        group.held.clear()
        for record in self.members(group):
            if record.state is PodState.ADMITTED:
                self.rebuild.ran(group, record)  # it runs already (no gate)

    def _hold_again(self, group: GroupRecord) -> None:
        """A pending group lost pods below its min: its pods hold nothing again."""
        self.set_state(group, INCOMPLETE)
        for record in self.members(group):
            self._intake.forget(record.key)
            self.ledger.grouped.pop(record.key, None)
            group.held.add(record.key)
            self._hold(record.facts, "")
        self.say_incomplete(group)

    def say_incomplete(self, group: GroupRecord) -> None:
        """The group's reason, on each pod it holds (what `why` reads); a pod is told it (a
        `Pending` event) once per incomplete spell, and only once the spell has lasted
        `group_clocks.INCOMPLETE_QUIET` (`GroupRecord.told`)."""
        if group.state != INCOMPLETE or not group.pods:
            return
        spec = group.spec
        need = f"{spec.min} (of {spec.size})" if spec.elastic else str(spec.size)
        group.reason = (
            f"waiting: pod group {group.key} is incomplete: {len(group.pods)} of {need} pods "
            "exist; none of them holds quota until they all do"
        )
        told = group.told
        for key in group.held:
            self.ledger.pods[key].reason = group.reason
            if told is not None and key not in told:
                told.add(key)
                self.ledger.unannounced[key] = group.reason

    def _hold_alone(
        self, facts: PodFacts, reason: str, job: str | None, quota: str | None = ""
    ) -> PodRecord | None:
        if not facts.gated:  # it runs: it counts on its own, and says why
            return self.rebuild.alone(facts, reason)
        self.alone[facts.key] = job
        if job is not None:
            self._waiting_for.setdefault(job, set()).add(facts.key)
        return self._hold(facts, reason, quota)

    def _hold(self, facts: PodFacts, reason: str, quota: str | None = "") -> PodRecord:
        """A gated pod kept out of the intake: it waits, holds nothing, says why (and
        counts in the pendingPods of `quota`, the one it would be charged to; "": not
        resolved yet, a pod that joins a group was resolved once already)."""
        record = PodRecord(facts, None, PodState.PENDING, next(self.ledger.arrivals))
        record.reason = reason
        self.ledger.pods[facts.key] = record
        if reason:
            self.ledger.unannounced[facts.key] = reason
        if quota == "":
            quota = self._coverage.resolve(facts.namespace, facts.labels).quota
        if quota is not None:
            self.held_quota[facts.key] = quota
            self.held_in[quota] = self.held_in.get(quota, 0) + 1
        return record

    def _unhold(self, key: str) -> PodRecord | None:
        self.ledger.unannounced.pop(key, None)
        quota = self.held_quota.pop(key, None)
        if quota is not None:
            self.held_in[quota] -= 1
        return self.ledger.pods.pop(key, None)
