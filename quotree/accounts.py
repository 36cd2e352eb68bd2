"""Per-resource accounting of one live tree member, kept beside the structure's graph.

Why a module of its own: the DiGraph (`structure.py`) says who is whose
parent; a `TreeMember` says, per resource, what a member asks for, what it is
given and what it holds. `QuotaTree` (`runtime.py`) keeps one `TreeMember` per
live member, keyed by name, and looks parents and children up in the graph.
The names follow the semantics ("Per node").
"""

from __future__ import annotations

from quotree.models import MemberConfig
from quotree.quantity import UNLIMITED

__all__ = ["ChildLists", "TreeMember"]


class ChildLists:
    """A parent's children in one resource as a saturated distribution reads them: names,
    mins and weights in `children_in`'s order (fixed until the next rebuild, which makes
    new members), and the guarantees last scaled from the mins with the total they were
    scaled to (they depend on nothing else). The names are in ascending order (`children_in`
    is sorted by name) and `one_weight` says whether the weights are all the same: what
    `sharing.water_fill` is told, so that it neither sorts nor compares weights. `held`
    is the list of guarantees (`mins` or `guarantees`, the list itself) that every child
    holds as its guarantee since the parent's last full distribution, None when unknown:
    only that distribution writes the children's guarantees."""

    __slots__ = ("guarantees", "held", "mins", "names", "one_weight", "scale_total", "weights")

    def __init__(self, children: list[TreeMember], resource: str) -> None:
        self.names = [child.name for child in children]
        self.mins = [child.min[resource] for child in children]
        self.weights = [child.weight[resource] for child in children]
        self.one_weight = len(set(self.weights)) <= 1
        self.scale_total = -1  # no guarantees scaled yet
        self.guarantees: list[int] = []
        self.held: list[int] | None = None  # none known yet


class TreeMember:
    """One live Cohort or ElasticQuota (or the cluster root), per resource it takes part in."""

    __slots__ = (
        "cap",
        "children_in",
        "config",
        "demand",
        "depth",
        "floor",
        "guarantee",
        "is_quota",
        "last_scale_total",
        "last_total",
        "margin_sums",
        "min",
        "name",
        "raw_request",
        "resources",
        "roomy",
        "runtime",
        "scaled",
        "sum_base",
        "sum_min",
        "sum_target",
        "used",
        "weight",
    )

    def __init__(self, name: str, config: MemberConfig | None, depth: int) -> None:
        self.name = name
        self.config = config  # None for the cluster root
        self.depth = depth  # 0 for the root; orders the top-down runtime pass
        #: An ElasticQuota (pods are charged only to these); read at every step of a pass.
        self.is_quota = config is not None and config.is_leaf
        #: The resources the member takes part in (the semantics, "The tree").
        self.resources: frozenset[str] = frozenset()
        # From the configuration (the semantics, "Per node"):
        self.min: dict[str, int] = {}
        self.cap: dict[str, int] = {}
        self.floor: dict[str, int] = {}
        self.weight: dict[str, int] = {}
        # From the pods:
        #: a quota: its pods' request plus its held demand (`QuotaTree.pod_request`,
        #: `QuotaTree.held`, the two inputs); a Cohort: its children's demand
        self.raw_request: dict[str, int] = {}
        self.demand: dict[str, int] = {}  # min(cap, max(raw request, floor))
        self.used: dict[str, int] = {}  # admitted pods, summed up the tree
        # From the parent's distribution:
        self.runtime: dict[str, int] = {}
        self.guarantee: dict[str, int] = {}  # min, or the scaled min when the cluster shrank
        if self.is_quota:
            # An ElasticQuota has no children: the parents' slots below stay unset (reading
            # one is a bug, and fails loudly). 6 dicts less per quota: about 1 KiB each of
            # 10,000 quotas.
            return
        #: Per resource, the children taking part in it (from the graph, at each rebuild).
        self.children_in: dict[str, list[TreeMember]] = {}
        # Kept by a parent so that one changed child is handled without its siblings:
        self.sum_min: dict[str, int] = {}  # children's mins
        self.sum_target: dict[str, int] = {}  # children's targets
        #: children's min(demand, guarantee) (`flavor_fit` reads it): set by each full
        #: distribution, kept by `climb.climb` as demand moves in between
        self.sum_base: dict[str, int] = {}
        self.roomy: dict[str, bool] = {}  # at the last distribution every target fitted
        self.last_total: dict[str, int] = {}  # the total the last distribution shared
        self.last_scale_total: dict[str, int] = {}  # ... and what the mins were scaled against
        #: Per resource, the children's fixed numbers and last scaled guarantees
        #: (`ChildLists`), made at the first full distribution.
        self.scaled: dict[str, ChildLists] = {}
        #: Per resource, the sums over the children that `deferral.member_margin` reads
        #: (`deferral.child_sums`), kept until a child's demand moves (`climb.climb` drops
        #: the entry; a recompute drops them all): they depend on nothing else.
        self.margin_sums: dict[str, tuple[int, int, int, bool, tuple[int, ...]]] = {}

    def set_limits(self) -> None:
        """min, cap, floor and sharedWeight for every resource the member takes part in."""
        config = self.config
        assert config is not None
        for resource in self.resources:
            low = config.min.get(resource, 0)
            high = config.max.get(resource, UNLIMITED)
            borrow = config.borrowing_limit.get(resource)
            self.min[resource] = low
            self.cap[resource] = min(high, UNLIMITED if borrow is None else low + borrow)
            lend = config.lending_limit.get(resource)
            self.floor[resource] = 0 if lend is None else max(low - lend, 0)
            weight = config.shared_weight.get(resource)
            if weight is None:
                weight = high if resource in config.max else (low if low > 0 else 1)
            self.weight[resource] = weight

    def target(self, resource: str) -> int:
        """What this child gets when its parent has room for everyone."""
        demand = self.demand[resource]
        if self.weight[resource] > 0:
            return demand
        return min(demand, self.min[resource])

    def clamp(self, resource: str) -> int:
        """demand = min(cap, max(raw request, floor))."""
        return min(self.cap[resource], max(self.raw_request[resource], self.floor[resource]))

    def __repr__(self) -> str:
        return f"TreeMember({self.name!r})"
