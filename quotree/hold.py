"""Pending pods hold their quota's guarantee on the other flavors they may use.

Why a module of its own: a pending pod's request counts on one flavor at a time (its
wait flavor, `placement.Placement.place`), and runtime follows demand. Without
more, the guarantee a quota has on its other flavors is lent to hungry siblings while
its pods wait on one; when a pod of the quota can run on another, it moves there,
takes the GPU back, and the sibling is reclaimed 30 s later: pods admitted only to be
evicted (bench/history/2026-11-21-to-24.md, "Engine with 2 resource flavors"). Without flavors that
cannot happen: a pending pod's request counts in its quota's demand whatever holds it
back. This module adds, for each quota Q and flavored resource `r` = `<resource>@<f>`,
a hold to Q's raw request on `r`:

    hold = min(P, max(0, min_Q(r) - charged))

- `charged`: what Q's pods are charged on `r` (admitted, and pending pods waiting on f);
- `P`: what Q's pending pods that may use f (`flavors.allowed_flavors`) but wait on
  another flavor would take on `r`.

So the hold never takes Q above its own min on a flavor that is not the pod's wait
flavor, and while its pods wait, Q lends none of the guarantee they could use: as
without flavors, nothing is lent to be taken back. The cost: an idle quota whose
guarantee is lent on two flavors and that gets pending pods reclaims on both (reclaim
cannot tell held demand from requested demand), up to one pod per held GPU more than
its pods need. Narrower rules (only the pods their own quota holds back; only what the
quota freed while its pods waited) removed that cost but not the churn, and were
dropped (bench/history/ keeps their figures). With `EngineOptions.holds` off nothing
is held (the rule without this module), for comparisons. The tree keeps the hold
(`QuotaTree.set_held`, `QuotaTree.held`) beside its pods' request (`QuotaTree.pod_request`),
the two inputs of the quota's raw request, so a full recomputation gives the same runtimes
and `status.request` shows it. Every tree that
charges the pod holds (its quotas there, `PodRecord.also`). docs/design/flavors.md, "Pending
pods hold their quota's guarantee on their other flavors".

The engine feeds it: a pending pod placed (`add`), moved to another flavor (`moved`),
admitted or gone (`remove`), any change of what a quota is charged (`changed`: a hold
never takes demand above the min), a quota's min changed (`sync`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from quotree.quantity import add_amounts
from quotree.runtime import QuotaTree

__all__ = ["Holds"]


@dataclass(slots=True)
class _Pending:
    quotas: tuple[str, ...]  # every quota that charges it, in every tree
    on: dict[str, dict[str, int]]  # allowed flavor -> its request there (flavored names)
    flavor: str  # the flavor it is charged to now (its wait flavor)


class Holds:
    """The holds of every quota, kept current as pending pods come, move and go."""

    def __init__(self, tree_of: Callable[[str], QuotaTree], *, enabled: bool = True) -> None:
        self._tree_of = tree_of
        #: False: pending pods hold nothing (they count on their wait flavor only).
        self.enabled = enabled
        self._pods: dict[str, _Pending] = {}
        # quota -> flavored resource -> amount
        self._waiting: dict[str, dict[str, int]] = {}  # P: pending pods charged elsewhere
        self._allowed: dict[str, dict[str, int]] = {}  # pending pods that may use it at all

    def held(self, quota: str) -> Mapping[str, int]:
        """The quota's hold per flavored resource (`QuotaTree.held`, the tree keeps it)."""
        return self._tree_of(quota).held(quota)

    def add(
        self, key: str, quotas: tuple[str, ...], on: dict[str, dict[str, int]], flavor: str
    ) -> bool:
        """A pending pod charged to `flavor`, which may use the flavors of `on`. True when
        it is counted: its quotas' holds are then synced on all those flavors (as `changed`)."""
        if not self.enabled or len(on) < 2:
            return False  # one allowed flavor: nothing waits elsewhere
        pending = _Pending(quotas, on, flavor)
        self._pods[key] = pending
        self._count(pending, 1)
        return True

    def remove(self, key: str) -> bool:
        """The pod is no longer pending (admitted or gone). True when it held: then its
        quotas' holds are synced on every flavor it could use (its own charge included)."""
        pending = self._pods.pop(key, None)
        if pending is None:
            return False
        self._count(pending, -1)
        return True

    def moved(self, key: str, flavor: str) -> bool:
        """The pending pod is charged to `flavor` now (call after its request moved). True
        when it holds: its quotas' holds are then synced on both flavors (as `changed`)."""
        pending = self._pods.get(key)
        if pending is None or pending.flavor == flavor:
            return False
        old = pending.flavor
        for quota in pending.quotas:
            waiting = self._waiting.setdefault(quota, {})
            add_amounts(waiting, pending.on.get(old, {}), 1)
            add_amounts(waiting, pending.on.get(flavor, {}), -1)
        pending.flavor = flavor
        self._sync(pending.quotas, (*pending.on.get(old, ()), *pending.on.get(flavor, ())))
        return True

    def changed(self, quotas: Iterable[str], resources: Iterable[str]) -> None:
        """What `quotas` are charged on `resources` changed (a pod came, left or moved): the
        holds there follow (a hold never takes a quota's demand above its min)."""
        if not self.enabled:
            return
        for quota in quotas:
            allowed = self._allowed.get(quota)
            if allowed:
                self.sync(quota, [r for r in resources if r in allowed])

    def sync(self, quota: str, resources: Iterable[str] | None = None) -> None:
        """Bring the quota's holds up to date (resources None: every one it holds or may)."""
        tree = self._tree_of(quota)
        held = tree.held(quota)
        if resources is None:
            resources = set(held) | set(self._allowed.get(quota, ()))
        config = tree.config(quota)
        mins: Mapping[str, int] = config.min if config is not None and config.is_leaf else {}
        charged = tree.pod_request(quota)
        waiting = self._waiting.get(quota, _NONE)
        for resource in resources:
            wanted = waiting.get(resource, 0)
            want = 0
            if wanted > 0:
                room = mins.get(resource, 0) - charged.get(resource, 0)
                want = wanted if wanted < room else max(room, 0)
            if want != held.get(resource, 0):
                tree.set_held(quota, resource, want)

    def _count(self, pending: _Pending, sign: int) -> None:
        resources: list[str] = []
        for flavor, amounts in pending.on.items():
            resources.extend(amounts)
            waits = flavor != pending.flavor
            for quota in pending.quotas:
                allowed = self._allowed.get(quota)
                if allowed is None:
                    allowed = self._allowed[quota] = {}
                _add(allowed, amounts, sign)
                if waits:
                    waiting = self._waiting.get(quota)
                    if waiting is None:
                        waiting = self._waiting[quota] = {}
                    _add(waiting, amounts, sign)
        self._sync(pending.quotas, resources)

    def _sync(self, quotas: tuple[str, ...], resources: Iterable[str]) -> None:
        resources = tuple(resources)
        for quota in quotas:
            self.sync(quota, resources)


_NONE: Mapping[str, int] = {}


def _add(into: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
    """`quantity.add_amounts` for the few flavored resources of one pod, zeros dropped."""
    for resource, amount in amounts.items():
        total = into.get(resource, 0) + sign * amount
        if total:
            into[resource] = total
        else:
            into.pop(resource, None)
