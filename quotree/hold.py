"""Pending pods hold their quota's guarantee on the other flavors they may use.

Why a module of its own: a pending pod's request counts on one flavor at a time (its
wait flavor, `decide.Decider._place_on_flavor`), and runtime follows demand. Without
more, a GPU guarantee a quota frees on another flavor is lent at once to a hungry
sibling; the quota's own pending pod then moves there and takes it back, and the
sibling is reclaimed 30 s later: pods admitted only to be evicted (bench/RESULTS.md,
"Engine with 2 resource flavors"). This module adds, for each quota Q and flavored
resource `r` = `<resource>@<f>`, a hold to Q's raw request on `r`:

    hold = min(P, K, max(0, min_Q(r) - charged))

- `charged`: what Q's pods are charged on `r` (admitted, and pending pods waiting on f);
- `P`: what Q's pending pods that may use f (`flavors.allowed_flavors`) but wait on
  another flavor would take on `r`;
- `K` (kept): the guarantee Q freed on `r` (an admitted pod of Q there left) while
  such pending pods waited, never more than `min - used`; it is forgotten when no
  pending pod of Q may use f any more.

So the hold never takes Q above its own min on a flavor that is not the pod's wait
flavor, and it only keeps what Q frees: a guarantee already lent when the pods came is
reclaimed on the wait flavor only, not on every flavor at once (one eviction per
waiting pod, not one per flavor). `Mode.ALL` drops `K` (hold whatever the guarantee
leaves, lent or not); `Mode.OFF` holds nothing. The hold is part of the raw request
the tree keeps (`QuotaTree.add_request`), so a full recomputation gives the same
runtimes and `status.request` shows it. Every tree that charges the pod holds (its
quotas there, `PodRecord.also`). docs/design.md, "Pending pods keep what their quota
frees on their other flavors".

The engine feeds it: a pending pod placed (`add`), moved to another flavor (`moved`),
admitted or gone (`remove`), an admitted pod gone (`freed`), any change of what a quota
is charged (`changed`: a hold never takes demand above the min), a quota's min changed
(`sync`). Pods a flavor change charges again (`Engine._recharge`) free nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from quotree.quantity import add_amounts
from quotree.runtime import QuotaTree

__all__ = ["Holds", "Mode"]


class Mode(enum.Enum):
    OFF = "off"  # pending pods count on their wait flavor only
    FREED = "freed"  # they keep what their quota frees on their other flavors (default)
    ALL = "all"  # they hold their quota's whole unused guarantee on their other flavors


@dataclass(slots=True)
class _Pending:
    quotas: tuple[str, ...]  # every quota that charges it, in every tree
    on: dict[str, dict[str, int]]  # allowed flavor -> its request there (flavored names)
    flavor: str  # the flavor it is charged to now (its wait flavor)


class Holds:
    """The holds of every quota, kept current as pending pods come, move and go."""

    def __init__(self, tree_of: Callable[[str], QuotaTree], mode: Mode = Mode.FREED) -> None:
        self._tree_of = tree_of
        self.mode = mode
        self._pods: dict[str, _Pending] = {}
        # quota -> flavored resource -> amount
        self._waiting: dict[str, dict[str, int]] = {}  # P: pending pods charged elsewhere
        self._allowed: dict[str, dict[str, int]] = {}  # pending pods that may use it at all
        self._kept: dict[str, dict[str, int]] = {}  # K: freed while such pods waited
        self._held: dict[str, dict[str, int]] = {}  # the hold in the tree's raw request now
        #: Pods are forgotten and observed again (`Engine._recharge`): leaving is not freeing.
        self.replaying = False

    def held(self, quota: str) -> Mapping[str, int]:
        """The quota's hold per flavored resource (tests and benchmarks read it)."""
        return self._held.get(quota, {})

    def add(
        self, key: str, quotas: tuple[str, ...], on: dict[str, dict[str, int]], flavor: str
    ) -> None:
        """A pending pod charged to `flavor`, which may use the flavors of `on`."""
        if self.mode is Mode.OFF or len(on) < 2:
            return  # one allowed flavor: nothing waits elsewhere
        pending = _Pending(quotas, on, flavor)
        self._pods[key] = pending
        self._count(pending, 1)

    def remove(self, key: str) -> None:
        """The pod is no longer pending (admitted or gone)."""
        pending = self._pods.pop(key, None)
        if pending is not None:
            self._count(pending, -1)

    def moved(self, key: str, flavor: str) -> None:
        """The pending pod is charged to `flavor` now (call after its request moved)."""
        pending = self._pods.get(key)
        if pending is None or pending.flavor == flavor:
            return
        old = pending.flavor
        for quota in pending.quotas:
            waiting = self._waiting.setdefault(quota, {})
            add_amounts(waiting, pending.on.get(old, {}), 1)
            add_amounts(waiting, pending.on.get(flavor, {}), -1)
        pending.flavor = flavor
        self._sync(pending.quotas, (*pending.on.get(old, ()), *pending.on.get(flavor, ())))

    def freed(self, quotas: Iterable[str], charged: Mapping[str, int]) -> None:
        """An admitted pod charged `charged` left `quotas` (call after its request and use
        went): what it held there is kept for their pending pods that may use it."""
        if self.mode is Mode.OFF or self.replaying:
            return
        for quota in quotas:
            waiting = self._waiting.get(quota)
            if not waiting:
                continue
            kept = self._kept.setdefault(quota, {})
            resources = [r for r in charged if waiting.get(r, 0) > 0]
            for resource in resources:
                kept[resource] = kept.get(resource, 0) + charged[resource]
            if resources:
                self.sync(quota, resources)

    def changed(self, quotas: Iterable[str], resources: Iterable[str]) -> None:
        """What `quotas` are charged on `resources` changed (a pod came, left or moved): the
        holds there follow (a hold never takes a quota's demand above its min)."""
        if self.mode is Mode.OFF:
            return
        for quota in quotas:
            allowed = self._allowed.get(quota)
            if allowed:
                self.sync(quota, [r for r in resources if r in allowed])

    def sync(self, quota: str, resources: Iterable[str] | None = None) -> None:
        """Bring the quota's holds up to date (resources None: every one it holds or may)."""
        if resources is None:
            resources = (
                set(self._held.get(quota, ()))
                | set(self._allowed.get(quota, ()))
                | set(self._kept.get(quota, ()))
            )
        tree = self._tree_of(quota)
        config = tree.config(quota)
        mins: Mapping[str, int] = config.min if config is not None and config.is_leaf else {}
        request = tree.quota_request(quota)
        used = tree.quota_used(quota)
        held = self._held.setdefault(quota, {})
        waiting = self._waiting.get(quota, {})
        allowed = self._allowed.get(quota, {})
        kept = self._kept.get(quota, {})
        for resource in resources:
            now = held.get(resource, 0)
            floor = mins.get(resource, 0)
            want = min(waiting.get(resource, 0), max(0, floor - (request.get(resource, 0) - now)))
            if self.mode is Mode.FREED:
                if allowed.get(resource, 0) <= 0:
                    kept.pop(resource, None)  # no pending pod may use it: forget
                keep = min(kept.get(resource, 0), max(0, floor - used.get(resource, 0)))
                if keep > 0:
                    kept[resource] = keep
                else:
                    kept.pop(resource, None)
                want = min(want, keep)
            if want != now:
                tree.add_request(quota, {resource: want - now})
                if want:
                    held[resource] = want
                else:
                    del held[resource]

    def _count(self, pending: _Pending, sign: int) -> None:
        resources: list[str] = []
        for flavor, amounts in pending.on.items():
            resources.extend(amounts)
            for quota in pending.quotas:
                add_amounts(self._allowed.setdefault(quota, {}), amounts, sign)
                if flavor != pending.flavor:
                    add_amounts(self._waiting.setdefault(quota, {}), amounts, sign)
        self._sync(pending.quotas, resources)

    def _sync(self, quotas: tuple[str, ...], resources: Iterable[str]) -> None:
        resources = tuple(resources)
        for quota in quotas:
            self.sync(quota, resources)
