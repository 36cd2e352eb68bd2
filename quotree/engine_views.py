"""The engine's read-only views: what the shells read back (status numbers, the runtimes
that moved, why a pod waits, the queue), apart from what changes the engine (engine.py).

Why a module of its own: `Engine` is the one surface the shells use; its inputs and
decisions are engine.py's, its views this mixin's, so that each stays readable at once.
Every view is as of the last `refresh()`; none changes a decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import islice

from quotree.decide import Decider
from quotree.fit import Fit
from quotree.group_ledger import GroupLedger
from quotree.ledger import Ledger
from quotree.pods import PodRecord, PodState
from quotree.positions import Book, Waiting, quota_stream, waiting_units
from quotree.resolution import namespaces_of
from quotree.status_numbers import MemberReport, member_report
from quotree.trees import Forest

__all__ = ["EngineViews"]


class EngineViews:
    """`Engine`'s views (see module docstring); `Engine` sets the parts they read."""

    ledger: Ledger
    pods: Mapping[str, PodRecord]
    forest: Forest
    decider: Decider
    group_ledger: GroupLedger

    def report(self, name: str) -> MemberReport:
        """status for a Cohort or ElasticQuota: request (demand), runtime, used, pod counts;
        as of the last `refresh()`."""
        tree = self.forest.tree_of(name)
        config = tree.config(name)
        covered = namespaces_of(config)
        unresolved = sum(1 for r in self.ledger.unresolved.values() if r.facts.namespace in covered)
        if config is not None and config.is_leaf:
            groups = self.group_ledger.counts(name)
            unresolved += self.group_ledger.held_in.get(name, 0)  # gated, held before the intake
        else:
            groups = (0, 0)
        return member_report(
            tree, self.ledger.quota_pods, name, unresolved=unresolved, groups=groups
        )

    def take_moved(self) -> set[str] | None:
        """The tree members whose runtime moved since the last call, over every tree (None:
        possibly all of them, e.g. after a full recomputation): their status is due."""
        moved: set[str] | None = set()
        for tree in self.forest:  # every tree's list is taken, whatever the others say
            names = tree.take_moved()
            moved = None if names is None or moved is None else moved | names
        return moved

    def admission_check(self, key: str) -> Fit | None:
        """The admission check of pending pod `key` as the numbers stand (`fit.check`, in
        every tree): what `kubectl quotree why` explains. None: no pending pod of a quota."""
        record = self.pods.get(key)
        if record is None or record.quota is None or record.state is not PodState.PENDING:
            return None
        seats = self.decider.seats
        return seats.check(record, record.quota, seats.seat(record.quota))

    def waiting(self, limit: int | None = None) -> list[Waiting]:
        """The waiting units (pods and pod groups) of the live quotas in the order the engine
        takes them, with their position in their quota and under each ancestor
        (`positions.py`: the quota's scan order, merged up the tree by the sharing's level).
        `limit`: only the first of each tree (their positions are exact all the same), at a
        cost that grows with `limit` times the quotas with waiting units, not the queues.
        As of the last `refresh()`."""
        return waiting_units(self.forest, self.ledger.quota_pods, self._book(), limit)

    def waiting_in(self, name: str, limit: int) -> list[Waiting]:
        """The first `limit` waiting units of ElasticQuota `name`, in its scan's order, each
        with its position in the quota only (`waiting` gives the ancestors' too); costs
        O(limit), not O(the queue)."""
        pods = self.ledger.quota_pods.get(name)
        if pods is None:
            return []
        return list(islice(quota_stream(name, pods, self._book()), limit))

    def _book(self) -> Book:
        return Book(
            self.ledger.pods,
            self.decider.planner.claims,
            self.group_ledger.groups,
            self.group_ledger.members,
        )

    def unresolved_pods(self) -> list[PodRecord]:
        """Gated pods no quota will take, each with its reason (counted in the pendingPods
        of the ElasticQuotas covering its namespace, if any)."""
        return list(self.ledger.unresolved.values())

    def admitted_count(self, name: str) -> int:
        """How many admitted, non-terminal pods ElasticQuota `name` holds (rule 7)."""
        pods = self.ledger.quota_pods.get(name)
        return len(pods.admitted) if pods else 0

    def pod_records(self) -> Iterable[PodRecord]:
        """Every pod the engine knows (the simulator adds the ones it evicted)."""
        return self.pods.values()
