"""Decisions: admission, in-quota preemption, reclaim and labels, one quota at a time.

Why a module of its own: `Engine` (engine.py) keeps the ledger's records current from
what the cluster shows; `Decider` is the loop that takes the decisions of the
semantics on them ("Admission", "In-quota preemption", "Reclaim", "In-quota and
over-quota pods"): it orders the quotas and their waiting pods and asks the parts it is
built from: the admission check (`fit`), flavor placement (`placement`), the reasons
(`reasons`) and the eviction planner (`planner`). `decide(now)` returns what the cluster
should be made to look like; time comes in as an argument.
"""

from __future__ import annotations

import sys
from functools import partial

from quotree import admission, fit
from quotree.accounts import TreeMember
from quotree.decisions import Decisions
from quotree.fit import Seat
from quotree.gang_admission import GangAdmission
from quotree.hold import Holds
from quotree.ledger import Ledger
from quotree.models import FLAVOR_LABEL
from quotree.options import EngineOptions
from quotree.placement import Placed, Placement
from quotree.planner import Clock, EvictionPlanner
from quotree.pods import PodRecord, PodState, QuotaPods
from quotree.reasons import Reasons
from quotree.round_scope import looks_again, waiting_behind, worth_looking_at
from quotree.runtime import QuotaTree
from quotree.trees import Forest, maintenance_reason

__all__ = ["Decider"]

#: One empty set for every admitted pod (an empty frozenset is not shared: 216 bytes each).
NO_VICTIMS: frozenset[str] = frozenset()


