"""The metrics port's server: `/metrics`, the read-only tree page (`/`) and `/api/tree`.

`tree_json` is what `/api/tree` answers, `PAGE` the HTML that polls it, `start` serves
them with the metrics of metrics.py (the entry point calls it on every replica).

The numbers are the ones the status writer writes (`status.desired`), so the page and
`kubectl get eq,coh` agree. Nothing secret is in it (quota specs and status, pod names and
why they wait), and it offers no action: it is a GET-only view that polls `/api/tree`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from quotree.engine import Engine, PodState
from quotree.quantity import is_unlimited
from quotree_operator.desired_status import desired, quantities
from quotree_operator.metrics import METRICS, Metrics

__all__ = ["MAX_PENDING", "PAGE", "metrics_app", "serve", "start", "tree_json"]

logger = logging.getLogger("quotree.operator")

#: Waiting units listed on the page, first in the engine's order (the counts are exact).
MAX_PENDING = 200


def tree_json(
    engine: Engine,
    *,
    bad_configs: Mapping[str, str] | None = None,
    leading: bool = False,
    identity: str = "",
) -> dict[str, Any]:
    """The tree in display order (parents before children), and the waiting units in the
    order the engine takes them, with their positions and reasons."""
    engine.refresh()  # the explicit step before reading the trees
    configs = engine.all_configs()
    children: dict[str | None, list[str]] = {}
    for name, config in configs.items():
        parent = config.parent if config.parent in configs else None
        children.setdefault(parent, []).append(name)
    members: list[dict[str, Any]] = []
    planner, now = engine.decider.planner, time.monotonic()

    def walk(name: str, depth: int, seen: set[str]) -> None:
        if name in seen:
            return
        seen.add(name)
        config = configs[name]
        leaf = config.kind == "ElasticQuota"
        status = desired(engine, name, leaf, (bad_configs or {}).get(name)).status
        members.append(
            {
                "name": name,
                "kind": config.kind,
                "tree": config.tree,
                "namespace": config.namespace,
                "parent": config.parent,
                "depth": depth,
                "min": quantities(config.min),
                "max": quantities({r: a for r, a in config.max.items() if not is_unlimited(a)}),
                "request": status["request"],
                "runtime": status["runtime"],
                "used": status["used"],
                "admittedPods": status.get("admittedPods"),
                "pendingPods": status.get("pendingPods"),
                "admittedGroups": status.get("admittedGroups"),
                "pendingGroups": status.get("pendingGroups"),
                "conditions": status["conditions"],
                # seconds its longest-waiting pod waits for lent quota past the reclaim delay
                "reclaimOverdue": planner.overdue(name, now) if leaf else None,
            }
        )
        for kid in sorted(children.get(name, [])):
            walk(kid, depth + 1, seen)

    seen: set[str] = set()
    for top in sorted(children.get(None, [])):
        walk(top, 0, seen)
    for name in sorted(set(configs) - seen):  # parent chains that are cycles
        walk(name, 0, seen)
    pending = sum(1 for r in engine.pods.values() if r.state is PodState.PENDING)
    units = engine.waiting(MAX_PENDING)
    return {
        "generated": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "leader": leading,
        "identity": identity,
        "capacity": quantities(engine.tree.capacity),
        "nodes": members,
        "pendingCount": pending,
        # The waiting units in the engine's order (`Engine.waiting`): "pod" is the unit's
        # key, a pod's or a pod group's.
        "pending": [
            {
                "pod": unit.key,
                "kind": "PodGroup" if unit.group else "Pod",
                "quota": unit.quota,
                "order": unit.order,
                "positions": [[member, position] for member, position in unit.positions],
                "priority": unit.priority,
                "reason": unit.reason,
            }
            for unit in units[:MAX_PENDING]
        ],
    }


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>quotree</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2330; }
  h1 { font-size: 1.3em; margin: 0 0 .2em; }
  .meta { color: #667; margin-bottom: 1em; }
  .node { border-left: 3px solid #c9d2e3; padding: .3em .8em; margin: .4em 0; }
  .node.coh { border-color: #6b7fa8; }
  .node.inactive { border-color: #c0392b; }
  .title { font-weight: 600; }
  .kind { color: #667; font-weight: 400; margin-left: .4em; }
  .cond { font-size: .85em; color: #667; margin-left: .6em; }
  .cond.bad { color: #c0392b; }
  table.res { border-collapse: collapse; margin: .2em 0; }
  table.res td { padding: .1em .6em .1em 0; white-space: nowrap; }
  .num { font-variant-numeric: tabular-nums; text-align: right; }
  .bar { position: relative; width: 260px; height: 14px; background: #eef1f6; }
  .bar .runtime { position: absolute; top: 0; bottom: 0; left: 0; background: #cfe0f7; }
  .bar .used { position: absolute; top: 3px; bottom: 3px; left: 0; background: #2f6fd6; }
  .bar .used.above { background: #7f9fce; }
  .overdue { color: #d9822b; }
  .bar .min { position: absolute; top: -2px; bottom: -2px; width: 2px; background: #1d7a3a; }
  .bar .max { position: absolute; top: -2px; bottom: -2px; width: 2px; background: #c0392b; }
  .legend span { margin-right: 1em; }
  .sw { display: inline-block; width: 10px; height: 10px; margin-right: .3em; }
  #pending td, #pending th { padding: .1em .8em .1em 0; vertical-align: top; text-align: left; }
  #pending td.unit { white-space: nowrap; }
  #error { color: #c0392b; }
</style>
</head>
<body>
<h1>quotree</h1>
<div class="meta" id="meta">loading…</div>
<div class="legend">
  <span><i class="sw" style="background:#2f6fd6"></i>used</span>
  <span><i class="sw" style="background:#7f9fce"></i>above runtime (normal: nobody waits)</span>
  <span><i class="sw" style="background:#cfe0f7"></i>runtime</span>
  <span><i class="sw" style="background:#1d7a3a"></i>min</span>
  <span><i class="sw" style="background:#c0392b"></i>max</span>
</div>
<div id="error"></div>
<div id="tree"></div>
<h2 style="font-size:1.1em">Waiting, in the order quotree admits them
<span id="pending-count"></span></h2>
<table id="pending"><thead><tr><th>#</th><th>pod or group</th>
<th>position in its quota · under each Cohort</th><th>priority</th><th>reason</th></tr></thead>
<tbody></tbody></table>
<script>
"use strict";
const UNITS = {"": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18, m: 1e-3, u: 1e-6,
  n: 1e-9, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, Pi: 1024 ** 5, Ei: 1024 ** 6};
function num(q) {
  if (q === undefined || q === null) return 0;
  const m = /^([0-9.]+(?:e[0-9]+)?)([a-zA-Z]*)$/.exec(String(q));
  return m ? parseFloat(m[1]) * (UNITS[m[2]] || 1) : 0;
}
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function cell(node, resource, field, value) {
  return el("td", {"class": "num", "data-node": node, "data-resource": resource,
    "data-field": field}, value === undefined ? "-" : value);
}
function bar(n, r) {
  const used = num(n.used[r]), runtime = num(n.runtime[r]), min = num(n.min[r]);
  const max = n.max[r] === undefined ? null : num(n.max[r]);
  const scale = Math.max(used, runtime, min, max || 0, num(n.request[r]), 1e-9);
  const pct = (x) => (100 * x / scale).toFixed(2) + "%";
  const b = el("div", {"class": "bar", title: `used ${n.used[r] || 0} / runtime ` +
    `${n.runtime[r] || 0} / min ${n.min[r] || 0} / max ${n.max[r] || "unlimited"}`});
  b.appendChild(el("div", {"class": "runtime", style: `width:${pct(runtime)}`}));
  b.appendChild(el("div", {"class": used > runtime ? "used above" : "used",
    style: `width:${pct(used)}`}));
  b.appendChild(el("div", {"class": "min", style: `left:${pct(min)}`}));
  if (max !== null) {
    b.appendChild(el("div", {"class": "max", style: `left:calc(${pct(max)} - 2px)`}));
  }
  return b;
}
function render(data) {
  document.getElementById("meta").textContent =
    `replica ${data.identity || "?"} (${data.leader ? "leader: acts" : "standby"}) · ` +
    `capacity ${Object.entries(data.capacity).map(([r, q]) => r + " " + q).join(", ") || "none"}` +
    ` · updated ${data.generated}`;
  const tree = document.getElementById("tree");
  tree.replaceChildren();
  for (const n of data.nodes) {
    const valid = n.conditions.find((c) => c.type === "Active");
    const active = !valid || valid.status === "True";
    const box = el("div", {"class": "node " + (n.kind === "Cohort" ? "coh" : "eq") +
      (active ? "" : " inactive"), "data-node": n.name,
      style: `margin-left:${1.6 * n.depth}em`});
    const title = el("div", {"class": "title"}, n.name);
    title.appendChild(el("span", {"class": "kind"}, n.kind === "Cohort" ? "Cohort" :
      `ElasticQuota in ${n.namespace}`));
    if (n.admittedPods !== null && n.admittedPods !== undefined) {
      title.appendChild(el("span", {"class": "kind", "data-node": n.name,
        "data-field": "pods"}, `${n.admittedPods} admitted, ${n.pendingPods} pending`));
    }
    if (n.admittedGroups || n.pendingGroups) {
      title.appendChild(el("span", {"class": "kind", "data-node": n.name,
        "data-field": "groups"},
        `pod groups: ${n.admittedGroups} admitted, ${n.pendingGroups} pending`));
    }
    if (n.reclaimOverdue > 0) {
      title.appendChild(el("span", {"class": "cond overdue", "data-node": n.name,
        "data-field": "overdue"}, `a pod waits for lent quota ` +
        `${Math.round(n.reclaimOverdue)} s past the reclaim delay`));
    }
    for (const c of n.conditions) {
      if (c.status !== "True") {
        title.appendChild(el("span", {"class": "cond bad"}, `${c.type}: ${c.message}`));
      }
    }
    box.appendChild(title);
    const resources = [...new Set([...Object.keys(n.min), ...Object.keys(n.max),
      ...Object.keys(n.runtime), ...Object.keys(n.used)])].sort();
    const table = el("table", {"class": "res"});
    const head = el("tr");
    for (const h of ["resource", "", "used", "runtime", "min", "max", "request"]) {
      head.appendChild(el("td", {"class": "kind"}, h));
    }
    table.appendChild(head);
    for (const r of resources) {
      const row = el("tr");
      row.appendChild(el("td", {}, r));
      const bcell = el("td");
      bcell.appendChild(bar(n, r));
      row.appendChild(bcell);
      row.appendChild(cell(n.name, r, "used", n.used[r] || "0"));
      row.appendChild(cell(n.name, r, "runtime", n.runtime[r] || "0"));
      row.appendChild(cell(n.name, r, "min", n.min[r] || "0"));
      row.appendChild(cell(n.name, r, "max", n.max[r] === undefined ? "-" : n.max[r]));
      row.appendChild(cell(n.name, r, "request", n.request[r] || "0"));
      table.appendChild(row);
    }
    box.appendChild(table);
    tree.appendChild(box);
  }
  const count = data.pendingCount;
  document.getElementById("pending-count").textContent =
    `(${count} pod${count === 1 ? "" : "s"})`;
  const body = document.querySelector("#pending tbody");
  body.replaceChildren();
  for (const p of data.pending) {
    const row = el("tr", {"data-pod": p.pod, "data-order": String(p.order)});
    row.appendChild(el("td", {"class": "num"}, String(p.order)));
    const unit = p.kind === "PodGroup" ? `${p.pod} (group)` : p.pod;
    row.appendChild(el("td", {"class": "unit"}, unit));
    row.appendChild(el("td", {}, p.positions.map(([m, at]) => `${m} ${at}`).join(" · ")));
    row.appendChild(el("td", {"class": "num"}, String(p.priority)));
    row.appendChild(el("td", {}, p.reason));
    body.appendChild(row);
  }
  document.body.setAttribute("data-loaded", data.generated);
}
async function refresh() {
  try {
    const response = await fetch("api/tree", {cache: "no-store"});
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    render(await response.json());
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = `cannot load the tree: ${e.message}`;
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
"""


