"""Pod groups rebuilt from running pods: a group that runs is one unit, whoever admitted it.

Why a module of its own: a group admitted by this engine gets its unit (its core pods,
one place in the in-quota order) from `gang_admission`; a group whose pods were
admitted before this engine saw them (the operator's start-up after a restart, a
standby that watched another replica admit them, `quotree simulate`'s bound pods) comes
in pod by pod, already running. Here each such pod joins its group's unit as it comes:
the group is admitted, its first `min` running pods are its core (in the place in the
order of the first of them, so the in-quota labels take them together), and pods above
`min` are an elastic group's pods that joined one by one. Preemption, reclaim, the
scheduling timeout and the counts then treat the group as if this engine had admitted
it (docs/semantics.md, "Admission"; docs/reference/pods.md, "Pod groups").

A running group whose pods disagree is rebuilt as far as it is consistent, and said once
(`notes`, a Warning `GroupInconsistent` on a pod of the group, which the operator also
logs): a running pod that declares another quota, size, min or priority than its group
counts on its own; a group that runs more pods than its size, or fewer than its `min`
once every pod has been seen (`check`), keeps the ones that run as its unit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quotree.group_records import ADMITTED, GroupRecord
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState

if TYPE_CHECKING:
    from quotree.group_ledger import GroupLedger
    from quotree.intake import PodIntake

__all__ = ["INCONSISTENT", "Rebuild"]

#: The reason of the Warning event that says what was found.
INCONSISTENT = "GroupInconsistent"


class Rebuild:
    """Running pods into their groups' units (see module docstring)."""

    def __init__(self, book: GroupLedger, intake: PodIntake) -> None:
        self._book = book
        self._intake = intake
        #: (pod, message): what was found, said once by the next round (a Warning event).
        self.notes: list[tuple[str, str]] = []
        #: Groups admitted from running pods, not yet checked for missing pods (`check`).
        self._unchecked: dict[str, GroupRecord] = {}
        self._said: set[tuple[str, str]] = set()  # (group, what) said already

    def came_in(
        self, group: GroupRecord, record: PodRecord | None, before: PodState | None
    ) -> None:
        """Pod `record` of `group` went through the intake, from state `before`: admitted
        there (running, or its gate removed by another replica), it joins the group's
        unit (`ran`)."""
        if record is None or record.state is not PodState.ADMITTED:
            return
        if before is not PodState.ADMITTED:
            self.ran(group, record)

    def ran(self, group: GroupRecord, record: PodRecord) -> None:
        """Pod `record` of `group` is admitted without this engine admitting its group (it
        runs, or another replica removed its gate): it joins the group's unit."""
        book = self._book
        if group.state != ADMITTED:
            book.set_state(group, ADMITTED)
            group.reason = f"admitted to ElasticQuota {record.quota}"
            group.core, group.admitted_since = set(), None
            group.placed = group.evicted = False
            self._unchecked[group.key] = group
        if len(group.core) + len(group.core_slots) < group.spec.min:
            first = [book.ledger.pods.get(key) for key in group.core]
            seqs = [r.admitted_seq for r in first if r is not None and r.admitted_seq]
            group.core.add(record.key)
            if seqs:
                self._seat(record, min(seqs))
            return
        running = sum(1 for r in book.members(group) if r.state is PodState.ADMITTED)
        if running + len(group.slots) > group.spec.size:
            self.say(
                group,
                "size",
                f"pod group {group.key}: {running} of its pods run, over its size "
                f"{group.spec.size}; the first {group.spec.min} are its unit, the others "
                "are taken back first",
            )

    def alone(self, facts: PodFacts, why: str) -> PodRecord | None:
        """A running pod that disagrees with its group counts on its own (and says so)."""
        why = why.removeprefix("waiting: ")
        self.notes.append((facts.key, f"{why}; it runs and is counted on its own"))
        return self._intake.observe(facts)

    def check(self) -> None:
        """Every pod has been seen (the operator's start-up): a group rebuilt from running
        pods with fewer than its `min` is said once; it stays one unit of those pods. A
        Job's group is not: its controller replaces the pods that ended."""
        checked, self._unchecked = self._unchecked, {}
        for group in checked.values():
            if self._book.groups.get(group.key) is not group or group.state != ADMITTED:
                continue
            if group.job is not None or any(f.owner_job for f in group.pods.values()):
                continue
            running = len(group.core) + len(group.core_slots)
            if running < group.spec.min:
                self.say(
                    group,
                    "min",
                    f"pod group {group.key}: {running} of its {group.spec.min} pods run (the "
                    f"others are gone); the {running} are kept as one unit",
                )

    def say(self, group: GroupRecord, what: str, message: str) -> None:
        if (group.key, what) in self._said or not group.pods:
            return
        self._said.add((group.key, what))
        first = min(group.pods, key=lambda k: (group.pods[k].created, k))
        self.notes.append((first, message))

    def _seat(self, record: PodRecord, seq: int) -> None:
        """The pod takes the group's place in the in-quota order."""
        if record.admitted_seq == seq:
            return
        record.admitted_seq = seq
        ledger = self._book.ledger
        for quota in (record.quota, *record.also):
            if quota is not None and quota in ledger.quota_pods:
                ledger.quota_pods[quota].standings.moved(record)
                ledger.touched.add(quota)
