"""Why a waiting pod waits: the Pending reasons, with numbers, from the admission check.

Why a module of its own: the words users read (the `Pending` events, `kubectl quotree
why`) are built from the admission check's verdict (`fit.check`) and, for a pod that
waits for lent quota, from who holds it and when it comes back. This part keeps what
those words need from one round of decisions (the lenders below each full ancestor,
the quotas whose pods wait for an ancestor) and writes a reason only when its numbers
changed. The words themselves are `admission`'s.
"""

from __future__ import annotations

from collections.abc import Mapping

from quotree import admission
from quotree.accounts import TreeMember
from quotree.decisions import Decisions
from quotree.fit import Fit, Rule
from quotree.planner import EvictionPlanner
from quotree.pods import PodRecord, QuotaPods
from quotree.reclaim import Refusal
from quotree.runtime import QuotaTree
from quotree.trees import Forest

__all__ = ["Reasons"]


class Reasons:
    """The Pending reasons of one engine (see module docstring)."""

    def __init__(
        self,
        forest: Forest,
        quota_pods: Mapping[str, QuotaPods],
        planner: EvictionPlanner,
    ) -> None:
        self._forest = forest
        self._quota_pods = quota_pods
        self._planner = planner  # the reclaim clock: since when, and the delay
        #: Quotas with pods that wait for lent quota (at an ancestor, in any tree).
        self.waiting_on_ancestor: set[str] = set()
        self._lenders: dict[TreeMember, list[admission.Lender]] = {}  # per ancestor, this round
        self.now = 0.0

    def new_round(self, now: float) -> None:
        """A round of decisions starts at `now`: who lends what is looked at afresh."""
        self.now = now
        self._lenders = {}

    def lenders_changed(self) -> None:
        """A reclaim asked for evictions: the lenders are looked at afresh."""
        self._lenders = {}

    def set(self, record: PodRecord, reason: str, out: Decisions, *, key: object = None) -> None:
        """The pod's reason is `reason` now (`key`: the numbers it was built from, None when
        it is not to be kept); it is reported only when its words changed."""
        record.reason_key = key
        if record.reason != reason:
            record.reason = reason
            out.pending[record.key] = reason

    def why(
        self,
        name: str,
        member: TreeMember,
        record: PodRecord,
        short: Mapping[str, int],
        out: Decisions,
        *,
        non_preemptible: bool = False,
    ) -> None:
        """Why the pod does not fit; the message is built only when its numbers change."""
        key = admission.reason_key(member, short, non_preemptible=non_preemptible)
        if record.reason_key == key:
            return
        pods = self._quota_pods[name]
        reason = admission.why_not(
            name,
            member,
            pods,
            record,
            short,
            non_preemptible=non_preemptible,
            tree=self._forest.label(member) if self._forest.several else None,
        )
        self.set(record, reason, out, key=key)

    def explain(
        self,
        name: str,
        member: TreeMember,
        record: PodRecord,
        verdict: Fit,
        out: Decisions,
        *,
        refusal: Refusal | None = None,
    ) -> None:
        """Say why a pending pod of quota `name` waits, from the admission check's verdict
        (and, when reclaiming lent quota for it would not pay, why: `refusal`)."""
        short, amounts = verdict.broken, verdict.amounts
        if refusal is not None and verdict.member is not None:
            self.waiting_on_ancestor.add(name)
            tree = self._forest.tree_of(verdict.quota)
            label = self._forest.label(verdict.member) if self._forest.several else None
            shortfall = admission.ancestor_text(
                verdict.member, record.request_in(verdict.quota), amounts, tree=label
            )
            self.set(record, f"{shortfall}; {refusal.words()}", out)
            return
        if verdict.quota == name:
            if short is Rule.ANCESTOR:
                assert verdict.member is not None
                self.waits_for_ancestor(
                    name, member, verdict.member, record, short=amounts, out=out
                )
            else:
                self.why(
                    name,
                    member,
                    record,
                    amounts,
                    out,
                    non_preemptible=short is Rule.NON_PREEMPTIBLE,
                )
            return
        # Its quota in another tree (docs/reference/objects.md, "Several trees").
        other = verdict.quota
        tree = self._forest.tree_of(other)
        if short is Rule.MISSING or verdict.member is None:
            problem = tree.problems.get(other)
            why = problem.message if problem else f"ElasticQuota {other} does not exist"
            self.set(record, f"waiting: {why}", out)
            return
        label = self._forest.label(verdict.member)
        if short is Rule.ANCESTOR:
            self.waiting_on_ancestor.add(name)
            lenders = self.lent(verdict.member, amounts, tree, self._left(name, record))
            request = record.request_in(other)
            reason = admission.why_waits(verdict.member, request, amounts, lenders, tree=label)
        else:
            reason = admission.why_not(
                other,
                verdict.member,
                self._quota_pods[other],
                record,
                amounts,
                non_preemptible=short is Rule.NON_PREEMPTIBLE,
                tree=label,
            )
        self.set(record, reason, out)

    def for_victims(
        self, name: str, member: TreeMember, record: PodRecord, verdict: Fit, out: Decisions
    ) -> None:
        """The pod waits for the pods evicted for it to go: for lent quota (the reason says
        "being evicted") or for preempted pods."""
        if verdict.broken is Rule.ANCESTOR:
            self.explain(name, member, record, verdict, out)
        else:
            self.set(record, admission.waiting_for_victims(record), out)

    def waits_for_ancestor(
        self,
        name: str,
        member: TreeMember,
        ancestor: TreeMember,
        record: PodRecord,
        *,
        short: Mapping[str, int],
        out: Decisions,
    ) -> None:
        """The pod fits its quota, but an ancestor (or the cluster) still holds lent quota.

        It waits, with a reason that names the ancestor, the quotas that hold
        more than their runtime below it and when they are reclaimed.
        """
        self.waiting_on_ancestor.add(name)
        tree = self._forest.tree_of(name)
        lenders = self.lent(ancestor, short, tree, self._left(name, record))
        key = (
            "ancestor",
            id(tree),
            ancestor.name,
            tuple((r, short[r], ancestor.used[r], ancestor.runtime[r]) for r in short),
            tuple(
                (x.quota, x.resource, x.amount, -1 if x.seconds is None else x.seconds > 0)
                for x in lenders
            ),
        )
        if record.reason_key != key:
            reason = admission.why_waits(
                ancestor,
                record.request,
                short,
                lenders,
                tree=self._forest.label(member) if self._forest.several else None,
            )
            self.set(record, reason, out, key=key)

    def _left(self, name: str, record: PodRecord) -> float:
        """Seconds until the pod's reclaim delay passes (its clock, `EvictionPlanner.waiting`)."""
        return self._planner.seconds_left(name, record.key, self.now)

    def _over(
        self, ancestor: TreeMember, tree: QuotaTree, *, fresh: bool = False
    ) -> list[admission.Lender]:
        """What every quota below `ancestor` holds above its runtime, per resource: the
        part its pods being evicted give back (seconds None), then the rest (seconds 0.0);
        kept for the round unless `fresh`."""
        lenders = None if fresh else self._lenders.get(ancestor)
        if lenders is None:
            lenders = []
            tree.refresh()
            for quota in tree.over_below(ancestor):
                pods = self._quota_pods.get(quota.name)
                evicting = pods.evicting if pods else {}
                for resource in quota.resources:
                    excess = quota.used[resource] - quota.runtime[resource]
                    if excess <= 0:
                        continue
                    # What its pods being evicted give back first, then the rest.
                    going = min(excess, evicting.get(resource, 0))
                    if going:
                        lenders.append(admission.Lender(quota.name, resource, going, None))
                    if excess > going:
                        lenders.append(admission.Lender(quota.name, resource, excess - going, 0.0))
            if not fresh:
                self._lenders[ancestor] = lenders
        return lenders

    def holders(self, verdict: Fit, fresh: bool) -> list[tuple[TreeMember, QuotaPods]]:
        """The quotas above their runtime below the member where a unit is short (the
        verdict's), with their pods: where reclaim looks for victims (`EvictionPlanner`)."""
        assert verdict.member is not None
        tree = self._forest.tree_of(verdict.quota)
        names = dict.fromkeys(x.quota for x in self._over(verdict.member, tree, fresh=fresh))
        found = []
        for name in names:
            tree.refresh(name)
            member = tree.member(name)
            if member is not None:
                found.append((member, self._quota_pods[name]))
        return found

    def lent(
        self, ancestor: TreeMember, short: Mapping[str, int], tree: QuotaTree, seconds: float
    ) -> list[admission.Lender]:
        """What the quotas below `ancestor` hold above their runtime in `short`'s resources;
        `seconds`: until the waiting pod's reclaim delay passes."""
        out = []
        missing = dict(short)
        for lender in self._over(ancestor, tree):
            if missing.get(lender.resource, 0) > 0:
                amount = min(lender.amount, missing[lender.resource])
                missing[lender.resource] -= amount
                when = None if lender.seconds is None else seconds
                out.append(admission.Lender(lender.quota, lender.resource, amount, when))
        return out