class Decider:
    """The decisions of docs/semantics.md taken on the ledger's records, one quota at a time."""

    def __init__(
        self,
        ledger: Ledger,
        forest: Forest,
        placement: Placement,
        holds: Holds,
        *,
        options: EngineOptions,
        reclaim_delay: float,
    ) -> None:
        self.ledger = ledger
        self.forest = forest
        self.tree = forest.default  # the default tree
        self.placement = placement
        self.flavors = placement.flavors
        self.holds = holds
        self.options = options
        #: Which pods to evict, and asking for it (`planner.py`).
        self.planner = EvictionPlanner(ledger, forest, reclaim_delay)
        # Quotas whose waiting pods' reasons a reclaim of this round changed ("being evicted"):
        # looked at again before the round ends (`decide_round`).
        self._rewake: set[str] = set()
        #: Maintenance mode (MCAD's): why, when on for the whole cluster (`set_maintenance`).
        self.maintenance: str | None = None
        #: The quotas as the admission check sees them (`fit.py`).
        self.seats = fit.Seats(forest, ledger.quota_pods)
        #: Why pending pods wait (`reasons.py`).
        self.reasons = Reasons(forest, ledger.quota_pods, self.planner)
        #: Pod groups admitted and evicted whole (`gang_admission.py`; the engine sets it up).
        self.gangs = GangAdmission(self, group_timeout=300.0, scheduling_timeout=300.0)

    # ------------------------------------------------------------ records

    def tree_of(self, name: str) -> QuotaTree:
        """The tree Cohort or ElasticQuota `name` belongs to (the default tree if unknown)."""
        return self.forest.tree_of(name)

    def admit(self, record: PodRecord, message: str, *, seq: int = 0) -> None:
        """Admit a pending pod (or take in one running without the gate); `seq`: its place
        in the in-quota order (0: after every pod admitted so far)."""
        assert record.quota is not None
        record.state = PodState.ADMITTED
        record.admitted_seq = seq or next(self.ledger.admissions)
        record.reason = message
        record.victims = NO_VICTIMS
        self.planner.unclaim(record.key)
        self.ledger.quota_pods[record.quota].add_admitted(record)
        self.tree_of(record.quota).add_used(record.quota, record.request)
        if self.forest.several:
            for other in record.also:
                pods = self.ledger.quota_pods[other]
                pods.remove_also_pending(record)
                pods.add_admitted(record)
                self.tree_of(other).add_used(other, record.request_in(other))
            self.forest.charge_outside(record, 1)
        if record.flavor is not None and record.facts.gated:
            # What the operator's admission patch does to the pod (the watch confirms it).
            facts = record.facts
            facts.labels = {**facts.labels, FLAVOR_LABEL: record.flavor}
            flavor = self.flavors.get(record.flavor)
            if flavor is not None:
                facts.node_selector = {**facts.node_selector, **flavor.node_labels}
        self.holds.remove(record.key)  # it is charged where it runs now, and only there
        record.placing = None  # never placed again

    def _admit_fit(
        self, name: str, member: TreeMember, record: PodRecord, out: Decisions, how: str = ""
    ) -> None:
        """Admit a pending pod found to fit its quota `name` (and everything else), unless
        the room it fits in is being freed for another unit (`planner.room_held`)."""
        held = self.planner.room_held(record, self.seats)
        if held is not None:
            self.reasons.set(record, held, out)
            self.reasons.waiting_on_ancestor.add(name)  # looked at again next round
            return
        # One string per quota (and way), shared by its admitted pods' records.
        self.admit(record, sys.intern(f"fits in ElasticQuota {name}{how}"))
        self._admitted(out, record, admission.fit_message(name, member, record))

    def _admitted(self, out: Decisions, record: PodRecord, message: str) -> None:
        """Report an admission decided here (with the flavor's nodeLabels, if any)."""
        out.admitted.append((record.key, message))
        assert record.quota is not None
        out.quotas.add(record.quota)
        out.quotas.update(record.also)
        if record.flavor is not None:
            flavor = self.flavors.get(record.flavor)
            out.flavors[record.key] = (
                record.flavor,
                dict(flavor.node_labels) if flavor is not None else {},
            )

    # ------------------------------------------------------------ decisions

    def decide(self, now: float = 0.0) -> Decisions:
        """Admit what fits, preempt within quotas, reclaim lent quota."""
        out = Decisions()
        self.gangs.begin(now, out)
        self.decide_round(now, out)
        self.gangs.finish(out, 0)
        return out

    def decide_round(self, now: float, out: Decisions) -> bool:
        """One pass over the quotas that may have changed; True when it evicted."""
        # Deferred subtrees (`QuotaTree.lazy`) rely on this shortcut; with several trees or
        # flavors, quotas are looked at for more than their own runtime: everything eager.
        self.tree.set_lazy(
            self.options.lazy_runtimes
            and self.options.skip_shrunk_quotas
            and not self.forest.several
            and not self.flavors,
            partial(looks_again, self.ledger),
        )
        changed = self.tree.settle()
        touched, self.ledger.touched = self.ledger.touched, set()
        self.reasons.new_round(now)
        out.pending.update(self.ledger.unannounced)
        self.ledger.unannounced = {}
        evicted = False
        if self.options.skip_shrunk_quotas and not self.forest.several:
            # A quota that only lost room can neither admit nor need reclaim unless it is
            # now over its runtime: skip it without building its room (`round_scope.worth_a_look`).
            # One tree only: with several, another tree's room may hold its pods back.
            changed = worth_looking_at(
                self.tree, self.ledger, self.reasons, changed, touched, flavors=bool(self.flavors)
            )
        names = changed | touched | self.reasons.waiting_on_ancestor
        for name in self.planner.released():  # pods kept on their flavor: place them again
            pods = self.ledger.quota_pods.get(name)
            if pods is not None:
                pods.room = None
            names.add(name)
        if self.forest.several:
            for tree in self.forest:
                if tree is not self.tree:
                    names |= tree.settle()
            released, self.ledger.released_in = self.ledger.released_in, set()
            names |= waiting_behind(self.ledger, names | released)
        # A unit that evictions were asked for goes first: the room its victims leave is its.
        first = self.planner.claimants()
        for name in sorted(names, key=lambda n: (n not in first, n)):
            evicted |= self._decide_quota(name, now, out, relabel=name in touched)
        # Placing a pod on a flavor moves its demand, which changes other quotas' runtimes:
        # look at those now (their reclaim clock starts), not one round later. So are the
        # quotas whose pods wait for what a reclaim of this round now takes back.
        for tree in list(self.forest):
            again = tree.settle()
            if self._rewake:
                again |= {name for name in self._rewake if self.tree_of(name) is tree}
            for name in sorted(again, key=lambda n: (n not in first, n)):
                evicted |= self._decide_quota(name, now, out, relabel=False)
        self._rewake = set()
        return evicted

    def _decide_quota(self, name: str, now: float, out: Decisions, *, relabel: bool) -> bool:
        pods = self.ledger.quota_pods.get(name)
        tree = self.tree_of(name)
        tree.refresh(name)
        member = tree.member(name)
        if pods is None:
            self.planner.waiting.pop(name, None)
            return False
        if member is None or not member.is_quota:
            self.planner.waiting.pop(name, None)
            pods.room = None  # when it comes back, look at its pods again
            problem = tree.problems.get(name)
            why = problem.message if problem else f"ElasticQuota {name} does not exist"
            for _, key in pods.pending:
                self.reasons.set(self.ledger.pods[key], f"waiting: {why}", out)
            return False
        maintenance = self._in_maintenance(member)
        if maintenance is not None:
            # Account and report, decide nothing: no admission, no eviction, no reclaim clock.
            self.planner.waiting.pop(name, None)
            pods.room = None  # when it ends, look at every pending pod again
            for _, key in pods.pending:
                self.reasons.set(
                    self.ledger.pods[key],
                    f"waiting: maintenance mode ({maintenance}): quotree admits nothing new and "
                    "evicts nothing until it ends",
                    out,
                )
            return False
        admitted_before = len(pods.admitted)
        evicted = self._admit_pending(name, member, pods, out, now=now)
        if relabel or evicted or admitted_before != len(pods.admitted):
            pods.standings.relabel(member.guarantee, member.resources, pods.admitted, out.labels)
        return evicted

    def _admit_pending(
        self,
        name: str,
        member: TreeMember,
        pods: QuotaPods,
        out: Decisions,
        *,
        now: float,
        force: bool = False,
    ) -> bool:
        if not pods.pending:
            return False
        force = force or self.planner.due(name, now)  # a unit's reclaim delay just passed
        path = self.tree_of(name).path_up(member)
        before = pods.room
        # The ancestors' room (`admission.room`'s last list) holds back only a pod that
        # waits on an ancestor; any other pending pod fails its own quota first, so the
        # ancestors' room growing cannot let it in. Looking again then would only redo
        # reasons, and only when the quota happens to change too (the `skip_shrunk_quotas`
        # shortcut does not). With flavors or several trees a pod may be tried elsewhere:
        # every number counts.
        ancestors = bool(
            self.forest.several or self.flavors or name in self.reasons.waiting_on_ancestor
        )
        if (
            not force
            and before is not None
            and not admission.room_grew(self._room(member, path, pods), before, ancestors=ancestors)
        ):
            return False
        evicted = self._scan_pending(name, member, path, pods, out, now=now)
        pods.room = None if evicted else self._room(member, path, pods)  # evicted: look again
        return evicted

    def _room(self, member: TreeMember, path: list[TreeMember], pods: QuotaPods) -> admission.Room:
        """`admission.room` of the quota and, with several trees, of the quotas its pending
        pods are also charged to (one after the other): no pending pod can start to fit
        unless one of them grew."""
        room = admission.room(member, path, pods)
        for other in pods.behind:
            tree = self.tree_of(other)
            tree.refresh(other)
            other_member = tree.member(other)
            if other_member is None or not other_member.is_quota:
                continue  # its pods wait with the reason; it comes back through `changed`
            other_room = admission.room(
                other_member, tree.path_up(other_member), self.ledger.quota_pods[other]
            )
            for mine, theirs in zip(room, other_room, strict=True):
                mine.extend(theirs)  # type: ignore[attr-defined]
        return room

    def refresh_reasons(self) -> Decisions:
        """Bring every pending pod's reason up to date with the current numbers."""
        out = Decisions()
        for name, pods in self.ledger.quota_pods.items():
            tree = self.tree_of(name)
            tree.refresh(name)
            member = tree.member(name)
            if member is not None and member.is_quota:
                self._admit_pending(name, member, pods, out, now=self.reasons.now, force=True)
        return out

    def _scan_pending(
        self,
        name: str,
        member: TreeMember,
        path: list[TreeMember],
        pods: QuotaPods,
        out: Decisions,
        *,
        now: float,
    ) -> bool:
        self.reasons.waiting_on_ancestor.discard(name)  # added back below while a pod still waits
        evicted = False
        # Where an earlier pending pod of this scan, fitting no flavor now, waits (by its
        # allowed flavors, request and preemptibility); forgotten when a pod is admitted or
        # evicted (`Placement.place`).
        placed: dict[object, str] = {}
        lowest: dict[str, int] = {}  # per quota, the lowest priority of its possible victims
        clocks: dict[str, Clock] = {}  # the reclaim clocks of the pods waiting for lent quota
        here = Seat(member, path, pods)
        for key in self.planner.queue(name, pods.pending):
            record = self.ledger.pods.get(key)
            if record is None or record.state is not PodState.PENDING:
                continue
            if record.group is not None:  # a pod group's pods are decided together
                handled = self.gangs.scan(name, here, record, out, lowest=lowest, clocks=clocks)
                if handled is not None:
                    evicted |= handled
                    placed.clear()
                    continue
            kept = record.flavor_needed and self.planner.keeps_flavor(record)
            if record.flavor_needed and not kept:
                placement = self.placement.place(
                    name, member, path, record, self.seats.check, placed=placed
                )
                if placement is Placed.NOWHERE:
                    assert member.config is not None
                    self.reasons.set(record, self.placement.nowhere(name, member.config), out)
                    continue
                if placement is Placed.FITS:  # checked there, every tree and ancestor
                    self._admit_fit(name, member, record, out)
                    placed.clear()
                    continue
            verdict = self.seats.check(record, name, here)
            if verdict.fits:
                self._admit_fit(name, member, record, out)
                placed.clear()
                continue
            if kept:
                self.planner.kept.add(name)  # placed again once the evictions are done
            elsewhere = partial(self.seats.broken_elsewhere, record)
            if not self.planner.worth_planning(record, verdict, lowest, elsewhere):
                self.reasons.explain(name, member, record, verdict, out)
                continue
            clock = partial(self.planner.waits, name, key, now, clocks)
            if self.planner.in_flight(record):
                self.reasons.for_victims(name, member, record, verdict, out)
                continue
            check = partial(self.seats.broken, record, name, here)
            flavors = self.placement.reclaim_flavors(record, member.config)
            plan = self.planner.plan(
                record, verdict, check=check, lenders=self.reasons.holders, clock=clock,
                lowest=lowest, now=now, out=out, flavors=flavors,
            )  # fmt: skip
            if plan.waits_for_evictions:
                self.reasons.for_victims(name, member, record, verdict, out)
                continue
            if not plan.evicted:
                self.reasons.explain(name, member, record, verdict, out, refusal=plan.refusal)
                continue
            evicted = True
            placed.clear()
            self.evicted_for()
            # Victims count as used until gone, unless the eviction took effect at once.
            self.tree_of(verdict.quota).refresh()
            after = self.seats.check(record, name, here)
            if after.fits:
                self._admit_fit(name, member, record, out, " after preemption")
            else:
                self.reasons.for_victims(name, member, record, after, out)
        self.planner.keep_clocks(name, clocks)
        if clocks:
            self.reasons.waiting_on_ancestor.add(name)  # its clocks run: look again each round
        return evicted

    def evicted_for(self) -> None:
        """Evictions were asked for: the pods waiting for lent quota now say so."""
        for waiting in self.reasons.waiting_on_ancestor:
            self.ledger.quota_pods[waiting].room = None  # their reasons now say "being evicted"
        self._rewake |= self.reasons.waiting_on_ancestor
        self.reasons.lenders_changed()

    # ------------------------------------------------------------ maintenance mode

    def set_maintenance(self, reason: str | None) -> None:
        """Enter maintenance mode for the whole cluster (reason: why, for pending pods) or,
        with None, leave it: every quota is looked at again."""
        if reason == self.maintenance:
            return
        self.maintenance = reason
        for name, pods in self.ledger.quota_pods.items():
            pods.room = None
            self.ledger.touched.add(name)

    def _in_maintenance(self, member: TreeMember) -> str | None:
        """Why the quota is in maintenance mode (None: it is not)."""
        return maintenance_reason(self.maintenance, self.forest.tree_of(member.name), member)
