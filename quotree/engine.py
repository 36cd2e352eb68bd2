"""The engine: what the shells talk to, the one place where quota decisions are taken.

Why a module of its own: the operator feeds `Engine` what the cluster holds
(quotas, cohorts, cluster nodes, pods) and carries out what `decide()`
returns; `quotree simulate` does the same with no cluster and no delay
(`simulate.SimulatedEngine`); the webhooks ask it how a pod resolves to a
quota. This module turns those inputs into records (which quota a pod is
charged to, its raw request, admitted or pending); the decisions themselves
are `decide.Decider`'s, and the rules behind them live in `resolution`,
`runtime`, `admission`, `eviction` and `status`. It does no I/O and reads no
clock: time comes in as an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from quotree.cluster import Cluster
from quotree.create_admission import CreateAdmission, CreateReservations
from quotree.decide import Decider
from quotree.decisions import Decisions
from quotree.engine_views import EngineViews
from quotree.eviction import Eviction
from quotree.flavor_spec import FlavorConfig
from quotree.forest_config import set_forest_config
from quotree.group_ledger import GroupLedger, Groups, GroupView
from quotree.groups import GroupSpec, JobFacts
from quotree.hold import Holds
from quotree.intake import PodIntake
from quotree.ledger import Ledger
from quotree.models import DEFAULT_TREE, MemberConfig
from quotree.options import EngineOptions
from quotree.placement import Placement
from quotree.podfacts import PodFacts
from quotree.pods import PodRecord, PodState
from quotree.positions import Waiting
from quotree.reservations import Reservations
from quotree.resolution import (
    DEFAULT_SYSTEM_NAMESPACES,
    Coverage,
    Resolution,
    namespaces_of,
    never_gated,
)
from quotree.rules import Problem
from quotree.runtime import ROOT, QuotaTree
from quotree.status_numbers import MemberReport
from quotree.trees import Forest

__all__ = [
    "DEFAULT_SYSTEM_NAMESPACES",
    "CreateAdmission",
    "Decisions",
    "Engine",
    "Eviction",
    "GroupView",
    "MemberReport",
    "PodRecord",
    "PodState",
    "Resolution",
    "Waiting",
]


class Engine(EngineViews):
    """Quota decisions for a set of pods; see module docstring."""

    def __init__(
        self,
        *,
        system_namespaces: Iterable[str] = (),
        default_quota: str | None = None,
        reclaim_delay: float = 30.0,
        group_timeout: float = 300.0,
        scheduling_timeout: float = 300.0,
        options: EngineOptions | None = None,
    ) -> None:
        options = options or EngineOptions()
        self.options = options
        #: The pods and their queues (`ledger.py`); `pods` is its records by key.
        self.ledger = Ledger()
        self.pods: Mapping[str, PodRecord] = self.ledger.pods  # read-only for the shells
        #: Every tree by name, and which tree each member is in (`trees.py`).
        self.forest = Forest()
        self.tree = self.forest.default  # the default tree
        self.trees: Mapping[str, QuotaTree] = self.forest.trees
        #: What pending pods hold on the flavors they do not wait on (`hold.py`).
        self.holds = Holds(self.forest.tree_of, enabled=options.holds)
        #: Which flavor a pending pod is charged to (`placement.py`).
        self.placement = Placement(self.forest.tree_of, self.ledger.quota_pods, self.holds, options)
        #: ResourceFlavors by name (the placement's; changed through `set_flavor`).
        self.flavors: Mapping[str, FlavorConfig] = self.placement.flavors
        #: The decision loop (`decide.py`).
        self.decider = Decider(
            self.ledger,
            self.forest,
            self.placement,
            self.holds,
            options=options,
            reclaim_delay=reclaim_delay,
        )
        #: Namespaces never gated (`resolution.never_gated`, plus Kubernetes' own).
        self.system_namespaces = never_gated(None, system_namespaces)
        self.coverage = Coverage(self.system_namespaces, default_quota)
        #: The Nodes that count and what pods outside the trees hold (`cluster.py`).
        self.cluster = Cluster(self.forest, self.flavors)
        #: Pods in and out (`intake.py`).
        self.intake = PodIntake(
            self.ledger,
            self.forest,
            self.cluster,
            coverage=self.coverage,
            placement=self.placement,
            holds=self.holds,
            decider=self.decider,
        )
        #: Pod groups (`group_ledger.py`): pods come in through it; admitted and evicted
        #: whole by the decider's `gang_admission.GangAdmission`.
        self.group_ledger = GroupLedger(
            self.ledger,
            self.intake,
            self.coverage,
            Reservations(self.ledger, self.forest, self.holds),
        )
        self.decider.gangs.book = self.group_ledger
        self.decider.planner.book = self.group_ledger  # victims chosen with groups whole
        self.decider.gangs.group_timeout = group_timeout
        self.decider.gangs.scheduling_timeout = scheduling_timeout
        #: The pod groups by "namespace/name", read-only (`group_ledger.GroupView`).
        self.groups: Mapping[str, GroupView] = Groups(self.group_ledger.groups)
        #: Admission at creation (`create_admission.py`): `created.admit` a new pod that
        #: fits now, its room held until the cluster shows it (`take`, then
        #: `observe_pod`), or it is deleted first (`release`), or its time is up (`expire`).
        self.created = CreateReservations(self.decider, self.group_ledger)
        # Objects whose name another tree already holds (rule 6 across trees, the webhook
        # bypassed): the engine keeps the first, and takes these when it goes.
        self.shadowed: dict[str, list[MemberConfig]] = {}

    # ------------------------------------------------------------ decisions

    def decide(self, now: float = 0.0) -> Decisions:
        """Admit what fits, preempt within quotas, reclaim lent quota (`Decider.decide`).
        Ends with the trees' runtimes settled (`QuotaTree.refresh`, deferred subtrees left
        as they are)."""
        out = self.decider.decide(now)
        for tree in self.forest:
            tree.refresh()
        return out

    def refresh(self) -> None:
        """Bring every tree's runtimes up to date, deferred subtrees too: the explicit step
        before reading the trees (`report`, `tree_of(name).node`, `problems`). Reading
        changes nothing; this changes no decision (what moved stays for the next round)."""
        for tree in self.forest:
            tree.refresh(ROOT)

    def refresh_reasons(self) -> Decisions:
        """Bring every pending pod's reason up to date with the current numbers."""
        return self.decider.refresh_reasons()

    def set_maintenance(self, reason: str | None) -> None:
        """Enter maintenance mode for the whole cluster (reason: why) or, with None, leave it."""
        self.decider.set_maintenance(reason)

    @property
    def maintenance(self) -> str | None:
        """Why the whole cluster is in maintenance mode (None: it is not)."""
        return self.decider.maintenance

    def tree_of(self, name: str) -> QuotaTree:
        """The tree Cohort or ElasticQuota `name` belongs to (the default tree if unknown)."""
        return self.forest.tree_of(name)

    # ------------------------------------------------------------ configuration

    def set_config(self, config: MemberConfig) -> None:
        """A Cohort or ElasticQuota was added or changed."""
        home = self.tree_of(config.name)
        old = home.structure.object(config.name, config.kind, config.namespace)
        if old == config:
            return  # e.g. our own status write coming back through the watch
        if config.tree != DEFAULT_TREE or self.forest.several:
            if set_forest_config(self, config, home, old):
                return
        else:
            self.tree.set_config(config)
        if old is not None:
            self.coverage.remove(old)
        if config.is_leaf:
            self.coverage.add(config)
        self.ledger.touched.add(config.name)
        self.holds.sync(config.name)  # its min may have changed
        self.intake.reresolve(namespaces_of(old) | namespaces_of(config))
        if (
            config.is_leaf
            and old is not None
            and (old.flavors, old.flavored_resources) != (config.flavors, config.flavored_resources)
        ):
            self.intake.recharge({config.name})

    def all_configs(self) -> dict[str, MemberConfig]:
        """Every Cohort and ElasticQuota the engine holds, by name, over all trees."""
        return self.forest.configs()

    def tree_configs(self) -> dict[str, Mapping[str, MemberConfig]]:
        """Each tree's Cohorts and ElasticQuotas by name (the `Structure`), by tree name."""
        return self.forest.tree_configs()

    def problems(self) -> dict[str, Problem]:
        """Nodes outside the live trees, by name, and why (every tree; as of `refresh()`)."""
        return self.forest.problems()

    def remove_config(
        self, name: str, *, kind: str | None = None, namespace: str | None = None
    ) -> None:
        """A Cohort or ElasticQuota is gone: the one of `kind` in `namespace` (kind None:
        every object called `name`). Another object of the same name stays."""
        shadowed = self.shadowed.get(name)
        if shadowed:
            shadowed[:] = [
                c
                for c in shadowed
                if kind is not None and (c.kind, c.namespace) != (kind, namespace)
            ]
        home = self.tree_of(name)
        gone = [
            o
            for o in home.structure.objects(name)
            if kind is None or (o.kind, o.namespace) == (kind, namespace)
        ]
        home.remove_config(name, kind, namespace)
        namespaces: set[str] = set()
        for old in gone:
            self.coverage.remove(old)
            namespaces |= namespaces_of(old)
        for other in home.structure.objects(name):
            if other.is_leaf:
                self.coverage.add(other)  # it may share namespaces with the one removed
        if name not in home.structure:
            self.forest.forget(name)
        self.ledger.touched.add(name)
        self.holds.sync(name)  # no min any more (or another object's)
        self.intake.reresolve(namespaces)
        if shadowed and name not in home.structure:
            self.set_config(shadowed.pop(0))  # the name is free: the next object takes it

    def set_cluster_node(
        self,
        name: str,
        allocatable: Mapping[str, int] | None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """A cluster node's allocatable (None: gone or not counted; `capacity.node_allocatable`)
        and its labels (which flavors it belongs to)."""
        self.cluster.set_node(name, allocatable, labels)

    # ------------------------------------------------------------ resource flavors

    def set_flavor(self, flavor: FlavorConfig) -> None:
        """A ResourceFlavor was added or changed: capacities and the pods that may use it."""
        if self.placement.set_flavor(flavor):
            self._flavor_changed(flavor.name)

    def remove_flavor(self, name: str) -> None:
        """A ResourceFlavor is gone: its capacity is 0; admitted pods stay charged to it."""
        if self.placement.remove_flavor(name):
            self._flavor_changed(name)

    def _flavor_changed(self, name: str) -> None:
        self.cluster.recompute()
        self.intake.recharge(
            {
                q
                for tree in self.forest
                for q, cfg in tree.structure.items()
                if cfg.is_leaf and name in cfg.flavors
            }
        )

    def covering(self, namespace: str, tree: str = DEFAULT_TREE) -> list[str]:
        """The ElasticQuotas of `tree` whose namespaces include `namespace`, by name."""
        return self.coverage.covering(namespace, tree)

    def resolve(self, namespace: str, labels: Mapping[str, str]) -> Resolution:
        """Which quota a pod of `namespace` with `labels` is charged to (the API's "Pods" rules)."""
        return self.coverage.resolve(namespace, labels)

    # ------------------------------------------------------------ pods

    def observe_pod(self, facts: PodFacts) -> PodRecord | None:
        """Take in a pod as the cluster shows it (added or changed): through its pod group
        (`GroupLedger.observe`), then `PodIntake.observe`."""
        return self.group_ledger.observe(facts)

    def forget_pod(self, key: str) -> PodRecord | None:
        """The pod is gone (deleted, finished, evicted); returns what the engine knew of it."""
        return self.group_ledger.forget(key)

    def observe_job(self, job: JobFacts) -> None:
        """A `batch/v1` Job as the cluster shows it: its pods form a group by its facts
        (`groups.JobFacts.group_size`); its pods that waited for it are taken in."""
        self.group_ledger.observe_job(job)

    def forget_job(self, namespace: str, name: str) -> None:
        """The Job is gone."""
        self.group_ledger.forget_job(namespace, name)

    def group_declaration(
        self, namespace: str, group: str
    ) -> tuple[str | None, GroupSpec, int] | None:
        """(quota, spec, priority) that pod group `group` of `namespace`'s pods declared
        (None: no such group): a new pod must agree (`groups.disagreement`)."""
        record = self.group_ledger.groups.get(f"{namespace}/{group}")
        return record.declaration if record is not None and record.pods else None

    def eviction_refused(self, key: str) -> None:
        """The Eviction API said no (a PodDisruptionBudget): the pod stays; try again later."""
        self.intake.eviction_refused(key)
