"""Decisions: admission, in-quota preemption, reclaim and labels, one quota at a time.

Why a module of its own: `Engine` (engine.py) keeps its records current from
what the cluster shows; `Decider` holds those records and takes the
decisions of the semantics on them ("Admission", "In-quota preemption",
"Reclaim", "In-quota and over-quota pods"), asking `admission` and `eviction`
for the rules and the words. `decide(now)` returns what the cluster should be
made to look like; time comes in as an argument.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from quotree import admission, fit, flavor_fit
from quotree.accounts import TreeNode
from quotree.eviction import (
    Eviction,
    over_runtime,
    preemption_victims,
    reclaim_reason,
    reclaim_victims,
)
from quotree.fit import Seat, Short
from quotree.flavor_spec import FlavorConfig
from quotree.flavors import allowed_flavors, charge
from quotree.hold import Holds
from quotree.models import DEFAULT_TREE, FLAVOR_LABEL, MAINTENANCE_ANNOTATION, NodeConfig
from quotree.options import EngineOptions
from quotree.pods import Placing, PodRecord, PodState, QuotaPods
from quotree.runtime import OUTSIDE, QuotaTree

__all__ = ["Decider", "Decisions"]

#: Where the admission check finds a quota that is not in a live tree.
MISSING = Seat(None, [], None)

#: One empty set for every admitted pod (an empty frozenset is not shared: 216 bytes each).
NO_VICTIMS: frozenset[str] = frozenset()


@dataclass(slots=True)
class Decisions:
    """What the cluster should be made to look like after one `decide()`."""

    admitted: list[tuple[str, str]] = field(default_factory=list)  # (pod, message)
    evictions: list[Eviction] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # pod -> in-quota / over-quota
    pending: dict[str, str] = field(default_factory=dict)  # pod -> why it waits (when it changed)
    #: pod -> (flavor, its nodeLabels) for admitted pods charged to a flavor: the operator
    #: adds the labels to the pod's nodeSelector in the patch that removes the gate.
    flavors: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.admitted or self.evictions or self.labels or self.pending)


class Placed(Enum):
    """Where `Decider._place_on_flavor` left a pending pod."""

    NOWHERE = "nowhere"  # no flavor allows it (it waits, with that reason)
    WAITS = "waits"  # charged to the flavor it waits on: the usual checks say why
    FITS = "fits"  # charged to a flavor where it fits now, in every tree


class Decider:
    """The engine's records and the decisions taken on them; `Engine` feeds the records."""

    def __init__(self, reclaim_delay: float, options: EngineOptions) -> None:
        self.options = options
        #: The default tree; `trees` holds every tree by name (api.md, "Several trees").
        self.tree = QuotaTree()
        self.trees: dict[str, QuotaTree] = {DEFAULT_TREE: self.tree}
        self._tree_by_name: dict[str, QuotaTree] = {}  # node name -> its tree, when not default
        self._forest = False  # more than one tree: the forest paths below are taken
        self.reclaim_delay = reclaim_delay
        self.pods: dict[str, PodRecord] = {}
        self._quota_pods: dict[str, QuotaPods] = {}
        self._touched: set[str] = set()  # quotas whose pods or configuration changed
        # Quotas of other trees that a pod left (or kept, its eviction refused): the queues
        # of the pods also charged to them look again (`_waiting_behind`).
        self._released_in: set[str] = set()
        self._over_since: dict[str, float] = {}  # quota -> since when used > runtime
        self._unresolved: dict[str, PodRecord] = {}  # gated pods no quota will take
        self._unannounced: dict[str, str] = {}  # their reasons, until the next decide()
        self._waiting_on_ancestor: set[str] = set()  # quotas with pods that wait for lent quota
        self._lenders: dict[TreeNode, list[admission.Lender]] = {}  # per ancestor, this round
        # Quotas whose waiting pods' reasons a reclaim of this round changed ("being evicted"):
        # looked at again before the round ends (`_decide_round`).
        self._rewake: set[str] = set()
        self._now = 0.0
        self._admissions = itertools.count(1)
        self.flavors: dict[str, FlavorConfig] = {}  # ResourceFlavors by name
        self.flavor_generation = 0  # one more whenever `flavors` changes
        #: Maintenance mode (MCAD's): why, when on for the whole cluster (`set_maintenance`).
        self.maintenance: str | None = None
        #: What pending pods hold on the flavors they do not wait on (`hold.py`).
        self.holds = Holds(self.tree_of, enabled=options.holds)

    # ------------------------------------------------------------ records

    @property
    def forest(self) -> bool:
        """True when more than one tree is in play."""
        return self._forest

    def tree_of(self, name: str) -> QuotaTree:
        """The tree Cohort or ElasticQuota `name` belongs to (the default tree if unknown)."""
        return self._tree_by_name.get(name, self.tree)

    def _tree_name(self, node: TreeNode) -> str | None:
        """The node's tree for reasons, None for the default tree."""
        config = node.config
        return config.tree if config is not None and config.tree != DEFAULT_TREE else None

    def _set_evicting(self, record: PodRecord, evicting: bool) -> None:
        assert record.quota is not None
        self._quota_pods[record.quota].set_evicting(record, evicting)
        for other in record.also:
            self._quota_pods[other].set_evicting(record, evicting)

    def _admit(self, record: PodRecord, message: str) -> None:
        assert record.quota is not None
        record.state = PodState.ADMITTED
        record.admitted_seq = next(self._admissions)
        record.reason = message
        record.victims = NO_VICTIMS
        self._quota_pods[record.quota].add_admitted(record)
        self.tree_of(record.quota).add_used(record.quota, record.request)
        if self._forest:
            for other in record.also:
                pods = self._quota_pods[other]
                pods.remove_also_pending(record)
                pods.add_admitted(record)
                self.tree_of(other).add_used(other, record.request)
            self._charge_outside(record, 1)
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
        self, name: str, node: TreeNode, record: PodRecord, out: Decisions, how: str = ""
    ) -> None:
        """Admit a pending pod found to fit its quota `name` (and everything else)."""
        self._admit(record, f"fits in ElasticQuota {name}{how}")
        self._admitted(out, record, admission.fit_message(name, node, record))

    def _charge_outside(self, record: PodRecord, sign: int) -> None:
        """An admitted pod holds capacity in the trees that do not charge it too."""
        if len(record.also) + 1 == len(self.trees):
            return  # every tree charges it
        charged = {self.tree_of(q) for q in (record.quota, *record.also) if q}
        for tree in self.trees.values():
            if tree not in charged:
                tree.add_used(OUTSIDE, record.request, sign)

    def _admitted(self, out: Decisions, record: PodRecord, message: str) -> None:
        """Report an admission decided here (with the flavor's nodeLabels, if any)."""
        out.admitted.append((record.key, message))
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
        self._decide_round(now, out)
        return out

    def _decide_round(self, now: float, out: Decisions) -> bool:
        """One pass over the quotas that may have changed; True when it evicted."""
        # Deferred subtrees (`QuotaTree.lazy`) rely on this shortcut; with several trees or
        # flavors, quotas are looked at for more than their own runtime: everything eager.
        self.tree.set_lazy(
            self.options.lazy_runtimes
            and self.options.skip_shrunk_quotas
            and not self._forest
            and not self.flavors
        )
        changed = self.tree.settle()
        touched, self._touched = self._touched, set()
        self._now, self._lenders = now, {}
        out.pending.update(self._unannounced)
        self._unannounced = {}
        evicted = False
        skipped: set[str] = set()
        if self.options.skip_shrunk_quotas and not self._forest:
            # A quota that only lost room can neither admit nor need reclaim unless it is
            # now over its runtime: skip it without building its room (`_only_shrank`).
            # One tree only: with several, another tree's room may hold its pods back.
            grown = self.tree.grown_quotas
            skipped = {
                name
                for name in changed
                if name not in grown and name not in touched and self._only_shrank(name)
            }
            changed -= skipped
        names = changed | touched | set(self._over_since) | self._waiting_on_ancestor
        if self._forest:
            for tree in self.trees.values():
                if tree is not self.tree:
                    names |= tree.settle()
            released, self._released_in = self._released_in, set()
            names |= self._waiting_behind(names | released)
        order = sorted(names)
        i = 0
        while i < len(order):
            name = order[i]
            i += 1
            if self._decide_quota(name, now, out, relabel=name in touched):
                evicted = True
                if skipped and self.tree.room_grew_since_settle():
                    # The eviction may have given room (at once, in the simulator) to a quota
                    # skipped above: it now takes its turn in name order, as it would have
                    # without the skip (who is admitted first can matter).
                    back = {s for s in skipped if s > name and not self._only_shrank(s)}
                    if back:
                        skipped -= back
                        order[i:] = sorted({*order[i:], *back})
        # Placing a pod on a flavor moves its demand, which changes other quotas' runtimes:
        # look at those now (their reclaim clock starts), not one round later. So are the
        # quotas whose pods wait for what a reclaim of this round now takes back.
        for tree in list(self.trees.values()):
            again = tree.settle()
            if self._rewake:
                again |= {name for name in self._rewake if self.tree_of(name) is tree}
            for name in sorted(again):
                evicted |= self._decide_quota(name, now, out, relabel=False)
        self._rewake = set()
        return evicted

    def _waiting_behind(self, names: set[str]) -> set[str]:
        """The quotas whose pending pods are also charged to one of `names` (in another
        tree): when that quota changes, they look at their pending pods again."""
        woken: set[str] = set()
        for name in names:
            pods = self._quota_pods.get(name)
            if pods is not None and pods.queued_in:
                woken.update(pods.queued_in)  # their `room` holds this quota's room too
        return woken

    def _only_shrank(self, name: str) -> bool:
        """True when `decide` has nothing to do for quota `name`, whose runtime changed but
        whose room grew nowhere (neither its runtime or guarantee nor any ancestor's room:
        `QuotaTree.grown_quotas`): its pending pods were looked at with at least this much
        room (`QuotaPods.room` is set), it waits for no ancestor, it was not over its
        runtime and is not now. `_decide_quota` would then change nothing."""
        if name in self._over_since or name in self._waiting_on_ancestor:
            return False
        pods = self._quota_pods.get(name)
        if pods is None:
            return True
        if pods.pending and pods.room is None:
            return False
        node = self.tree.node(name)
        if node is None or not node.is_quota:
            return False
        grown = self.tree.grown_quotas
        if any(ancestor.name in grown for ancestor in self.tree.path_up(node)):
            return False  # an ancestor's room may have grown: a waiting pod may fit now
        if self.tree.gained_room_since_settle(node):
            return False  # a pod released in this round gave it or an ancestor room
        used, runtime = node.used, node.runtime
        return all(used[r] <= runtime[r] for r in node.resources)

    def _decide_quota(self, name: str, now: float, out: Decisions, *, relabel: bool) -> bool:
        pods = self._quota_pods.get(name)
        tree = self.tree_of(name)
        node = tree.node(name)
        if pods is None:
            self._over_since.pop(name, None)
            return False
        if node is None or not node.is_quota:
            self._over_since.pop(name, None)
            pods.room = None  # when it comes back, look at its pods again
            problem = tree.problems.get(name)
            why = problem.message if problem else f"ElasticQuota {name} does not exist"
            for _, key in pods.pending:
                self._set_reason(self.pods[key], f"waiting: {why}", out)
            return False
        maintenance = self._in_maintenance(node)
        if maintenance is not None:
            # Account and report, decide nothing: no admission, no eviction, no reclaim clock.
            self._over_since.pop(name, None)
            pods.room = None  # when it ends, look at every pending pod again
            for _, key in pods.pending:
                self._set_reason(
                    self.pods[key],
                    f"waiting: maintenance mode ({maintenance}): quotree admits nothing new and "
                    "evicts nothing until it ends",
                    out,
                )
            return False
        evicted = self._reclaim(name, node, pods, now, out)
        admitted_before = len(pods.admitted)
        evicted |= self._admit_pending(name, node, pods, out)
        if relabel or evicted or admitted_before != len(pods.admitted):
            for record, label in admission.capacity_labels(node, pods):
                if record.capacity != label and record.quota == name:  # its first tree's
                    record.capacity = label
                    out.labels[record.key] = label
        return evicted

    def _set_reason(self, record: PodRecord, reason: str, out: Decisions) -> None:
        record.reason_key = None
        if record.reason != reason:
            record.reason = reason
            out.pending[record.key] = reason

    def _set_why(
        self,
        name: str,
        node: TreeNode,
        record: PodRecord,
        short: Mapping[str, int],
        out: Decisions,
        *,
        non_preemptible: bool = False,
    ) -> None:
        """Why the pod does not fit; the message is built only when its numbers change."""
        key = admission.reason_key(node, short, non_preemptible=non_preemptible)
        if record.reason_key == key:
            return
        pods = self._quota_pods[name]
        reason = admission.why_not(
            name,
            node,
            pods,
            record,
            short,
            non_preemptible=non_preemptible,
            tree=self._tree_name(node) if self._forest else None,
        )
        record.reason_key = key
        if record.reason != reason:
            record.reason = reason
            out.pending[record.key] = reason

    def _seat(self, name: str) -> Seat:
        """Quota `name` as the admission check sees it (its tree's runtimes settled)."""
        tree = self.tree_of(name)
        node = tree.node(name)
        if node is None or not node.is_quota:
            return MISSING
        return Seat(node, tree.path_up(node), self._quota_pods[name])

    def _check(self, record: PodRecord, name: str, here: Seat) -> fit.Verdict:
        """The admission check of a pending pod of quota `name` (`here`), in every tree."""
        if not record.also:
            return fit.check(record, ((name, here),))
        return fit.check(record, self._with_other_trees(name, here, record))

    def _with_other_trees(
        self, name: str, here: Seat, record: PodRecord
    ) -> Iterator[tuple[str, Seat]]:
        yield name, here
        for other in record.also:
            yield other, self._seat(other)

    def _explain(
        self, name: str, node: TreeNode, record: PodRecord, verdict: fit.Verdict, out: Decisions
    ) -> None:
        """Say why a pending pod of quota `name` waits, from the admission check's verdict."""
        short, amounts = verdict.short, verdict.amounts
        if verdict.quota == name:
            if short is Short.ANCESTOR:
                assert verdict.node is not None
                self._waits_for_ancestor(name, node, verdict.node, record, short=amounts, out=out)
            else:
                self._set_why(
                    name, node, record, amounts, out, non_preemptible=short is Short.NON_PREEMPTIBLE
                )
            return
        # Its quota in another tree (api.md, "Several trees").
        other = verdict.quota
        tree = self.tree_of(other)
        if short is Short.MISSING or verdict.node is None:
            problem = tree.problems.get(other)
            why = problem.message if problem else f"ElasticQuota {other} does not exist"
            self._set_reason(record, f"waiting: {why}", out)
            return
        label = self._tree_name(verdict.node)
        if short is Short.ANCESTOR:
            self._waiting_on_ancestor.add(name)
            lenders = self._lent(verdict.node, amounts, tree)
            reason = admission.why_waits(verdict.node, record, amounts, lenders, tree=label)
        else:
            reason = admission.why_not(
                other,
                verdict.node,
                self._quota_pods[other],
                record,
                amounts,
                non_preemptible=short is Short.NON_PREEMPTIBLE,
                tree=label,
            )
        self._set_reason(record, reason, out)

    def _waits_for_ancestor(
        self,
        name: str,
        node: TreeNode,
        ancestor: TreeNode,
        record: PodRecord,
        *,
        short: Mapping[str, int],
        out: Decisions,
    ) -> None:
        """The pod fits its quota, but an ancestor (or the cluster) still holds lent quota.

        It waits, with a reason that names the ancestor, the quotas that hold
        more than their runtime below it and when they are reclaimed.
        """
        self._waiting_on_ancestor.add(name)
        tree = self.tree_of(name)
        lenders = self._lent(ancestor, short, tree)
        key = (
            "ancestor",
            id(tree),
            ancestor.name,
            tuple((r, short[r], ancestor.used[r], ancestor.runtime[r]) for r in short),
            tuple((x.quota, x.resource, x.amount, x.seconds is None) for x in lenders),
        )
        if record.reason_key != key:
            reason = admission.why_waits(
                ancestor,
                record,
                short,
                lenders,
                tree=self._tree_name(node) if self._forest else None,
            )
            record.reason_key = key
            if record.reason != reason:
                record.reason = reason
                out.pending[record.key] = reason

    def _lent(
        self, ancestor: TreeNode, short: Mapping[str, int], tree: QuotaTree
    ) -> list[admission.Lender]:
        """What the quotas below `ancestor` hold above their runtime in `short`'s resources."""
        lenders = self._lenders.get(ancestor)
        if lenders is None:
            lenders = []
            for quota in tree.quotas_below(ancestor):
                pods = self._quota_pods.get(quota.name)
                evicting = pods.evicting if pods else {}
                for resource in quota.resources:
                    excess = quota.used[resource] - quota.runtime[resource]
                    if excess <= 0:
                        continue
                    if excess > evicting.get(resource, 0):
                        since = self._over_since.get(quota.name, self._now)
                        seconds: float | None = since + self.reclaim_delay - self._now
                    else:
                        seconds = None
                    lenders.append(admission.Lender(quota.name, resource, excess, seconds))
            self._lenders[ancestor] = lenders
        out = []
        missing = dict(short)
        for lender in lenders:
            if missing.get(lender.resource, 0) > 0:
                amount = min(lender.amount, missing[lender.resource])
                missing[lender.resource] -= amount
                out.append(admission.Lender(lender.quota, lender.resource, amount, lender.seconds))
        return out

    def _reclaim(
        self, name: str, node: TreeNode, pods: QuotaPods, now: float, out: Decisions
    ) -> bool:
        over = over_runtime(node, pods)
        if not over:
            self._over_since.pop(name, None)
            return False
        since = self._over_since.setdefault(name, now)
        if now - since < self.reclaim_delay:
            return False
        victims = reclaim_victims(node, pods, over)
        if not victims:
            return False
        reason = reclaim_reason(name, node, pods, over)
        for victim in victims:
            self._evict(victim, "Reclaimed", reason, out)
        for waiting in self._waiting_on_ancestor:
            self._quota_pods[waiting].room = None  # their reasons now say "being evicted"
        self._rewake |= self._waiting_on_ancestor
        self._lenders = {}
        self._over_since.pop(name, None)
        return True

    def _evict(
        self,
        record: PodRecord,
        kind: Literal["Preempted", "Reclaimed"],
        reason: str,
        out: Decisions,
    ) -> None:
        """Ask for the pod's eviction."""
        assert record.quota is not None
        out.evictions.append(Eviction(record.key, record.quota, kind, reason))
        self._eviction_asked(record, kind, reason)

    def _eviction_asked(self, record: PodRecord, kind: str, reason: str) -> None:
        """The pod's resources count as on their way back until the pod is gone."""
        self._set_evicting(record, True)

    def _admit_pending(
        self, name: str, node: TreeNode, pods: QuotaPods, out: Decisions, *, force: bool = False
    ) -> bool:
        if not pods.pending:
            return False
        path = self.tree_of(name).path_up(node)
        before = pods.room
        # The ancestors' room (`admission.room`'s last list) holds back only a pod that
        # waits on an ancestor; any other pending pod fails its own quota first, so the
        # ancestors' room growing cannot let it in. Looking again then would only redo
        # reasons, and only when the quota happens to change too (the `skip_shrunk_quotas`
        # shortcut does not). With flavors or several trees a pod may be tried elsewhere:
        # every number counts.
        ancestors = bool(self._forest or self.flavors or name in self._waiting_on_ancestor)
        if (
            not force
            and before is not None
            and not admission.room_grew(self._room(node, path, pods), before, ancestors=ancestors)
        ):
            return False
        evicted = self._scan_pending(name, node, path, pods, out)
        pods.room = self._room(node, path, pods)
        return evicted

    def _room(self, node: TreeNode, path: list[TreeNode], pods: QuotaPods) -> admission.Room:
        """`admission.room` of the quota and, with several trees, of the quotas its pending
        pods are also charged to (one after the other): no pending pod can start to fit
        unless one of them grew."""
        room = admission.room(node, path, pods)
        for other in pods.behind:
            tree = self.tree_of(other)
            other_node = tree.node(other)
            if other_node is None or not other_node.is_quota:
                continue  # its pods wait with the reason; it comes back through `changed`
            other_room = admission.room(
                other_node, tree.path_up(other_node), self._quota_pods[other]
            )
            for mine, theirs in zip(room, other_room, strict=True):
                mine.extend(theirs)  # type: ignore[attr-defined]
        return room

    def refresh_reasons(self) -> Decisions:
        """Bring every pending pod's reason up to date with the current numbers."""
        out = Decisions()
        for name, pods in self._quota_pods.items():
            node = self.tree_of(name).node(name)
            if node is not None and node.is_quota:
                self._admit_pending(name, node, pods, out, force=True)
        return out

    def _scan_pending(
        self, name: str, node: TreeNode, path: list[TreeNode], pods: QuotaPods, out: Decisions
    ) -> bool:
        self._waiting_on_ancestor.discard(name)  # added back below while a pod still waits
        evicted = False
        # Where an earlier pending pod of this scan, fitting no flavor now, waits (by its
        # allowed flavors, request and preemptibility); forgotten when a pod is admitted or
        # evicted (`_place_on_flavor`).
        placed: dict[object, str] = {}
        may_preempt = node.config is not None and node.config.preempt_within_quota
        lowest: int | None = None  # lowest priority among the possible victims, when needed
        here = Seat(node, path, pods)
        for _, key in list(pods.pending):
            record = self.pods.get(key)
            if record is None or record.state is not PodState.PENDING:
                continue
            if record.flavor_needed:
                placement = self._place_on_flavor(name, node, path, record, out, placed=placed)
                if placement is Placed.NOWHERE:
                    continue
                if placement is Placed.FITS:  # checked there, every tree and ancestor
                    self._admit_fit(name, node, record, out)
                    placed.clear()
                    continue
            verdict = self._check(record, name, here)
            if verdict.fits:
                self._admit_fit(name, node, record, out)
                placed.clear()
                continue
            if verdict.quota != name or verdict.short is not Short.QUOTA:
                self._explain(name, node, record, verdict, out)
                continue
            short = verdict.amounts
            if record.victims and any(
                v in self.pods and self.pods[v].evicting for v in record.victims
            ):
                self._set_reason(record, admission.waiting_for_victims(record), out)
                continue
            if may_preempt and lowest is None:
                lowest = min(
                    (
                        r.facts.priority
                        for r in pods.admitted.values()
                        if r.preemptible and not r.evicting
                    ),
                    default=record.facts.priority,
                )
            if may_preempt and lowest is not None and lowest < record.facts.priority:
                victims = preemption_victims(pods, record, short)
                if victims:
                    lowest = None  # victims are gone: look again for the next pod
                    reason = (
                        f"preempted by {key} (priority {record.facts.priority}) "
                        f"within ElasticQuota {name}"
                    )
                    for victim in victims:
                        self._evict(victim, "Preempted", reason, out)
                    evicted = True
                    placed.clear()
                    record.victims = frozenset(v.key for v in victims)
                    # Victims still count as used until they are gone, unless the eviction
                    # took effect at once (the simulator): then the pod may fit now, by the
                    # runtimes and guarantee their departure left (`node()` settles them).
                    self.tree_of(name).node(name)
                    after = self._check(record, name, here)
                    if after.fits:
                        self._admit_fit(name, node, record, out, " after preemption")
                    elif after.quota == name and after.short is Short.QUOTA:
                        self._set_reason(record, admission.waiting_for_victims(record), out)
                    else:
                        self._explain(name, node, record, after, out)
                    continue
            self._set_why(name, node, record, short, out)
        return evicted

    # ------------------------------------------------------------ maintenance mode

    def set_maintenance(self, reason: str | None) -> None:
        """Enter maintenance mode for the whole cluster (reason: why, for pending pods) or,
        with None, leave it: every quota is looked at again."""
        if reason == self.maintenance:
            return
        self.maintenance = reason
        for name, pods in self._quota_pods.items():
            pods.room = None
            self._touched.add(name)

    def _in_maintenance(self, node: TreeNode) -> str | None:
        """Why the quota is in maintenance mode (None: it is not): the operator's setting,
        or the annotation on the top-level node above it."""
        if self.maintenance is not None:
            return self.maintenance
        path = self.tree_of(node.name).path_up(node)
        top = path[-2] if len(path) >= 2 else node  # path ends with the cluster root
        if top.config is not None and top.config.maintenance:
            return f"annotation {MAINTENANCE_ANNOTATION} on {top.config.describe()}"
        return None

    # ------------------------------------------------------------ resource flavors

    def _charge_to(self, record: PodRecord, flavor: str) -> None:
        """Move a pending pod's request (its demand) to `flavor`."""
        if record.flavor == flavor:
            return
        assert record.quota is not None
        config = self.tree_of(record.quota).config(record.quota)
        assert config is not None
        # The pod's demand moves in every tree that charges it (api.md, "Several trees").
        charged_to = (record.quota, *record.also)
        before = record.request
        record.flavor = flavor
        record.charged = self._charge_on(record, config, flavor)
        # Only what differs moves (the flavored resources): the rest, unchanged, would
        # climb down and up again and have every parent on the way redistribute it.
        delta = {r: -amount for r, amount in before.items()}
        for resource, amount in record.request.items():
            delta[resource] = delta.get(resource, 0) + amount
        for quota in charged_to:
            self.tree_of(quota).add_request(quota, delta)
        if not self.holds.moved(record.key, flavor):
            self.holds.changed(charged_to, (*before, *record.request))
        record.reason_key = None

    def _placing(self, record: PodRecord, config: NodeConfig) -> Placing:
        """The pod's flavor look-ups under its quota's `config`: taken once, and again only
        when the configuration, the ResourceFlavors or the pod (`Engine.observe_pod`) change."""
        placing = record.placing
        if (
            placing is None
            or placing.config is not config
            or placing.generation != self.flavor_generation
        ):
            allowed = allowed_flavors(config, record.facts, self.flavors)
            likeness = (
                tuple(allowed),
                tuple(sorted(record.facts.request.items())),
                record.preemptible,
                record.also,  # with several trees, its quotas there decide too
            )
            placing = record.placing = Placing(config, self.flavor_generation, allowed, likeness)
        return placing

    def _charge_on(self, record: PodRecord, config: NodeConfig, flavor: str) -> dict[str, int]:
        """What the pod is charged on `flavor` (`flavors.charge`), kept with its look-ups.
        Do not change the dict."""
        charges = self._placing(record, config).charges
        charged = charges.get(flavor)
        if charged is None:
            charged = charges[flavor] = charge(
                config, record.facts.request, self.flavors.get(flavor) or FlavorConfig(flavor)
            )
        return charged

    def _hold_pending(self, record: PodRecord) -> bool:
        """A new pending pod charged to a flavor holds its quota's guarantee on the other
        flavors it may use (`hold.py`). True when it holds (its quotas' holds are synced)."""
        if record.flavor is None or record.quota is None or not self.holds.enabled:
            return False
        config = self.tree_of(record.quota).config(record.quota)
        if config is None:
            return False
        allowed = self._placing(record, config).allowed
        if len(allowed) < 2:
            return False
        on = {}
        for flavor in allowed:
            suffix = f"@{flavor}"
            amounts = self._charge_on(record, config, flavor)
            on[flavor] = {r: a for r, a in amounts.items() if r.endswith(suffix)}
        return self.holds.add(record.key, (record.quota, *record.also), on, record.flavor)

    def _cannot_fit_on(
        self,
        name: str,
        node: TreeNode,
        path: list[TreeNode],
        record: PodRecord,
        charged: Mapping[str, int],
        *,
        waits: str | None,
    ) -> bool:
        """True when, were the pending pod charged `charged` (its demand moved to that
        flavor in every tree), it could neither be admitted there nor wait there
        (`waits`: the wait flavor found so far), by `flavor_fit.judge`'s bound: then its
        demand need not move there to look."""
        self.tree_of(name).node(name)  # runtimes settled
        held = None if record.preemptible else self._quota_pods[name].non_preemptible_used
        verdict = flavor_fit.judge(node, path, held, charged, record.request)
        if verdict is flavor_fit.Verdict.QUOTA_SHORT:
            return True  # neither admitted nor waiting there
        if verdict is flavor_fit.Verdict.ANCESTOR_SHORT and waits is not None:
            return True  # not admitted there, and it already has a wait flavor
        if waits is None:
            return False  # it may be the wait flavor: only the exact numbers say
        for other in record.also:
            tree = self.tree_of(other)
            other_node = tree.node(other)
            if other_node is None or not other_node.is_quota:
                return True
            held = None if record.preemptible else self._quota_pods[other].non_preemptible_used
            verdict = flavor_fit.judge(
                other_node, tree.path_up(other_node), held, charged, record.request
            )
            if verdict is not flavor_fit.Verdict.MAY_FIT:
                return True  # not admitted there (another tree), and it waits elsewhere
        return False

    def _place_on_flavor(
        self,
        name: str,
        node: TreeNode,
        path: list[TreeNode],
        record: PodRecord,
        out: Decisions,
        *,
        placed: dict[object, str],
    ) -> Placed:
        """Charge a pending pod to the first allowed flavor where it fits now (docs/design.md).

        A pod's demand counts on one flavor at a time, and runtime follows demand, so
        each flavor is tried with the demand moved there. When none fits now, the pod
        waits on the first allowed flavor where it fits its quota's runtime (only an
        ancestor's lent quota stands in the way, which reclaim returns), else on the
        first allowed flavor (where in-quota preemption may make room). `Placed.FITS`: it
        fits there now, in every tree (the decider admits it without checking again);
        `Placed.NOWHERE`: no flavor allows it; it waits, and says so.
        """
        config = node.config
        assert config is not None
        placing = self._placing(record, config)
        allowed, same = placing.allowed, placing.likeness
        if not allowed:
            listed = ", ".join(config.flavors)
            missing = [f for f in config.flavors if f not in self.flavors]
            detail = f" ({', '.join(missing)} not defined yet)" if missing else ""
            self._set_reason(
                record,
                f"waiting: none of ElasticQuota {name}'s flavors ({listed}){detail} "
                "is allowed by the pod's nodeSelector or node affinity",
                out,
            )
            return Placed.NOWHERE
        pods = self._quota_pods[name]
        here = Seat(node, path, pods)
        earlier = placed.get(same)
        if earlier is not None:
            # A pod like this one found no flavor that fits now, and nothing was admitted or
            # evicted since. The flavors other than its wait flavor have only lost demand
            # since then (runtime never grows when demand shrinks): this pod cannot fit there
            # either. On the wait flavor it may (its own demand adds runtime): the decider's
            # usual checks say, on that flavor.
            self._charge_to(record, earlier)
            self.tree_of(name).node(name)  # runtimes settled (a hold may have moved)
            return Placed.WAITS
        wait: str | None = None
        for flavor in allowed:
            if flavor != record.flavor:
                # Moving demand costs a settle: skip flavors where the pod cannot fit now
                # (runtime never exceeds cap, the root's is the capacity), unless the flavor
                # may still be the one it waits on.
                charged = self._charge_on(record, config, flavor)
                if self.options.bound_flavors:
                    if self._cannot_fit_on(name, node, path, record, charged, waits=wait):
                        continue
                else:
                    if not admission.may_fit(node, [], charged):
                        continue
                    if wait is not None and not admission.may_fit(node, path, charged):
                        continue
            self._charge_to(record, flavor)
            self.tree_of(name).node(name)  # runtimes follow the moved demand
            verdict = self._check(record, name, here)
            if verdict.fits:
                return Placed.FITS
            # Short at its own quota, or at another tree's (try the next flavor); short only
            # at an ancestor of its own: it may wait here (reclaim makes room).
            if wait is None and verdict.quota == name and verdict.short is Short.ANCESTOR:
                wait = flavor
        placed[same] = wait or allowed[0]
        self._charge_to(record, placed[same])
        self.tree_of(name).node(name)
        return Placed.WAITS
