"""Every query of the Grafana dashboard (manifests/monitoring/dashboard.json) returns data
from a real Prometheus scraping a running operator.

Prometheus (prometheus_proc.py, a 1 s scrape) watches the operator from before the story,
so that rates and the admission wait quantiles have something to show: Cohort dash-<s>
(min and max cpu 4) with ElasticQuotas owner (min 2, max 3) and borrower (min 2).
borrower runs four 1-cpu pods, two of them on owner's idle quota; owner then asks for
three: its first two reclaim borrower's lent quota after the reclaim delay (two
evictions), the third waits (at its runtime). Each panel's query is taken from the JSON,
with the dashboard's variables filled as Grafana fills them (the Cohort chosen, every
quota, cpu), and must return at least one series with a number; each legend names only
labels the series carry. The variables' own queries list the story's Cohort and quotas.
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import start_operator
from tests.e2e.prometheus_proc import free_port, http_get, one_value, promql, run_prometheus

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "manifests" / "monitoring" / "dashboard.json"
DELAY = 2  # QUOTREE_RECLAIM_DELAY: seconds before lent quota is reclaimed


@dataclass(frozen=True)
class Story:
    prometheus: str
    cohort: str
    owner: str
    borrower: str


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in dashboard["panels"]:
        out += panel.get("panels", []) if panel["type"] == "row" else [panel]
    return out


def _filled(expr: str, cohort: str) -> str:
    """The query as Grafana sends it: the Cohort chosen, every quota, cpu, a rate window
    longer than the story."""
    values = {"cohort": cohort, "quota": ".*", "resource": "cpu", "__rate_interval": "5m"}
    return re.sub(r"\$(\w+)", lambda m: values[m.group(1)], expr)


@pytest.fixture(scope="module")
def story(cluster: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    s = k.suffix()
    cohort, owner, borrower = f"dash-{s}", f"owner-{s}", f"borrower-{s}"
    ns_owner, ns_borrower = f"dash-owner-{s}", f"dash-borrower-{s}"
    metrics_port = free_port()
    operator = start_operator(
        {
            "QUOTREE_METRICS_PORT": str(metrics_port),
            "QUOTREE_WEBHOOK_PORT": str(free_port()),
            "QUOTREE_CERT_DIR": str(tmp_path_factory.mktemp("webhook-pki")),
            "QUOTREE_IDENTITY": "e2e-dashboard",
            "QUOTREE_RECLAIM_DELAY": str(DELAY),
        },
        log_name="operator-dashboard",
    )
    try:
        with run_prometheus(
            tmp_path_factory.mktemp("prometheus"), [f"127.0.0.1:{metrics_port}"]
        ) as url:
            cluster.wait_until(
                lambda: one_value(url, 'up{job="quotree-operator"}') == 1,
                60,
                "Prometheus to scrape the operator",
            )
            operator.wait_for_log("configurations quotree.io written", 60)
            k.apply(
                k.namespace(ns_owner),
                k.namespace(ns_borrower),
                k.cohort(cohort, min={"cpu": "4"}, max={"cpu": "4"}),
            )
            k.apply(
                k.quota(owner, ns_owner, parent=cohort, min={"cpu": "2"}, max={"cpu": "3"}),
                k.quota(borrower, ns_borrower, parent=cohort, min={"cpu": "2"}),
            )
            cluster.wait_until(
                lambda: k.status("elasticquota", owner, ns_owner).get("conditions"),
                60,
                "the operator to see the quotas",
            )
            for i in range(4):  # no gate: the mutating webhook adds it (and is timed)
                pod = k.pod(f"b-{i}", ns_borrower, {"cpu": "1"})
                pod["spec"].pop("schedulingGates")
                k.create(pod)
            cluster.wait_until(
                lambda: len(k.admitted_pods(ns_borrower)) == 4, 60, "borrower's 4 pods admitted"
            )
            for i in range(3):
                pod = k.pod(f"o-{i}", ns_owner, {"cpu": "1"})
                pod["spec"].pop("schedulingGates")
                k.create(pod)
            cluster.wait_until(
                lambda: len(k.admitted_pods(ns_owner)) == 2, DELAY + 60, "owner's 2 pods in"
            )
            cluster.wait_until(
                lambda: len(k.events(ns_borrower, "Reclaimed")) == 2, 30, "two pods reclaimed"
            )
            yield Story(url, cohort, owner, borrower)
    finally:
        alive = operator.alive
        operator.stop()
        for ns in (ns_owner, ns_borrower):
            cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        assert alive, "the operator died\n" + operator.log_tail()


def _answers(url: str, expr: str) -> list[dict[str, Any]]:
    """The query's series that carry a number (not NaN: a quantile of nothing)."""
    return [r for r in promql(url, expr) if math.isfinite(float(r["value"][1]))]


def test_every_panel_query_returns_series(cluster: ModuleType, story: Story) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    targets = [(p["title"], t) for p in _panels(dashboard) for t in p["targets"]]
    assert len(targets) >= 10
    queries = {_filled(t["expr"], story.cohort) for _, t in targets}

    def all_answer() -> bool:
        return all(_answers(story.prometheus, q) for q in sorted(queries))

    try:
        cluster.wait_until(all_answer, 60, "every panel's query to return series")
    except AssertionError:
        empty = [
            (title, t["expr"])
            for title, t in targets
            if not _answers(story.prometheus, _filled(t["expr"], story.cohort))
        ]
        raise AssertionError(f"queries without data: {empty}") from None
    for title, target in targets:
        series = _answers(story.prometheus, _filled(target["expr"], story.cohort))
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")):
            assert all(label in s["metric"] for s in series), (title, label, series)


def test_the_panels_show_the_story(cluster: ModuleType, story: Story) -> None:
    """A few of the panels' numbers, against what happened."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = {
        p["title"]: [_filled(t["expr"], story.cohort) for t in p["targets"]]
        for p in _panels(dashboard)
    }
    pending = {
        s["metric"]["node"]: float(s["value"][1])
        for s in promql(story.prometheus, exprs["Pending units per Cohort"][0])
    }
    assert pending == {story.cohort: 1}  # owner's third pod
    evictions = _answers(story.prometheus, exprs["Admissions and evictions per quota"][1])
    assert {(s["metric"]["node"], s["metric"]["reason"]) for s in evictions} == {
        (story.borrower, "reclaimed")
    }
    usage = exprs["Cohort usage against runtime, min and max ($resource)"]
    assert [one_value(story.prometheus, q) for q in usage] == [4, 4, 4, 4]


def test_the_variables_list_the_story(cluster: ModuleType, story: Story) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}

    def values(name: str) -> set[str]:
        """`label_values(SELECTOR, LABEL)` as Grafana runs it: the label's values."""
        query = _filled(variables[name]["query"]["query"], story.cohort)
        match = re.fullmatch(r"label_values\((.*), (\w+)\)", query)
        assert match, query
        selector, label = match.groups()
        url = f"{story.prometheus}/api/v1/label/{label}/values?" + urllib.parse.urlencode(
            {"match[]": selector}
        )
        answer: list[str] = json.loads(http_get(url))["data"]
        return set(answer)

    assert "cpu" in values("resource")
    assert story.cohort in values("cohort")
    assert values("quota") == {story.owner, story.borrower}
