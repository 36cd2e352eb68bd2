"""Small constructors for engine tests: amounts are base units of resource `x` unless named."""

from __future__ import annotations

from collections.abc import Mapping

from quotree.engine import Engine
from quotree.models import DEFAULT_TREE, QUOTA_LABEL, MemberConfig
from quotree.options import EngineOptions
from quotree.podfacts import NodeSelectorTerm, PodFacts
from quotree.simulate import SimulatedEngine

R = "x"  # an extended resource: one unit is one base unit


def _res(value: int | Mapping[str, int] | None) -> dict[str, int]:
    if value is None:
        return {}
    if isinstance(value, int):
        return {R: value}
    return dict(value)


def cohort(
    name: str,
    parent: str | None = None,
    *,
    min: int | Mapping[str, int] | None = None,  # noqa: A002 (the API's word)
    max: int | Mapping[str, int] | None = None,  # noqa: A002
    weight: int | Mapping[str, int] | None = None,
    lending: int | Mapping[str, int] | None = None,
    borrowing: int | Mapping[str, int] | None = None,
    tree: str = DEFAULT_TREE,
) -> MemberConfig:
    return MemberConfig(
        kind="Cohort",
        tree=tree,
        name=name,
        parent=parent,
        min=_res(min),
        max=_res(max),
        shared_weight=_res(weight),
        lending_limit=_res(lending),
        borrowing_limit=_res(borrowing),
    )


def quota(
    name: str,
    parent: str | None = None,
    *,
    namespace: str | None = None,
    namespaces: tuple[str, ...] = (),
    min: int | Mapping[str, int] | None = None,  # noqa: A002
    max: int | Mapping[str, int] | None = None,  # noqa: A002
    weight: int | Mapping[str, int] | None = None,
    lending: int | Mapping[str, int] | None = None,
    borrowing: int | Mapping[str, int] | None = None,
    preempt: bool = True,
    tree: str = DEFAULT_TREE,
) -> MemberConfig:
    return MemberConfig(
        kind="ElasticQuota",
        tree=tree,
        name=name,
        parent=parent,
        namespace=namespace or name,
        min=_res(min),
        max=_res(max),
        shared_weight=_res(weight),
        lending_limit=_res(lending),
        borrowing_limit=_res(borrowing),
        namespaces=namespaces,
        preempt_within_quota=preempt,
    )


_clock = iter(range(1, 10**9))


def pod(
    namespace: str,
    name: str,
    amount: int | Mapping[str, int] = 1,
    *,
    priority: int = 0,
    created: float | None = None,
    gated: bool = True,
    preemptible: bool = True,
    label: str | None = None,
    labels: Mapping[str, str] | None = None,
    selector: Mapping[str, str] | None = None,
    affinity: tuple[NodeSelectorTerm, ...] = (),
    node: str | None = None,
) -> PodFacts:
    """A pod of `amount` (an int: units of `x`); `created` defaults to a clock that
    ticks once a pod; `selector` and `affinity` are its nodeSelector and required node
    affinity terms, `node` its nodeName."""
    labels = dict(labels or {})
    if not preemptible:
        labels["quotree.io/preemptible"] = "false"
    if label:
        labels[QUOTA_LABEL] = label
    return PodFacts(
        namespace=namespace,
        name=name,
        request=_res(amount),
        labels=labels,
        priority=priority,
        created=float(next(_clock)) if created is None else created,
        gated=gated,
        node_name=node,
        node_selector=dict(selector or {}),
        node_affinity=affinity,
    )


def engine(
    *configs: MemberConfig, capacity: int | Mapping[str, int] = 100, **kwargs: object
) -> Engine:
    """The simulator's engine (instant evictions, no reclaim delay) unless told otherwise.

    `instant_evictions=False` gives the operator's engine (evictions wait for the
    cluster), with the other keyword arguments passed on.
    """
    eng: Engine
    if kwargs.pop("instant_evictions", True):
        switches = kwargs.pop("options", None)
        assert not kwargs, kwargs
        assert switches is None or isinstance(switches, EngineOptions)
        eng = SimulatedEngine(switches)
    else:
        options: dict[str, object] = {"reclaim_delay": 0.0}
        options.update(kwargs)
        eng = Engine(**options)  # type: ignore[arg-type]
    for config in configs:
        eng.set_config(config)
    eng.set_cluster_node("node-1", _res(capacity))
    eng.refresh()  # settled for the reads that follow
    return eng


def runtimes(eng: Engine, resource: str = R) -> dict[str, int]:
    eng.tree.settle()
    eng.refresh()
    return {n.name: n.runtime[resource] for n in eng.tree.live_members() if resource in n.resources}


def states(eng: Engine) -> dict[str, str]:
    return {r.key: str(r.state) for r in eng.pod_records()}


def arrive(eng: Engine, *pods: PodFacts, now: float = 0.0) -> None:
    """Pods arrive one at a time; the engine settles after each, as the simulator does."""
    for facts in pods:
        eng.observe_pod(facts)
        eng.decide(now)
