"""The eviction planner: which admitted pods to evict for a waiting unit, and asking for it.

Why a module of its own: two decisions of docs/semantics.md evict pods, both for one waiting
unit and only when it then fits: in-quota preemption (the fewest lower-priority pods of
the quota where it is short, in any tree) and reclaim (once the unit has waited for lent
quota longer than the reclaim delay, the fewest pods of quotas above their runtime below
the member where it is short, when taking them pays: `reclaim.py`). This part keeps each
waiting unit's reclaim clock, plans the victims step by step until the admission check
(`fit.check`) says the unit then fits in every tree, words the events and asks for the
evictions (the pods' resources count as on their way back until the cluster, or the
simulator, takes them away); the decision loop calls it. A unit is a pod today (its key,
request, quota, priority, preemptibility); a pod group plugs in with the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from quotree.accounts import TreeMember
from quotree.claims import ClaimBook
from quotree.decisions import Decisions
from quotree.eviction import Eviction, over_runtime, preemption_victims, reclaim_reason
from quotree.fit import Fit, Rule
from quotree.ledger import Ledger
from quotree.plans import Clock, Flavors, Plan, Step
from quotree.pods import Claimant, PodRecord, QuotaPods
from quotree.reclaim import Refusal, reclaim_choice, trial, within_guarantee
from quotree.runtime import QuotaTree
from quotree.trees import Forest

if TYPE_CHECKING:
    from quotree.group_ledger import GroupLedger

__all__ = ["Clock", "EvictionPlanner", "Flavors", "Lenders", "Plan"]

#: The quotas above their runtime below the member where a unit is short (the verdict's),
#: with their pods; True: as they are now, not as the round found them.
Lenders = Callable[[Fit, bool], Iterable[tuple[TreeMember, QuotaPods]]]


@dataclass(frozen=True)
class _Asked:
    """What `EvictionPlanner.plan` was given for one unit, passed on as one to its steps."""

    check: Callable[[], list[Fit]]
    lenders: Lenders
    clock: Callable[[], Clock]
    lowest: dict[str, int]
    now: float
    out: Decisions


#: How many steps (a preemption or a reclaim, in one tree) a plan takes at most: a unit
#: short in several trees needs one or two per tree.
PLAN_STEPS = 8


class EvictionPlanner(ClaimBook):
    """The evictions of one engine (see module docstring)."""

    def __init__(self, ledger: Ledger, forest: Forest, reclaim_delay: float) -> None:
        super().__init__(ledger, forest)
        self.reclaim_delay = reclaim_delay
        #: The pod groups (the engine sets it): victims are chosen with groups whole.
        self.book: GroupLedger | None = None
        #: quota -> unit key -> its reclaim clock, for the units waiting for lent quota
        self.waiting: dict[str, dict[str, Clock]] = {}
        #: What planning came to for units alike (`plan`), while nothing is admitted or
        #: evicted and the round goes on.
        self._memo: dict[tuple[object, ...], Plan] = {}

    def forget_plans(self) -> None:
        self._memo.clear()

    # ------------------------------------------------------------ the reclaim clock

    def waits(self, quota: str, key: str, now: float, seen: dict[str, Clock]) -> Clock:
        """Unit `key` of `quota` waits for lent quota (seen in this scan of its queue)."""
        clock = seen.get(key) or self.waiting.get(quota, {}).get(key)
        if clock is None:
            clock = Clock(now)
        seen[key] = clock
        return clock

    def seconds_left(self, quota: str, key: str, now: float) -> float:
        """Until the unit's reclaim delay passes (0 or less: it has)."""
        clock = self.waiting.get(quota, {}).get(key)
        since = now if clock is None else clock.since
        return since + self.reclaim_delay - now

    def keep_clocks(self, quota: str, clocks: dict[str, Clock]) -> None:
        """The clocks of the units of `quota` that still wait for lent quota, after a scan of
        its queue (the others' clocks stop, but for the units whose victims are going)."""
        for key, clock in self.waiting.get(quota, {}).items():
            if key not in clocks and self.claims.get(key) == quota:
                clocks[key] = clock
        if clocks:
            self.waiting[quota] = clocks
        else:
            self.waiting.pop(quota, None)

    def overdue(self, quota: str, now: float) -> float:
        """How long the longest-waiting unit of `quota` has waited for lent quota past its
        reclaim delay (0: none has): reclaim would not pay for it, or its evictions do
        not happen (the metric `quotree_reclaim_overdue_seconds`)."""
        clocks = self.waiting.get(quota)
        if not clocks:
            return 0.0
        return max(0.0, now - min(c.since for c in clocks.values()) - self.reclaim_delay)

    def due(self, quota: str, now: float) -> bool:
        """A unit of `quota` has waited past its delay and was not planned for since, or
        waited behind evictions for another unit (`room_held`), or counted on evictions
        of which one is over (`Clock.behind`)."""
        if quota in self.held:
            self.held.discard(quota)
            return True
        clocks = self.waiting.get(quota, {}).values()
        # Every clock is asked: each forgets the pods it counted on once one is gone.
        due = [c.due(now, self.reclaim_delay, self.ledger.evicting) for c in clocks]
        return any(due)

    # ------------------------------------------------------------ planning

    def plan(
        self,
        record: Claimant,
        verdict: Fit,
        *,
        check: Callable[[], list[Fit]],
        lenders: Lenders,
        clock: Callable[[], Clock],
        lowest: dict[str, int],
        now: float,
        out: Decisions,
        flavors: Flavors | None = None,
    ) -> Plan:
        """Plan evictions for a pending unit that does not fit (`verdict`), and ask for them
        when it then fits (`check`: where the admission check finds it short, in each tree
        that charges it; empty when it fits everywhere): in-quota
        preemption where it is short at a quota, reclaim where an ancestor holds lent quota
        and its clock has passed the delay. `lenders(verdict)`: the quotas above their
        runtime below the member short. `lowest` keeps, per quota, the lowest priority of
        its possible victims for one scan; `clock()`: the unit's reclaim clock (started
        when first asked for). Units alike that came to no eviction are answered from
        `_memo` until something is admitted or evicted, or the round ends. `flavors`: a pod's
        other flavors, where reclaim may take fewer pods (`_elsewhere`)."""
        key: tuple[object, ...] | None = None
        if not record.also:  # one tree: the verdict and the numbers below it say it all
            due = verdict.broken is Rule.ANCESTOR and clock().passed(now, self.reclaim_delay)
            key = (
                record.quota, verdict.quota, verdict.broken, tuple(verdict.amounts.items()),
                tuple(record.request.items()), record.facts.priority, record.preemptible, due,
                record.facts.never_preempts,
            )  # fmt: skip
            known = self._memo.get(key)
            if known is not None:
                return known
        asked = _Asked(check, lenders, clock, lowest, now, out)
        plan = self._plan(record, verdict, asked, ask=flavors is None or self.under_way())
        if plan.steps is not None:
            assert flavors is not None
            plan = self._elsewhere(record, plan, flavors, asked)
        if key is not None and not plan.evicted:
            self._memo[key] = plan
        if plan.counts_on and verdict.broken is Rule.ANCESTOR:
            clock().behind = plan.counts_on
        return plan

    def _elsewhere(self, record: Claimant, plan: Plan, flavors: Flavors, asked: _Asked) -> Plan:
        """`plan` (made without asking, on the pod's flavor) or, when it takes more than one
        pod or frees more than the pod needs, the plan on another flavor of the pod's where
        reclaim takes fewer pods (then frees less beyond the shortfall): the pod's demand
        moves there, and the evictions are asked for. Only where the pod is short of lent
        quota alone (in-quota preemption stays where placement put it)."""
        home, best, where = flavors.home, plan, flavors.home
        if plan.cost() > (1, 0):
            lenders = asked.lenders
            fresh = replace(asked, lenders=lambda verdict, _: lenders(verdict, True))
            for flavor in flavors.flavors:
                if flavor == home:
                    continue
                flavors.move(flavor)
                broken = asked.check()
                if not broken or any(v.broken is not Rule.ANCESTOR for v in broken):
                    continue
                there = self._plan(record, broken[0], fresh, ask=False)
                if there.steps and there.cost() < best.cost():
                    best, where = there, flavor
            flavors.move(where)
        assert best.steps is not None
        return self._ask(record, best.steps, best.verdict, asked.out)

    def _plan(self, record: Claimant, verdict: Fit, asked: _Asked, *, ask: bool = True) -> Plan:
        """The steps that let the unit in, asked for (or, `ask` False, returned in `steps`)."""
        check, lenders, clock, lowest, now, out = (
            asked.check, asked.lenders, asked.clock, asked.lowest, asked.now, asked.out
        )  # fmt: skip
        steps: list[Step] = []
        refusal = None
        with trial(self.forest) as taken:
            claimed: set[str] = set()
            if self.claims:
                for unit, victims in self._under_way(record.key):
                    taken.admit(unit, victims)
                    claimed.update(v.key for v in victims)
            # Evictions under way that no waiting unit counts on (the unit they were for was
            # admitted with other room meanwhile): their room is coming back all the same.
            orphans = self._orphans(claimed)
            taken.take(orphans)
            # As it will be once the evictions under way are done; with one tree and none
            # under way, the verdict is the whole answer.
            broken = check() if taken.victims or taken.moved or record.also else [verdict]
            for _ in range(PLAN_STEPS):
                if not broken:
                    break
                # Reclaim first where an ancestor holds lent quota (in any tree: its victims
                # free room in every tree that charges them), then in-quota preemption.
                verdict = next((v for v in broken if v.broken is Rule.ANCESTOR), broken[0])
                if verdict.broken is Rule.QUOTA:
                    victims = self._preemption(record, verdict, lowest, taken.keys)
                    reason = (
                        f"preempted by {record.key} (priority {record.facts.priority}) "
                        f"within ElasticQuota {verdict.quota}"
                    )
                    kind: Literal["Preempted", "Reclaimed"] = "Preempted"
                elif verdict.broken is Rule.ANCESTOR:
                    due = clock().passed(now, self.reclaim_delay)
                    if not due:
                        # Before the delay: only whether reclaim would pay (the reason says).
                        return self._dry_run(record, verdict, clock(), lenders, taken.keys)
                    fresh = bool(taken.victims)  # the lenders as they are in the trial
                    found = lenders(verdict, fresh)
                    victims, refusal = self._reclaim(record, verdict, found, taken.keys)
                    reason = f"for {record.key} (ElasticQuota {verdict.quota})"
                    kind = "Reclaimed"
                else:
                    victims = []
                if not victims:
                    return Plan(False, verdict, refusal)
                excess = sum(
                    sum(v.request_in(v.quota or "").get(r, 0) for v in victims) - amount
                    for r, amount in verdict.amounts.items()
                )
                steps.append(Step(kind, reason, victims, max(excess, 0)))
                taken.take(victims)
                broken = check()
            if broken:
                return Plan(False, broken[0])
        if not steps:
            # It fits once the evictions under way are done (those for other units, and
            # any whose unit was admitted meanwhile): nothing to ask, it waits for them.
            # Others may count on that room too: once one of these is gone, it plans again.
            counts_on = frozenset(claimed.union(o.key for o in orphans))
            return Plan(False, verdict, waits_for_evictions=bool(orphans), counts_on=counts_on)
        if not ask:
            return Plan(False, verdict, steps=steps)
        return self._ask(record, steps, verdict, out)

    def _ask(self, record: Claimant, steps: list[Step], verdict: Fit, out: Decisions) -> Plan:
        """Ask for the steps' evictions: the room their victims leave is the unit's."""
        events = [
            (victim, step.kind, self._event(step.kind, step.reason, victim))
            for step in steps
            for victim in step.victims
        ]
        for victim, kind, event in events:
            self.evict(victim, kind, event, out)
        record.victims = frozenset(v.key for step in steps for v in step.victims)
        assert record.quota is not None
        self.claims[record.key] = record.quota
        self._flight = None
        return Plan(True, verdict)

    def worth_planning(
        self,
        record: Claimant,
        verdict: Fit,
        lowest: dict[str, int],
        elsewhere: Callable[[], list[Fit]],
    ) -> bool:
        """Whether evictions may let the unit in (or are under way for it): it waits for
        lent quota, or is short at a quota that may preempt for it, or (several trees;
        `elsewhere`: its verdicts in the others) reclaim in another tree, taken first by
        `_plan`, may free that quota too. The common case is answered without a plan."""
        if verdict.broken is Rule.ANCESTOR:
            return True
        if verdict.broken is not Rule.QUOTA:
            return False
        if record.victims or self.under_way(record.key):
            return True
        if self._may_preempt(record, verdict, lowest):
            return True
        return bool(record.also) and any(v.broken is Rule.ANCESTOR for v in elsewhere())

    def _may_preempt(self, record: Claimant, verdict: Fit, lowest: dict[str, int]) -> bool:
        """The unit preempts (not `preemptionPolicy: Never`) lower-priority pods where short."""
        config = verdict.member.config if verdict.member is not None else None
        if config is None or not config.preempt_within_quota or record.facts.never_preempts:
            return False
        least = lowest.get(verdict.quota)
        if least is None:
            pods = self.ledger.quota_pods[verdict.quota]
            least = lowest[verdict.quota] = min(
                (
                    r.facts.priority
                    for r in pods.admitted.values()
                    if r.preemptible and not r.evicting
                ),
                default=record.facts.priority,
            )
        return least < record.facts.priority

    def _preemption(
        self, record: Claimant, verdict: Fit, lowest: dict[str, int], taken: set[str]
    ) -> list[PodRecord]:
        """In-quota preemption's victims at quota `verdict.quota` (in any tree that charges
        the unit): the fewest lower-priority preemptible pods of that quota that make room."""
        if not self._may_preempt(record, verdict, lowest):
            return []
        quota = verdict.quota
        pods = self.ledger.quota_pods[quota]
        # The pods being evicted are out of `used` already (the plan's `Trial`).
        victims = preemption_victims(
            pods, record, verdict.amounts, taken=taken, freed={}, book=self.book
        )
        if victims:
            del lowest[quota]  # victims are gone: look again for the next unit
        return victims

    def _reclaim(
        self,
        record: Claimant,
        verdict: Fit,
        lenders: Iterable[tuple[TreeMember, QuotaPods]],
        taken: set[str],
    ) -> tuple[list[PodRecord], Refusal | None]:
        tree, quota = self._settled(verdict.quota)
        assert quota is not None
        return reclaim_choice(
            tree, record, quota, verdict.amounts, lenders, taken=taken, book=self.book
        )

    def _settled(self, quota: str) -> tuple[QuotaTree, TreeMember | None]:
        """Quota `quota`'s tree and its member, runtimes brought up to date first."""
        tree = self.forest.tree_of(quota)
        tree.refresh(quota)
        return tree, tree.member(quota)

    def _dry_run(
        self, record: Claimant, verdict: Fit, clock: Clock, lenders: Lenders, taken: set[str]
    ) -> Plan:
        """Before its delay: whether reclaim would pay for the unit (the refusal, if not).
        Always when its quota stays within its guarantee; else the victims are chosen
        without evicting, once for each shortfall and use of the member short (`Clock.dry`)."""
        _, quota = self._settled(verdict.quota)
        if quota is None or within_guarantee(record, quota, verdict.amounts):
            return Plan(False, verdict)
        member = verdict.member
        key = (
            verdict.quota, tuple(verdict.amounts.items()),
            tuple(member.used.get(r, 0) for r in verdict.amounts) if member else (),
        )  # fmt: skip
        if clock.dry is None or clock.dry[0] != key:
            _, refusal = self._reclaim(record, verdict, lenders(verdict, False), taken)
            clock.dry = (key, refusal)
        return Plan(False, verdict, clock.dry[1])

    def _event(self, kind: str, reason: str, victim: PodRecord) -> str:
        if kind == "Preempted":
            return reason
        assert victim.quota is not None
        _, member = self._settled(victim.quota)
        pods = self.ledger.quota_pods[victim.quota]
        if member is None:
            return f"lent quota is reclaimed {reason}"
        over = over_runtime(member, pods) or {
            r: member.used[r] - member.runtime[r] for r in member.resources if r in victim.request
        }
        return f"{reclaim_reason(victim.quota, member, pods, over)} {reason}"

    def evict(
        self,
        record: PodRecord,
        kind: Literal["Preempted", "Reclaimed"],
        reason: str,
        out: Decisions,
    ) -> None:
        """Ask for the pod's eviction."""
        assert record.quota is not None
        out.evictions.append(Eviction(record.key, record.quota, kind, reason))
        out.quotas.add(record.quota)
        out.quotas.update(record.also)
        # Its resources count as on their way back until the pod is gone.
        self.ledger.set_evicting(record, True)
        self.forget_plans()
