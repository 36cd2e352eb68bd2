"""The per-node gauges, built from the engine's reports at each scrape.

- `tree_samples(engine)`: a pure function from the engine's reports to the gauges
  (`quotree_min|max|request|runtime|used` per node and resource; `quotree_pending_units`
  per node; per ElasticQuota `quotree_pods`, `quotree_pod_groups` and
  `quotree_reclaim_overdue_seconds`: how long its longest-waiting pod has waited for lent
  quota past the reclaim delay).
- `TreeCollector`: the registry calls it at every scrape, so the gauges are never stale
  and a node that is deleted disappears from the next scrape.

A pending unit is what the engine admits in one step: a pod on its own, or a pod group
whole (its pods count once, as one unit). A Cohort's pending units are those of every
ElasticQuota below it, at any depth, so that a dashboard reads pending per Cohort without
a join.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from quotree.engine import Engine, MemberReport
from quotree.models import MemberConfig
from quotree.quantity import is_unlimited

__all__ = [
    "NODE_LABELS",
    "Sample",
    "TreeCollector",
    "pending_units",
    "tree_samples",
    "value",
]

#: Labels of the per-node, per-resource gauges (docs/reference/README.md, "Metrics").
NODE_LABELS = ("node", "kind", "namespace", "parent", "resource")
#: Labels of the per-node gauges that are not per resource.
NODE_ONLY_LABELS = ("node", "kind", "namespace", "parent")
#: Labels of the per-ElasticQuota pod and pod group counts.
POD_LABELS = ("node", "namespace", "parent", "state")


def value(amount: int, resource: str) -> float:
    """An engine amount as the number Prometheus shows: cpu in cores, the rest in base units."""
    return amount / 1000 if resource == "cpu" else float(amount)


@dataclass(frozen=True, slots=True)
class Sample:
    """One gauge value: metric name (without `quotree_`), labels, value."""

    metric: str
    labels: tuple[tuple[str, str], ...]
    value: float


def _waiting_group_pods(engine: Engine) -> dict[str, int]:
    """Per ElasticQuota, the pods of its pod groups that wait whole (not admitted)."""
    out: dict[str, int] = {}
    for group in engine.groups.values():
        if group.quota is not None and group.state != "admitted":
            out[group.quota] = out.get(group.quota, 0) + len(group.pods)
    return out


def pending_units(
    engine: Engine, configs: Mapping[str, MemberConfig], reports: Mapping[str, MemberReport]
) -> dict[str, int]:
    """Pending units per node (module docstring): an ElasticQuota's pending pods on their
    own plus its waiting groups; a Cohort's, the sum over the ElasticQuotas below it.
    `reports`: `engine.report` of each node, as of the engine's last `refresh()`."""
    grouped = _waiting_group_pods(engine)
    out = dict.fromkeys(configs, 0)
    for name, config in configs.items():
        if config.kind != "ElasticQuota":
            continue
        report = reports[name]
        units = report.pending_pods - grouped.get(name, 0) + report.pending_groups
        seen: set[str] = set()
        node: str | None = name
        while node is not None and node in out and node not in seen:  # a cycle: once each
            seen.add(node)
            out[node] += units
            node = configs[node].parent
    return out


def tree_samples(engine: Engine, now: float | None = None) -> list[Sample]:
    """Every per-node gauge value the engine's reports give now (pure: reads only); `now`
    on the engine's clock (`time.monotonic()`, as the controller decides)."""
    now = time.monotonic() if now is None else now
    planner = engine.decider.planner
    configs = engine.all_configs()
    reports = {name: engine.report(name) for name in configs}
    units = pending_units(engine, configs, reports)
    out: list[Sample] = []
    for name, config in sorted(configs.items()):
        report = reports[name]
        base = (
            ("node", name),
            ("kind", config.kind),
            ("namespace", config.namespace or ""),
            ("parent", config.parent or ""),
        )
        lists: dict[str, Mapping[str, int]] = {
            "min": config.min,
            "max": config.max,
            "request": report.request,
            "runtime": report.runtime,
            "used": report.used,
        }
        resources = sorted(set().union(*lists.values()))
        for metric, amounts in lists.items():
            for resource in resources:
                if metric == "max" and (resource not in amounts or is_unlimited(amounts[resource])):
                    continue
                amount = amounts.get(resource, 0)
                out.append(Sample(metric, (*base, ("resource", resource)), value(amount, resource)))
        out.append(Sample("pending_units", base, units[name]))
        if config.kind == "ElasticQuota":
            pod_labels = (
                ("node", name),
                ("namespace", config.namespace or ""),
                ("parent", config.parent or ""),
            )
            out.append(Sample("pods", (*pod_labels, ("state", "admitted")), report.admitted_pods))
            out.append(Sample("pods", (*pod_labels, ("state", "pending")), report.pending_pods))
            for state, count in (
                ("admitted", report.admitted_groups),
                ("pending", report.pending_groups),
            ):
                out.append(Sample("pod_groups", (*pod_labels, ("state", state)), count))
            overdue = planner.overdue(name, now)
            out.append(Sample("reclaim_overdue_seconds", pod_labels, overdue))
    return out


_HELP = {
    "min": "Guaranteed amount (spec.min) of a tree node, per resource",
    "max": "Ceiling (spec.max) of a tree node, per resource; absent when unlimited",
    "request": "What the pods of a tree node ask for (status.request), per resource",
    "runtime": "What a tree node may use now, its min plus its share of idle quota "
    "(status.runtime), per resource",
    "used": "What the admitted pods of a tree node use (status.used), per resource",
    "pending_units": "Units waiting for admission under a tree node: pods on their own and "
    "pod groups, each counted once (a Cohort: every ElasticQuota below it)",
    "pods": "Pods of an ElasticQuota by state (admitted, pending)",
    "pod_groups": "Pod groups of an ElasticQuota by state (admitted whole, pending whole)",
    "reclaim_overdue_seconds": "How long the longest-waiting pod of an ElasticQuota has "
    "waited for lent quota past the reclaim delay (0: none)",
}

_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    *((m, NODE_LABELS) for m in ("min", "max", "request", "runtime", "used")),
    ("pending_units", NODE_ONLY_LABELS),
    ("pods", POD_LABELS),
    ("pod_groups", POD_LABELS),
    ("reclaim_overdue_seconds", POD_LABELS[:-1]),
)


class TreeCollector(Collector):
    """Builds the per-node gauges from the engine at each scrape (see `tree_samples`)."""

    def __init__(self, engine: Callable[[], Engine | None]) -> None:
        self._engine = engine

    def describe(self) -> Iterable[Metric]:
        return []  # built at scrape time; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        engine = self._engine()
        families = {
            metric: GaugeMetricFamily(f"quotree_{metric}", _HELP[metric], labels=list(labels))
            for metric, labels in _FAMILIES
        }
        if engine is not None:
            engine.refresh()  # the explicit step before reading the trees
            for sample in tree_samples(engine):
                families[sample.metric].add_metric([v for _, v in sample.labels], sample.value)
        yield from families.values()
