"""When a Cohort's subtree may be left unevaluated while its share only shrinks.

Why a module of its own: the rule is the subtle part of the lazy runtime
(`DeferredSubtrees` in `deferred_subtrees.py` keeps the bookkeeping). When a
Cohort's runtime goes down and nothing below it changed, the runtimes below it
can be left as they were, as long as nobody reads them and the decider would
do nothing with them: no quota's runtime or guarantee goes up (no pending pod
can start to fit, no reason changes) and no quota goes over its runtime
(nothing to reclaim). Neither is true of the integer rule in general (largest
remainders are not monotone: the Alabama paradox, and the water-filling rounds
restart by name), so a subtree is deferred only while every parent in it stays
in a regime where its distribution is monotone in its total:

- roomy (total >= the children's targets): every child gets its target;
- no leftover (total <= the sum of the bases): every child gets its base;
- one round (the hungry children have one weight, and no share reaches a
  need): shares are dealt out one unit at a time by name, which only takes
  units back as the total goes down;
- two rounds (one weight; the same children are met in the first round and
  nobody in the second): the units they return are dealt once among the
  others, by name, and both deals only shrink as the total goes down;
- at most one hungry child: it gets min(need, leftover).

In each of these, and from roomy to any of them, every child's runtime goes
down by at most what its parent's went down. `subtree_slack` is how far the
Cohort's runtime may fall from its present value before some parent below it
could leave these regimes or some quota could go over its runtime; 0 means it
cannot be deferred. Guarantees must not be scaled anywhere below (the mins
add up to no more than the parent's guarantee), so they do not move.
"""

from __future__ import annotations

from quotree.accounts import TreeMember

__all__ = ["UNBOUNDED", "child_sums", "member_margin", "quota_margin"]

#: A margin that no fall in runtime can use up.
UNBOUNDED = 1 << 126


def child_sums(member: TreeMember, resource: str) -> tuple[int, int, int, bool, tuple[int, ...]]:
    """What `member_margin` reads of the parent `member`'s children in `resource`: the sum of
    their bases (min(demand, min)), how many are hungry (a need above the base and a
    weight), the largest total below which the regime is one of the monotone ones whatever
    the rounds do (`top_good`: the bases plus, with one weight, every hungry child's share
    of the least need), whether the hungry children share one weight, and the hungry
    children's needs in name order (`_two_round_margin` deals by them). They depend on
    the children's demands (their mins and weights are fixed until a rebuild makes new
    members), so `TreeMember.margin_sums` keeps them until one of those moves."""
    sum_b = 0
    hungry = 0
    least_need = UNBOUNDED
    weight: int | None = None
    one_weight = True
    needs: list[int] = []
    for child in member.children_in[resource]:
        demand = child.demand[resource]
        low = child.min[resource]
        base = demand if demand < low else low
        sum_b += base
        need = demand - base
        w = child.weight[resource]
        if need > 0 and w > 0:
            hungry += 1
            needs.append(need)
            least_need = min(least_need, need)
            if weight is None:
                weight = w
            elif w != weight:
                one_weight = False
    top_good = sum_b + hungry * least_need if one_weight else sum_b
    return sum_b, hungry, top_good, one_weight, tuple(needs)


def member_margin(member: TreeMember, resource: str) -> int:
    """How far the parent `member`'s runtime in `resource` may fall, its children fixed,
    while its distribution stays monotone (see the module's docstring); 0: not at all."""
    if member.sum_min[resource] > member.guarantee[resource]:
        return 0  # the mins may be scaled: guarantees would move with the total
    sums = member.margin_sums.get(resource)
    if sums is None:
        sums = member.margin_sums[resource] = child_sums(member, resource)
    sum_b, hungry, top_good, one_weight, needs = sums
    if hungry <= 1:
        return UNBOUNDED
    sum_target = member.sum_target[resource]
    if top_good >= sum_target - 1:
        return UNBOUNDED  # no total below the targets leaves the monotone regimes
    total = member.runtime[resource]
    if total >= sum_target:
        return total - sum_target  # it may fall while it stays roomy
    if total <= top_good:
        return UNBOUNDED  # it only goes further down into the same regimes
    if not one_weight:
        return 0
    return _two_round_margin(needs, total - sum_b)


def _two_round_margin(needs: tuple[int, ...], leftover: int) -> int:
    """Equal weights, some needs met in the first round: how far the leftover may fall while
    the same children are met in the first round and nobody is met in the second (the
    returned units are dealt once, by name). Then each share only goes down with it.
    `needs`: the hungry children's, in name order (`children_in`'s: the order of ties)."""
    hungry = len(needs)
    share, extra = divmod(leftover, hungry)
    returned = 0
    met_need = 0  # the largest need met in the first round
    rooms: list[int] = []  # what the others still need, in name order
    for rank, need in enumerate(needs):
        got = share + 1 if rank < extra else share
        if got >= need:
            returned += got - need
            met_need = max(met_need, need)
        else:
            rooms.append(need - got)
    if not rooms:
        return 0
    again, more = divmod(returned, len(rooms))
    for i, room in enumerate(rooms):
        if again + (1 if i < more else 0) > room:
            return 0  # a third round
    # Every child met in the first round stays met while leftover // hungry >= its need.
    return max(leftover - hungry * met_need, 0)


def quota_margin(member: TreeMember, resource: str) -> int:
    """How far the quota's runtime in `resource` may fall before it is over its runtime."""
    used = member.used[resource]
    demand = member.demand[resource]
    low = member.min[resource]
    if used <= (demand if demand < low else low):
        return UNBOUNDED  # runtime never falls below min(demand, min) without scaling
    return max(member.runtime[resource] - used, 0)
