"""Prometheus metrics and the tree page, on the operator's metrics port (every replica).

- `Metrics`: one registry with the counters and histograms of api.md ("Metrics"), fed by
  the shell (decisions, admissions, evictions) and the webhook server (durations, errors),
  and the `quotree_leader` gauge.
- `tree_samples(engine)`: a pure function from the engine's reports to the per-node gauges
  (`quotree_min|max|request|runtime|used`, `quotree_pods`, `quotree_pod_groups`, and per
  ElasticQuota `quotree_reclaim_overdue_seconds`: how long its longest-waiting pod has waited
  for lent quota past the reclaim delay). The registry calls it at every scrape through
  `TreeCollector`, so the gauges are never stale and a node that is deleted disappears from
  the next scrape.
The server (`/metrics`, the tree page and its JSON) is in page.py.

Cardinality is bounded by the tree: labels name nodes, resources, pod states, webhooks and
eviction reasons, never pods. Amounts are in Kubernetes' base units as numbers: cpu in
cores (status "1500m" is 1.5), memory in bytes, other resources in their own units. A `max`
that is unlimited has no `quotree_max` series.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from quotree.engine import Engine
from quotree.quantity import is_unlimited

__all__ = [
    "METRICS",
    "NODE_LABELS",
    "Metrics",
    "Sample",
    "TreeCollector",
    "tree_samples",
    "value",
]

logger = logging.getLogger("quotree.operator")

#: Labels of the per-node, per-resource gauges (api.md).
NODE_LABELS = ("node", "kind", "namespace", "parent", "resource")
#: Seconds from pod creation to gate removal: from instant to a reclaim delay and beyond.
WAIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
#: One engine decision: microseconds on a small tree, tens of milliseconds at 100k pods.
DECISION_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)
#: One admission request, as the webhook server answered it.
WEBHOOK_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


def value(amount: int, resource: str) -> float:
    """An engine amount as the number Prometheus shows: cpu in cores, the rest in base units."""
    return amount / 1000 if resource == "cpu" else float(amount)


@dataclass(frozen=True, slots=True)
class Sample:
    """One gauge value: metric name (without `quotree_`), labels, value."""

    metric: str
    labels: tuple[tuple[str, str], ...]
    value: float


def tree_samples(engine: Engine, now: float | None = None) -> list[Sample]:
    """Every per-node gauge value the engine's reports give now (pure: reads only); `now`
    on the engine's clock (`time.monotonic()`, as the controller decides)."""
    now = time.monotonic() if now is None else now
    planner = engine.decider.planner
    out: list[Sample] = []
    for name, config in sorted(engine.all_configs().items()):
        report = engine.report(name)
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
        if config.kind == "ElasticQuota":
            pod_labels = (("node", name), ("namespace", config.namespace or ""))
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
    "pods": "Pods of an ElasticQuota by state (admitted, pending)",
    "pod_groups": "Pod groups of an ElasticQuota by state (admitted whole, pending whole)",
    "reclaim_overdue_seconds": "How long the longest-waiting pod of an ElasticQuota has "
    "waited for lent quota past the reclaim delay (0: none)",
}


class TreeCollector(Collector):
    """Builds the per-node gauges from the engine at each scrape (see `tree_samples`)."""

    def __init__(self, engine: Callable[[], Engine | None]) -> None:
        self._engine = engine

    def describe(self) -> Iterable[Metric]:
        return []  # built at scrape time; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        engine = self._engine()
        families: dict[str, GaugeMetricFamily] = {}
        for metric, labels in (
            *((m, NODE_LABELS) for m in ("min", "max", "request", "runtime", "used")),
            ("pods", ("node", "namespace", "state")),
            ("pod_groups", ("node", "namespace", "state")),
            ("reclaim_overdue_seconds", ("node", "namespace")),
        ):
            families[metric] = GaugeMetricFamily(
                f"quotree_{metric}", _HELP[metric], labels=list(labels)
            )
        if engine is not None:
            engine.refresh()  # the explicit step before reading the trees
            for sample in tree_samples(engine):
                families[sample.metric].add_metric([v for _, v in sample.labels], sample.value)
        yield from families.values()


class Metrics:
    """The operator's registry: see module docstring."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.leader = Gauge(
            "quotree_leader",
            "1 on the operator replica that holds the leader Lease and acts",
            registry=r,
        )
        self.admissions = Counter(
            "quotree_admissions_total",
            "Pods admitted (scheduling gate removed)",
            ["node"],
            registry=r,
        )
        self.evictions = Counter(
            "quotree_evictions_total",
            "Pods evicted, by reason (preempted or reclaimed)",
            ["node", "reason"],
            registry=r,
        )
        self.admission_wait = Histogram(
            "quotree_admission_wait_seconds",
            "Seconds from a pod's creation to the removal of its scheduling gate",
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.webhook_duration = Histogram(
            "quotree_webhook_duration_seconds",
            "Seconds to answer one admission request",
            ["webhook"],
            buckets=WEBHOOK_BUCKETS,
            registry=r,
        )
        self.webhook_errors = Counter(
            "quotree_webhook_errors_total",
            "Admission requests answered with an error (not denials): internal failures or "
            "requests that are not well-formed",
            ["webhook"],
            registry=r,
        )
        self.decision = Histogram(
            "quotree_decision_seconds",
            "Seconds one engine decision (Engine.decide) takes",
            buckets=DECISION_BUCKETS,
            registry=r,
        )
        self.status_rounds = Counter(
            "quotree_status_rounds_total",
            "Rounds of the status writer (each compares the statuses that may have changed)",
            registry=r,
        )
        self.status_examined = Counter(
            "quotree_status_examined_total",
            "Cohort and ElasticQuota objects whose desired status a round computed",
            registry=r,
        )
        self.status_writes = Counter(
            "quotree_status_writes_total",
            "Status / annotation PATCHes of Cohorts and ElasticQuotas sent",
            registry=r,
        )
        self._engine: Engine | None = None
        self.registry.register(TreeCollector(lambda: self._engine))

    def watch(self, engine: Engine) -> None:
        """Export this engine's tree from now on."""
        self._engine = engine

    # What the shell reports; each call is cheap (a counter or histogram update).

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)

    def decided(self, seconds: float) -> None:
        self.decision.observe(seconds)

    def admitted(self, quota: str | None, created: float | None, now: float | None = None) -> None:
        """A gate was removed: count it, and the wait since creation (epoch seconds)."""
        self.admissions.labels(node=quota or "").inc()
        if created:
            wait = (time.time() if now is None else now) - created
            self.admission_wait.observe(max(0.0, wait))

    def evicted(self, quota: str, kind: str) -> None:
        self.evictions.labels(node=quota, reason=kind.lower()).inc()

    def webhook(self, webhook: str, seconds: float, error: bool) -> None:
        self.webhook_duration.labels(webhook=webhook).observe(seconds)
        if error:
            self.webhook_errors.labels(webhook=webhook).inc()

    def status_round(self, examined: int, writes: int) -> None:
        """One status round: how many objects it looked at and how many PATCHes it sent."""
        self.status_rounds.inc()
        self.status_examined.inc(examined)
        self.status_writes.inc(writes)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


#: The operator's metrics (one per process; the webhook server reports into it too).
METRICS = Metrics()
