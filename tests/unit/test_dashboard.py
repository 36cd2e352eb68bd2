"""The Grafana dashboard (manifests/monitoring/dashboard.json), read as Grafana reads it (no
cluster): its panels, their queries and the metrics they name. Its queries are run against
a real Prometheus scraping the operator in tests/e2e/test_dashboard.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "manifests" / "monitoring" / "dashboard.json"


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel but rows, rows' collapsed panels included."""
    out = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            out += panel.get("panels", [])
        else:
            out.append(panel)
    return out


def _documented_metrics() -> set[str]:
    text = (ROOT / "docs" / "observability.md").read_text()
    return set(re.findall(r"^\| `(quotree_\w+)` \| (?:gauge|counter|histogram) \|", text, re.M))


def test_every_panel_queries_the_chosen_prometheus() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]] + [
        p["id"] for row in dashboard["panels"] for p in row.get("panels", [])
    ]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "resource", "cohort", "quota"} <= variables
    for panel in panels(dashboard):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]


def test_the_panels_name_only_documented_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    documented = _documented_metrics()
    named: set[str] = set()
    for panel in panels(dashboard):
        for target in panel["targets"]:
            for metric in re.findall(r"quotree_\w+", target["expr"]):
                named.add(re.sub(r"_(bucket|sum|count)$", "", metric))
    assert named <= documented, named - documented
    # What the dashboard is for: usage against runtime, min and max, pending, latency.
    for needed in (
        "quotree_used",
        "quotree_runtime",
        "quotree_min",
        "quotree_max",
        "quotree_pending_units",
        "quotree_admission_wait_seconds",
        "quotree_evictions_total",
    ):
        assert needed in named, needed
