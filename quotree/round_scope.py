"""Which quotas a round of decisions looks at, beyond the ones that changed.

Why a module of its own: `decide.Decider.decide_round` looks at the quotas whose pods or
runtimes changed; two rules widen or narrow that set, and both are read-only questions
about the ledger and the tree: with several trees, the queues waiting behind a quota of
another tree (`waiting_behind`); with one tree, a quota that only lost room needs no look
(`only_shrank`, the `EngineOptions.skip_shrunk_quotas` shortcut), and neither does a quota
with no pending pod (`worth_a_look`).
"""

from __future__ import annotations

from quotree.ledger import Ledger
from quotree.reasons import Reasons
from quotree.runtime import QuotaTree

__all__ = ["looks_again", "only_shrank", "waiting_behind", "worth_a_look", "worth_looking_at"]


def waiting_behind(ledger: Ledger, names: set[str]) -> set[str]:
    """The quotas whose pending pods are also charged to one of `names` (in another
    tree): when that quota changes, they look at their pending pods again."""
    woken: set[str] = set()
    for name in names:
        pods = ledger.quota_pods.get(name)
        if pods is not None and pods.queued_in:
            woken.update(pods.queued_in)  # their `room` holds this quota's room too
    return woken


def looks_again(ledger: Ledger, name: str) -> bool:
    """Whether a round looks at quota `name` whenever its runtime moved, whichever way: it
    has pending pods that were not looked at since they last changed (`QuotaPods.room` is
    unset; `only_shrank` says no). The lazy tree defers no subtree holding such a quota
    (`QuotaTree.set_lazy` hands it this), or the decider would find it later than an
    eager tree's report sends it there, and rewrite its pods' reasons a round late."""
    pods = ledger.quota_pods.get(name)
    return pods is not None and bool(pods.pending) and pods.room is None


def only_shrank(
    tree: QuotaTree, ledger: Ledger, reasons: Reasons, name: str, *, ancestors: bool
) -> bool:
    """True when a round has nothing to do for quota `name`, whose runtime changed but
    whose room grew nowhere (neither its runtime or guarantee nor, when `ancestors`, any
    ancestor's room: `QuotaTree.grown_quotas`): its pending pods were looked at with at
    least this much room (`QuotaPods.room` is set), it waits for no ancestor, it was not
    over its runtime and is not now. `decide.Decider._decide_quota` would then change
    nothing. Without flavors (`ancestors` False) an ancestor's room holds back only a
    pod that waits on an ancestor, and such a quota is looked at anyway: the decider
    compares its ancestors' room only for those (`Decider._admit_pending`)."""
    if name in reasons.waiting_on_ancestor:
        return False
    pods = ledger.quota_pods.get(name)
    if pods is None:
        return True
    if pods.pending and pods.room is None:
        return False
    tree.refresh(name)
    member = tree.member(name)
    if member is None or not member.is_quota:
        return False
    grown = tree.grown_quotas
    if ancestors and any(ancestor.name in grown for ancestor in tree.path_up(member)):
        return False  # an ancestor's room may have grown: a waiting pod may fit now
    used, runtime = member.used, member.runtime
    return all(used[r] <= runtime[r] for r in member.resources)


def worth_a_look(
    tree: QuotaTree,
    ledger: Ledger,
    reasons: Reasons,
    name: str,
    touched: set[str],
    *,
    ancestors: bool,
) -> bool:
    """Whether a round with one tree must look at quota `name`, whose runtime or guarantee
    changed. Not when it has no pending pod and none of its pods changed (`touched`):
    there is nothing to admit, and reclaim is driven by a waiting pod, in the quota that
    waits; nor when it only lost room (`only_shrank`). O(1) for a quota without pending
    pods, however many quotas a Cohort's new total moved."""
    if name in touched:
        return True
    pods = ledger.quota_pods.get(name)
    if pods is not None and not pods.pending and name not in reasons.waiting_on_ancestor:
        return False
    return name in tree.grown_quotas or not only_shrank(
        tree, ledger, reasons, name, ancestors=ancestors
    )


def worth_looking_at(
    tree: QuotaTree,
    ledger: Ledger,
    reasons: Reasons,
    changed: set[str],
    touched: set[str],
    *,
    flavors: bool,
) -> set[str]:
    """The quotas of `changed` that a round with one tree looks at (`worth_a_look`); an
    ancestor's room counts only with flavors, as `decide.Decider._admit_pending` compares
    it."""
    return {
        n for n in changed if worth_a_look(tree, ledger, reasons, n, touched, ancestors=flavors)
    }
