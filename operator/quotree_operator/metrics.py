"""Prometheus metrics and the tree page, on the operator's metrics port (every replica).

- `Metrics`: one registry with the counters and histograms of docs/reference/README.md
  ("Metrics"), fed by the shell (decisions, admissions, evictions) and the webhook server
  (durations, errors), the `quotree_leader` gauge, and the per-node gauges of
  tree_gauges.py (built from the engine at every scrape).
The server (`/metrics`, the tree page and its JSON) is in page.py.

Cardinality is bounded by the tree: labels name nodes, resources, pod states, webhooks and
eviction reasons, never pods. The counters and the admission wait histogram are labelled
with the ElasticQuota, its namespace and its parent Cohort (so that a dashboard sums them
per Cohort without a join); a quota's series go when it is deleted or moves (the next
scrape has them under its new parent). Amounts are in Kubernetes' base units as numbers:
cpu in cores (status "1500m" is 1.5), memory in bytes, other resources in their own units.
A `max` that is unlimited has no `quotree_max` series. No `_created` series are exported.
docs/observability.md has the table and the number of series for a tree of 10,000 quotas.
"""

from __future__ import annotations

import logging
import time

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.exposition import generate_latest

from quotree.engine import Engine
from quotree_operator.tree_gauges import NODE_LABELS, Sample, TreeCollector, tree_samples, value

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

# No `<name>_created` series beside each counter and histogram: a timestamp per series that
# no query here uses, and as many series again per quota.
disable_created_metrics()  # type: ignore[no-untyped-call]

#: Labels of the admission wait histogram: the ElasticQuota, where it is in the tree.
WAIT_LABELS = ("quota", "namespace", "parent")
#: Seconds from pod creation to gate removal: from instant to a reclaim delay and beyond.
WAIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
#: One engine decision: microseconds on a small tree, tens of milliseconds at 100k pods.
DECISION_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)
#: One admission request, as the webhook server answered it.
WEBHOOK_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


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
            "Pods admitted (scheduling gate removed), per ElasticQuota",
            ["node", "namespace", "parent"],
            registry=r,
        )
        self.evictions = Counter(
            "quotree_evictions_total",
            "Pods evicted, per ElasticQuota and reason (preempted or reclaimed)",
            ["node", "namespace", "parent", "reason"],
            registry=r,
        )
        self.admission_wait = Histogram(
            "quotree_admission_wait_seconds",
            "Seconds from a pod's creation to the removal of its scheduling gate, per ElasticQuota",
            WAIT_LABELS,
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
        #: The label values each per-quota family has series for (`_prune`).
        self._per_quota: dict[Counter | Histogram, set[tuple[str, ...]]] = {
            self.admissions: set(),
            self.evictions: set(),
            self.admission_wait: set(),
        }
        self.registry.register(TreeCollector(lambda: self._engine))

    def watch(self, engine: Engine) -> None:
        """Export this engine's tree from now on."""
        self._engine = engine

    # What the shell reports; each call is cheap (a counter or histogram update).

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)

    def decided(self, seconds: float) -> None:
        self.decision.observe(seconds)

    def _where(self, quota: str) -> tuple[str, str]:
        """The quota's namespace and parent Cohort as the engine holds them ("" if unknown)."""
        config = self._engine.tree_of(quota).config(quota) if self._engine and quota else None
        if config is None:
            return ("", "")
        return (config.namespace or "", config.parent or "")

    def _seen(self, family: Counter | Histogram, values: tuple[str, ...]) -> tuple[str, ...]:
        """Note that `family` has a series with these label values (`_prune`)."""
        self._per_quota[family].add(values)
        return values

    def admitted(self, quota: str | None, created: float | None, now: float | None = None) -> None:
        """A gate was removed: count it, and the wait since creation (epoch seconds)."""
        values = (quota or "", *self._where(quota or ""))
        self.admissions.labels(*self._seen(self.admissions, values)).inc()
        if created:
            wait = (time.time() if now is None else now) - created
            self.admission_wait.labels(*self._seen(self.admission_wait, values)).observe(
                max(0.0, wait)
            )

    def evicted(self, quota: str, kind: str) -> None:
        values = (quota, *self._where(quota), kind.lower())
        self.evictions.labels(*self._seen(self.evictions, values)).inc()

    def _prune(self) -> None:
        """Drop the per-quota series of quotas that are gone or moved (namespace, parent)."""
        if self._engine is None:
            return
        for family, seen in self._per_quota.items():
            for values in list(seen):
                quota, namespace, parent = values[:3]
                if quota and self._where(quota) != (namespace, parent):
                    family.remove(*values)
                    seen.discard(values)

    def _ensure(self) -> None:
        """Give every ElasticQuota its admission series at zero before its first admission:
        a series that first shows up with its count already up is not an increase to
        `rate()`, so the first admissions of a quota would not show on a dashboard."""
        if self._engine is None:
            return
        seen = self._per_quota[self.admissions]
        for name, config in self._engine.all_configs().items():
            if not config.is_leaf:
                continue
            values = (name, config.namespace or "", config.parent or "")
            if values not in seen:
                self.admissions.labels(*self._seen(self.admissions, values))
                self.admission_wait.labels(*self._seen(self.admission_wait, values))

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
        self._prune()
        self._ensure()
        return generate_latest(self.registry)


#: The operator's metrics (one per process; the webhook server reports into it too).
METRICS = Metrics()