def metrics_app(
    metrics: Metrics, data: Callable[[], Mapping[str, object]] | None = None
) -> web.Application:
    """`/metrics`, and with `data` (e.g. `tree_json`) the page (`/`) and `/api/tree`."""

    async def scrape(_: web.Request) -> web.Response:
        body = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    if data is not None:
        source = data

        async def page(_: web.Request) -> web.Response:
            return web.Response(
                text=PAGE,
                content_type="text/html",
                headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
            )

        async def api(_: web.Request) -> web.Response:
            return web.json_response(source(), headers={"Cache-Control": "no-store"})

        app.router.add_get("/", page)
        app.router.add_get("/api/tree", api)
    return app


async def serve(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Start serving `app`; the caller keeps the runner and calls `cleanup()` at exit."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    logger.info("metrics and the tree page at http://%s:%d/ (/metrics, /api/tree)", host, port)
    return runner


async def start(
    host: str, port: int, data: Callable[[], Mapping[str, object]]
) -> web.AppRunner | None:
    """Serve METRICS and the page; None when turned off (port 0) or the port is taken.

    A metrics port that cannot be opened is logged, not fatal: admissions matter more.
    """
    if port == 0:
        return None
    try:
        return await serve(metrics_app(METRICS, data), host, port)
    except OSError as exc:
        logger.error(
            "metrics: cannot listen on %s:%d (%s); running without metrics and the page",
            host,
            port,
            exc.strerror or exc,
        )
        return None
