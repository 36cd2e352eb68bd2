"""The operator under stress: capacity changes, a broken configuration, a SIGKILL mid-burst.

Each test starts its own operator process (short reclaim delay) and checks the cluster
through kubectl only; the restart test compares the end state with `quotree simulate`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from quotree.engine import Engine
from quotree.models import parse_node, pod_facts
from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, start_operator

ENV = {"QUOTREE_RECLAIM_DELAY": "3", "QUOTREE_WEBHOOKS": "0"}


@pytest.fixture
def operator(cluster: ModuleType) -> Iterator[OperatorProcess]:
    proc = start_operator(ENV, log_name="operator-resilience")
    yield proc
    alive = proc.alive
    proc.stop()
    assert alive, "the operator died\n" + proc.log_tail()


def _cleanup(cluster: ModuleType, *objects: tuple[str, str]) -> None:
    for kind, name in objects:
        cluster.kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)


def test_node_loss_shrinks_runtimes_and_reclaim_follows(
    cluster: ModuleType, operator: OperatorProcess
) -> None:
    # Memory, which no other test uses: 4 nodes x 128Gi. x and y each hold their min (256Gi).
    s = k.suffix()
    ns_x, ns_y = f"capx-{s}", f"capy-{s}"
    node = cluster.kubectl_json("get", "node", "quotree-node-3")
    try:
        k.apply(
            k.namespace(ns_x),
            k.namespace(ns_y),
            k.quota("cap-x", ns_x, min={"memory": "256Gi"}),
            k.quota("cap-y", ns_y, min={"memory": "256Gi"}),
            k.deployment("x", ns_x, 8, {"memory": "32Gi"}),
            k.deployment("y", ns_y, 8, {"memory": "32Gi"}),
        )
        cluster.wait_until(
            lambda: len(k.admitted_pods(ns_x)) == 8 and len(k.admitted_pods(ns_y)) == 8,
            90,
            "16 pods admitted",
        )
        cluster.kubectl("delete", "node", "quotree-node-3")
        # 384Gi left: the mins scale to 192Gi each, and each quota is 64Gi over.
        cluster.wait_until(
            lambda: (
                k.status("eq", "cap-x", ns_x)["runtime"] == {"memory": "192Gi"}
                and k.status("eq", "cap-y", ns_y)["runtime"] == {"memory": "192Gi"}
            ),
            30,
            "runtimes to shrink to 192Gi",
        )
        shrunk_at = time.monotonic()
        cluster.wait_until(
            lambda: k.events(ns_x, "Reclaimed") and k.events(ns_y, "Reclaimed"),
            60,
            "reclaim after the delay",
        )
        assert time.monotonic() - shrunk_at >= 1.0  # not at once: after the delay
        for ns, name in ((ns_x, "cap-x"), (ns_y, "cap-y")):
            cluster.wait_until(
                lambda ns=ns, name=name: (
                    k.status("eq", name, ns)["used"]["memory"] in ("192Gi", "160Gi")
                ),
                60,
                f"{name} back within its runtime",
            )
            message = k.events(ns, "Reclaimed")[0]["message"]
            assert "runtime 192Gi" in message
    finally:
        _cleanup(cluster, ("namespace", ns_x), ("namespace", ns_y))
        _restore_node(cluster, node)


def _restore_node(cluster: ModuleType, node: dict[str, Any]) -> None:
    if cluster.kubectl("get", "node", node["metadata"]["name"], check=False).returncode == 0:
        return
    metadata = {
        key: node["metadata"][key]
        for key in ("name", "labels", "annotations")
        if key in node["metadata"]
    }
    body = {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": {}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(body))
    patch = {"status": {k: node["status"][k] for k in ("allocatable", "capacity")}}
    cluster.kubectl(
        "patch", "node", metadata["name"], "--subresource=status", "--type=merge",
        "-p", json.dumps(patch),
    )  # fmt: skip
    cluster.wait_until(
        lambda: any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in cluster.kubectl_json("get", "node", metadata["name"])["status"].get(
                "conditions", []
            )
        ),
        60,
        "the node back and Ready",
    )


def test_broken_configuration_stops_only_its_subtree(
    cluster: ModuleType, operator: OperatorProcess
) -> None:
    s = k.suffix()
    ns_bad, ns_good, ns_sum = f"bad-{s}", f"good-{s}", f"sum-{s}"
    c1, c2, over = f"cyc1-{s}", f"cyc2-{s}", f"over-{s}"
    try:
        # No webhook runs: these objects get past validation, as after a bypass or a race.
        k.apply(
            k.namespace(ns_bad),
            k.namespace(ns_good),
            k.namespace(ns_sum),
            k.cohort(c1, parent=c2, min={"cpu": "1"}),
            k.cohort(c2, parent=c1, min={"cpu": "1"}),
            k.cohort(over, min={"cpu": "1"}),
            k.quota("orphan", ns_bad, parent=f"missing-{s}", min={"cpu": "1"}),
            k.quota("greedy", ns_sum, parent=over, min={"cpu": "2"}),
            k.quota("fine", ns_good, min={"cpu": "1"}),
        )
        k.apply(
            k.pod("waits", ns_bad, {"cpu": "100m"}),
            k.pod("waits-too", ns_sum, {"cpu": "100m"}),
            k.pod("runs", ns_good, {"cpu": "100m"}),
        )
        cluster.wait_until(
            lambda: [p["metadata"]["name"] for p in k.admitted_pods(ns_good)] == ["runs"],
            60,
            "the healthy quota to admit",
        )

        def valid(kind: str, name: str, ns: str | None = None) -> dict[str, Any]:
            return k.condition(k.status(kind, name, ns), "Valid")

        cluster.wait_until(
            lambda: valid("coh", c1).get("reason") == "CycleDetected", 30, "cycle reported"
        )
        assert valid("coh", c1)["status"] == "False"
        assert f"{c1} -> " in valid("coh", c1)["message"]
        orphan = valid("eq", "orphan", ns_bad)
        assert orphan["status"] == "False"
        assert orphan["reason"] == "ParentNotFound"
        assert f"parent Cohort missing-{s} does not exist" in orphan["message"]
        over_valid = valid("coh", over)
        assert over_valid["reason"] == "MinSumExceeded"
        assert "over its own min of 1" in over_valid["message"]
        greedy_active = k.condition(k.status("eq", "greedy", ns_sum), "Active")
        assert greedy_active["status"] == "False"
        assert valid("eq", "fine", ns_good)["status"] == "True"
        # The broken subtrees admit nothing, and say why.
        assert k.admitted_pods(ns_bad) == []
        assert k.admitted_pods(ns_sum) == []
        pending = cluster.wait_until(
            lambda: k.events(ns_bad, "Pending"), 30, "a Pending event for the orphan's pod"
        )
        assert "does not exist" in pending[0]["message"]
        assert operator.alive
        # Fixing the configuration lets the pod in.
        k.apply(k.cohort(f"missing-{s}", min={"cpu": "1"}))
        cluster.wait_until(lambda: k.admitted_pods(ns_bad), 30, "admission after the fix")
    finally:
        _cleanup(
            cluster,
            ("namespace", ns_bad),
            ("namespace", ns_good),
            ("namespace", ns_sum),
            ("cohort", c1),
            ("cohort", c2),
            ("cohort", over),
            ("cohort", f"missing-{s}"),
        )


QUOTAS = 20
PODS = 1000
POD_CPU = "100m"


def _simulate(docs: list[dict[str, Any]], capacity_cpu: str) -> dict[str, Any]:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "all"},
        "status": {"allocatable": {"cpu": capacity_cpu}},
    }
    path = Path(k.cluster.RUN_DIR) / "restart-simulate.yaml"
    path.write_text(yaml.safe_dump_all([node, *docs]))
    out = subprocess.run(
        [str(Path(sys.executable).with_name("quotree")), "simulate", str(path), "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _over_runtime(
    configs: list[dict[str, Any]], snapshot: list[tuple[str, str, bool]], ns: str, total_cpu: int
) -> dict[str, tuple[int, int]]:
    """Quotas whose admitted cpu is above the runtime the engine gives this snapshot."""
    engine = Engine()
    engine.set_cluster_node("all", {"cpu": total_cpu * 1000})
    for doc in configs:
        engine.set_config(parse_node(doc))
    for name, quota_name, gated in snapshot:
        body = k.pod(name, ns, {"cpu": POD_CPU}, labels={"quotree.io/quota-name": quota_name})
        if not gated:
            body["spec"]["schedulingGates"] = []
        engine.observe_pod(pod_facts(body))
    engine.tree.settle()
    out = {}
    for doc in configs:
        if doc["kind"] != "ElasticQuota":
            continue
        report = engine.report(doc["metadata"]["name"])
        if report.used.get("cpu", 0) > report.runtime.get("cpu", 0):
            out[doc["metadata"]["name"]] = (report.used["cpu"], report.runtime["cpu"])
    return out


def test_sigkill_mid_burst_then_restart_admits_exactly_what_fits(cluster: ModuleType) -> None:
    s = k.suffix()
    ns, top = f"burst-{s}", f"burst-{s}"
    quotas = [
        k.quota(f"q{i:02d}-{s}", ns, parent=top, min={"cpu": "1"}, max={"cpu": "3"})
        for i in range(QUOTAS)
    ]
    setup = [k.namespace(ns), k.cohort(top, min={"cpu": "20"}, max={"cpu": "60"}), *quotas]
    pods = [
        k.pod(
            f"p{i:04d}",
            ns,
            {"cpu": POD_CPU},
            labels={"quotree.io/quota-name": f"q{i % QUOTAS:02d}-{s}"},
        )
        for i in range(PODS)
    ]
    per_quota_fit = 30  # max 3 cpu / 100m
    first = start_operator(ENV, log_name="operator-restart-1")
    second: OperatorProcess | None = None
    # Each sample is one consistent list of the pods: (name, quota, gated) of the live ones.
    samples: list[list[tuple[str, str, bool]]] = []
    stop_sampling = threading.Event()

    def sample() -> None:
        while not stop_sampling.is_set():
            try:
                items = k.pods(ns)
            except Exception:  # a failed sample is just skipped
                continue
            samples.append(
                [
                    (
                        p["metadata"]["name"],
                        p["metadata"]["labels"]["quotree.io/quota-name"],
                        k.gated(p),
                    )
                    for p in items
                    if k.live(p)
                ]
            )
            time.sleep(0.3)

    try:
        k.apply(*setup)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        chunks = [pods[i : i + 50] for i in range(0, PODS, 50)]
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = [pool.submit(k.create, *chunk) for chunk in chunks]
            # Kill the operator once about a third of the pods exist.
            cluster.wait_until(
                lambda: sum(f.done() for f in futures) >= 6, 120, "a third of the burst"
            )
            first.kill()
            for future in futures:
                future.result()
        second = start_operator(ENV, log_name="operator-restart-2")

        def settled() -> bool:
            counts = [k.status("eq", q["metadata"]["name"], ns) for q in quotas]
            return all(
                c.get("admittedPods") == per_quota_fit
                and c.get("pendingPods") == PODS // QUOTAS - per_quota_fit
                for c in counts
            )

        cluster.wait_until(settled, 180, "every quota admitted exactly what fits")
        stop_sampling.set()
        sampler.join(timeout=10)
        # At no sampled moment is any quota's admitted usage above its runtime. A sample is
        # one consistent list, and during a burst runtimes only grow (requests only grow and
        # the Cohort's max fits in the cluster), so whatever the operator admitted on an
        # older view still fits: the allowance for pods in flight is 0 here.
        allocatable = cluster.kubectl_json("get", "nodes")["items"]
        total_cpu = sum(int(n["status"]["allocatable"]["cpu"]) for n in allocatable)
        assert len(samples) >= 5, f"only {len(samples)} samples"
        for index, snapshot in enumerate(samples):
            over = _over_runtime(setup[1:], snapshot, ns, total_cpu)
            assert not over, f"sample {index} of {len(samples)}: {over}"
        # Never admitted twice: at most one Admitted event per pod.
        admitted_events = Counter(e["involvedObject"]["name"] for e in k.events(ns, "Admitted"))
        assert max(admitted_events.values()) == 1
        # The end state matches the offline simulator fed the same objects.
        expected = _simulate([*setup[1:], *pods], str(total_cpu))
        for name in [q["metadata"]["name"] for q in quotas] + [top]:
            st = k.status("eq" if name != top else "coh", name, None if name == top else ns)
            sim = expected["nodes"][name]
            for field in ("runtime", "used", "request", "admittedPods", "pendingPods"):
                assert st.get(field, 0) == sim[field], (name, field, st.get(field), sim[field])
        sim_admitted = sum(1 for p in expected["pods"].values() if p["state"] == "admitted")
        assert len(k.admitted_pods(ns)) == sim_admitted == QUOTAS * per_quota_fit
        assert first.proc.returncode == -9
    finally:
        stop_sampling.set()
        first.kill()
        if second is not None:
            alive = second.alive
            second.stop()
            assert alive, second.log_tail()
        _cleanup(cluster, ("namespace", ns), ("cohort", top))
