"""Flavor placement: which ResourceFlavor a waiting pod is charged to, and the look-ups behind it.

Why a module of its own: a quota may split a resource by flavor (`spec.flavors`); a pod
that asks for it is charged to one flavor at a time, and runtime follows demand, so
placing a pod means moving its demand from flavor to flavor and asking the admission
check (`fit.check`) on each. This part owns that: the per-pod look-ups (allowed flavors,
charge per flavor), moving a pending pod's demand, the hold a new pod takes on its other
flavors (`hold.py`), and the bound that spares a move (`flavor_fit.judge`). The decision
loop (`decide.Decider`) asks `place()` for a pending pod and acts on the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum

from quotree import admission, flavor_fit
from quotree.accounts import TreeMember
from quotree.fit import Fit, Rule, Seat
from quotree.flavor_spec import FlavorConfig
from quotree.flavors import allowed_flavors, charge
from quotree.hold import Holds
from quotree.models import MemberConfig
from quotree.options import EngineOptions
from quotree.plans import Flavors
from quotree.pods import Placing, PodRecord, QuotaPods
from quotree.runtime import QuotaTree

__all__ = ["Placed", "Placement"]


class Placed(Enum):
    """Where `Placement.place` left a pending pod."""

    NOWHERE = "nowhere"  # no flavor allows it (it waits, with that reason)
    WAITS = "waits"  # charged to the flavor it waits on: the usual checks say why
    FITS = "fits"  # charged to a flavor where it fits now, in every tree


#: The admission check of a pending pod of a quota, given the quota's seat.
Check = Callable[[PodRecord, str, Seat], Fit]


class Placement:
    """The engine's flavor placement (see module docstring)."""

    def __init__(
        self,
        tree_of: Callable[[str], QuotaTree],
        quota_pods: Mapping[str, QuotaPods],
        holds: Holds,
        options: EngineOptions,
    ) -> None:
        self._tree_of = tree_of
        self._quota_pods = quota_pods
        self._holds = holds
        self._options = options
        self.flavors: dict[str, FlavorConfig] = {}  # ResourceFlavors by name
        self.generation = 0  # one more whenever `flavors` changes

    def set_flavor(self, flavor: FlavorConfig) -> bool:
        """A ResourceFlavor added or changed; False when it is as it was."""
        if self.flavors.get(flavor.name) == flavor:
            return False
        self.flavors[flavor.name] = flavor
        self.generation += 1
        return True

    def remove_flavor(self, name: str) -> bool:
        """A ResourceFlavor gone; False when it was not there."""
        if self.flavors.pop(name, None) is None:
            return False
        self.generation += 1
        return True

    def charge_to(self, record: PodRecord, flavor: str) -> None:
        """Move a pending pod's request (its demand) to `flavor`."""
        if record.flavor == flavor:
            return
        assert record.quota is not None
        config = self._tree_of(record.quota).config(record.quota)
        assert config is not None
        # The pod's demand moves in every tree that charges it (docs/reference/objects.md,
        # "Several trees").
        charged_to = (record.quota, *record.also)
        before = record.request
        if record.also:
            before_in = {q: record.request_in(q) for q in record.also}
        record.flavor = flavor
        record.charged = self.charge_on(record, config, flavor)
        # Only what differs moves (the flavored resources): the rest, unchanged, would
        # climb down and up again and have every parent on the way redistribute it.
        delta = _delta(before, record.request)
        self._tree_of(record.quota).add_request(record.quota, delta)
        moved = [*before, *record.request]
        if record.also:
            self.charge_others(record)
            for quota in record.also:
                after = record.request_in(quota)
                self._tree_of(quota).add_request(quota, _delta(before_in[quota], after))
                moved.extend((*before_in[quota], *after))
        if not self._holds.moved(record.key, flavor):
            self._holds.changed(charged_to, moved)
        record.reason_key = None

    def charge_others(self, record: PodRecord) -> None:
        """What the pod, charged to its flavor in its first tree, is charged in its quotas of
        the other trees (`PodRecord.charged_in`): each in the names of its own tree, where a
        quota splits by flavor only what it names in its own `flavors`."""
        record.charged_in = None
        if record.flavor is None or not record.also:
            return
        flavor = self.flavors.get(record.flavor) or FlavorConfig(record.flavor)
        others: dict[str, dict[str, int]] = {}
        for quota in record.also:
            config = self._tree_of(quota).config(quota)
            if config is None:
                continue
            charged = charge(config, record.facts.request, flavor)
            if charged != record.charged:
                others[quota] = charged
        record.charged_in = others or None

    def reclaim_flavors(self, record: PodRecord, config: MemberConfig | None) -> Flavors | None:
        """A pod's flavors, for reclaim to take the one where it evicts least (None: one)."""
        if record.flavor is None or config is None:
            return None
        allowed = self.placing(record, config).allowed
        if len(allowed) < 2:
            return None

        def move(flavor: str) -> None:
            assert record.quota is not None
            self.charge_to(record, flavor)
            self._tree_of(record.quota).refresh()

        return Flavors(record.flavor, allowed, move)

    def placing(self, record: PodRecord, config: MemberConfig) -> Placing:
        """The pod's flavor look-ups under its quota's `config`: taken once, and again only
        when the configuration, the ResourceFlavors or the pod (`Engine.observe_pod`) change."""
        placing = record.placing
        if placing is None or placing.config is not config or placing.generation != self.generation:
            allowed = allowed_flavors(config, record.facts, self.flavors)
            likeness = (
                tuple(allowed),
                tuple(sorted(record.facts.request.items())),
                record.preemptible,
                record.also,  # with several trees, its quotas there decide too
            )
            placing = record.placing = Placing(config, self.generation, allowed, likeness)
        return placing

    def charge_on(self, record: PodRecord, config: MemberConfig, flavor: str) -> dict[str, int]:
        """What the pod is charged on `flavor` (`flavors.charge`), kept with its look-ups.
        Do not change the dict."""
        charges = self.placing(record, config).charges
        charged = charges.get(flavor)
        if charged is None:
            charged = charges[flavor] = charge(
                config, record.facts.request, self.flavors.get(flavor) or FlavorConfig(flavor)
            )
        return charged

    def hold_pending(self, record: PodRecord) -> bool:
        """A new pending pod charged to a flavor holds its quota's guarantee on the other
        flavors it may use (`hold.py`). True when it holds (its quotas' holds are synced)."""
        if record.flavor is None or record.quota is None or not self._holds.enabled:
            return False
        config = self._tree_of(record.quota).config(record.quota)
        if config is None:
            return False
        allowed = self.placing(record, config).allowed
        if len(allowed) < 2:
            return False
        on = {}
        for flavor in allowed:
            suffix = f"@{flavor}"
            amounts = self.charge_on(record, config, flavor)
            on[flavor] = {r: a for r, a in amounts.items() if r.endswith(suffix)}
        return self._holds.add(record.key, (record.quota, *record.also), on, record.flavor)

    def _cannot_fit_on(
        self,
        name: str,
        member: TreeMember,
        path: list[TreeMember],
        record: PodRecord,
        charged: Mapping[str, int],
        *,
        waits: str | None,
    ) -> bool:
        """True when, were the pending pod charged `charged` (its demand moved to that
        flavor in every tree), it could neither be admitted there nor wait there
        (`waits`: the wait flavor found so far), by `flavor_fit.judge`'s bound: then its
        demand need not move there to look."""
        self._tree_of(name).refresh()  # runtimes settled
        held = None if record.preemptible else self._quota_pods[name].non_preemptible_used
        verdict = flavor_fit.judge(member, path, held, charged, record.request)
        if verdict is flavor_fit.Bound.QUOTA_SHORT:
            return True  # neither admitted nor waiting there
        if verdict is flavor_fit.Bound.ANCESTOR_SHORT and waits is not None:
            return True  # not admitted there, and it already has a wait flavor
        if waits is None:
            return False  # it may be the wait flavor: only the exact numbers say
        for other in record.also:
            tree = self._tree_of(other)
            tree.refresh(other)
            other_member = tree.member(other)
            if other_member is None or not other_member.is_quota:
                return True
            held = None if record.preemptible else self._quota_pods[other].non_preemptible_used
            verdict = flavor_fit.judge(
                other_member, tree.path_up(other_member), held, charged, record.request
            )
            if verdict is not flavor_fit.Bound.MAY_FIT:
                return True  # not admitted there (another tree), and it waits elsewhere
        return False

    def place(
        self,
        name: str,
        member: TreeMember,
        path: list[TreeMember],
        record: PodRecord,
        check: Check,
        *,
        placed: dict[object, str],
    ) -> Placed:
        """Charge a pending pod to the first allowed flavor where it fits now
        (docs/design/flavors.md).

        A pod's demand counts on one flavor at a time, and runtime follows demand, so
        each flavor is tried with the demand moved there. When none fits now, the pod
        waits on the first allowed flavor where it fits its quota's runtime (only an
        ancestor's lent quota stands in the way, which reclaim returns), else on the
        first allowed flavor (where in-quota preemption may make room). `Placed.FITS`: it
        fits there now, in every tree (the decider admits it without checking again);
        `Placed.NOWHERE`: no flavor allows it (`nowhere` says why). `check` is the
        admission check; `placed` remembers, for one scan of a queue, where pods alike
        were left (cleared by the caller when anything is admitted or evicted).
        """
        config = member.config
        assert config is not None
        placing = self.placing(record, config)
        allowed, same = placing.allowed, placing.likeness
        if not allowed:
            return Placed.NOWHERE
        pods = self._quota_pods[name]
        here = Seat(member, path, pods)
        earlier = placed.get(same)
        if earlier is not None:
            # A pod like this one found no flavor that fits now, and nothing was admitted or
            # evicted since. The flavors other than its wait flavor have only lost demand
            # since then (runtime never grows when demand shrinks): this pod cannot fit there
            # either. On the wait flavor it may (its own demand adds runtime): the decider's
            # usual checks say, on that flavor.
            self.charge_to(record, earlier)
            self._tree_of(name).refresh()  # runtimes settled (a hold may have moved)
            return Placed.WAITS
        wait: str | None = None
        for flavor in allowed:
            if flavor != record.flavor:
                # Moving demand costs a settle: skip flavors where the pod cannot fit now
                # (runtime never exceeds cap, the root's is the capacity), unless the flavor
                # may still be the one it waits on.
                charged = self.charge_on(record, config, flavor)
                if self._options.bound_flavors:
                    if self._cannot_fit_on(name, member, path, record, charged, waits=wait):
                        continue
                else:
                    if not admission.may_fit(member, [], charged):
                        continue
                    if wait is not None and not admission.may_fit(member, path, charged):
                        continue
            self.charge_to(record, flavor)
            self._tree_of(name).refresh()  # runtimes follow the moved demand
            verdict = check(record, name, here)
            if verdict.fits:
                return Placed.FITS
            # Short at its own quota, or at another tree's (try the next flavor); short only
            # at an ancestor of its own: it may wait here (reclaim makes room).
            if wait is None and verdict.quota == name and verdict.broken is Rule.ANCESTOR:
                wait = flavor
        placed[same] = wait or allowed[0]
        self.charge_to(record, placed[same])
        self._tree_of(name).refresh()
        return Placed.WAITS

    def nowhere(self, name: str, config: MemberConfig) -> str:
        """The reason of a pod none of whose quota's flavors it allows (`Placed.NOWHERE`)."""
        listed = ", ".join(config.flavors)
        missing = [f for f in config.flavors if f not in self.flavors]
        detail = f" ({', '.join(missing)} not defined yet)" if missing else ""
        return (
            f"waiting: none of ElasticQuota {name}'s flavors ({listed}){detail} "
            "is allowed by the pod's nodeSelector or node affinity"
        )


def _delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """What changes from `before` to `after`, per resource."""
    delta = {r: -amount for r, amount in before.items()}
    for resource, amount in after.items():
        delta[resource] = delta.get(resource, 0) + amount
    return delta
