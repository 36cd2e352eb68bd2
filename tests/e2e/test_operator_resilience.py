"""The operator under stress: capacity changes, a broken configuration, a SIGKILL mid-burst.

Each test starts its own operator process (short reclaim delay) and checks the cluster
through kubectl only; the restart test compares the end state with `quotree simulate`
(tests/e2e/burst.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.burst import Burst, Sampler
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


def test_node_loss_shrinks_runtimes_and_reclaim_follows_a_waiting_pod(
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
        # Nobody waits for what they hold above their runtimes: past the reclaim delay (3 s),
        # both keep their pods (docs/semantics.md, "Reclaim (getting lent quota back), and
        # only when it pays": reclaim only for a waiting pod that then fits).
        time.sleep(8)
        assert not k.events(ns_x, "Reclaimed")
        assert not k.events(ns_y, "Reclaimed")
        assert k.status("eq", "cap-x", ns_x)["used"] == {"memory": "256Gi"}
        # y lets its pods go, then asks for 6 (192Gi, its scaled guarantee): 4 fit the
        # cluster at once; the other 2 wait for what x holds above its runtime, and take it
        # back after the delay.
        cluster.kubectl("scale", "deployment", "y", "-n", ns_y, "--replicas=0")
        cluster.wait_until(lambda: not k.admitted_pods(ns_y), 60, "y's pods gone")
        cluster.kubectl("scale", "deployment", "y", "-n", ns_y, "--replicas=6")
        waiting_at = time.monotonic()
        cluster.wait_until(lambda: k.events(ns_x, "Reclaimed"), 60, "reclaim for y's waiting pods")
        assert time.monotonic() - waiting_at >= 1.0  # not at once: after the delay
        cluster.wait_until(lambda: len(k.admitted_pods(ns_y)) == 6, 60, "y's 6 pods admitted")
        reclaimed = {e["involvedObject"]["name"] for e in k.events(ns_x, "Reclaimed")}
        assert len(reclaimed) == 2
        message = k.events(ns_x, "Reclaimed")[0]["message"]
        assert "runtime 192Gi" in message
        cluster.wait_until(
            lambda: k.status("eq", "cap-x", ns_x)["used"] == {"memory": "192Gi"},
            60,
            "cap-x back within its runtime",
        )
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

    def restored() -> bool:
        # kwok may give a new node its own default capacity (cpu 1k) after our patch:
        # patch again until the node shows what it had.
        cluster.kubectl(
            "patch", "node", metadata["name"], "--subresource=status", "--type=merge",
            "-p", json.dumps(patch),
        )  # fmt: skip
        time.sleep(1)
        now = cluster.kubectl_json("get", "node", metadata["name"])["status"]
        return bool(now.get("allocatable") == node["status"]["allocatable"])

    cluster.wait_until(restored, 60, "the node's capacity restored")
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


def test_sigkill_mid_burst_then_restart_admits_exactly_what_fits(cluster: ModuleType) -> None:
    # 20 quotas of max 3 cpu under one Cohort, 50 pods of 100m each: 30 fit, 20 wait.
    burst = Burst("burst", quotas=20, pods_per_quota=50, per_quota_max_cpu=3)
    first = start_operator(ENV, log_name="operator-restart-1")
    second: OperatorProcess | None = None
    sampler = Sampler(burst.ns)
    try:
        burst.create_objects()
        sampler.start()
        # Kill the operator once about a third of the pods exist.
        burst.create_pods(after_chunks=6, then=first.kill)
        second = start_operator(ENV, log_name="operator-restart-2")
        cluster.wait_until(burst.settled, 180, "every quota admitted exactly what fits")
        sampler.stop()
        # The first operator's unwritten Admitted events died with it.
        burst.check(sampler, all_announced=False)
        assert first.proc.returncode == -9
    finally:
        sampler.stop()
        first.kill()
        if second is not None:
            alive = second.alive
            second.stop()
            assert alive, second.log_tail()
        burst.cleanup()


def _warnings(ns: str, kind: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in k.events(ns, reason)
        if e.get("type") == "Warning"
        and e["involvedObject"].get("kind") == kind
        and e["involvedObject"].get("name") == name
    ]


def test_a_configuration_that_breaks_warns_and_keeps_its_admitted_pods(
    cluster: ModuleType, operator: OperatorProcess
) -> None:
    s = k.suffix()
    ns, c1, c2 = f"brk-{s}", f"brk1-{s}", f"brk2-{s}"
    try:
        k.apply(
            k.namespace(ns),
            k.cohort(c1, min={"cpu": "2"}),
            k.quota(f"team-{s}", ns, parent=c1, min={"cpu": "1"}),
            k.pod("early-1", ns, {"cpu": "100m"}),
            k.pod("early-2", ns, {"cpu": "100m"}),
        )
        cluster.wait_until(lambda: len(k.admitted_pods(ns)) == 2, 60, "2 pods admitted")
        # The configuration breaks (no webhook to stop it): c1 and c2 make a cycle.
        k.apply(k.cohort(c2, parent=c1, min={"cpu": "1"}))
        k.apply(k.cohort(c1, parent=c2, min={"cpu": "2"}))
        cluster.wait_until(
            lambda: k.condition(k.status("coh", c1), "Valid").get("reason") == "CycleDetected",
            30,
            "the cycle in c1's Valid condition",
        )
        try:
            warning = cluster.wait_until(
                lambda: _warnings("default", "Cohort", c1, "CycleDetected"),
                30,
                "a Warning event on Cohort c1",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{operator.log_tail(40)}") from None
        assert f"{c1} -> " in warning[0]["message"], warning[0]["message"]
        assert len(warning) == 1  # once, not at every status write
        k.apply(k.pod("late", ns, {"cpu": "100m"}))
        cluster.wait_until(
            lambda: [e for e in k.events(ns, "Pending") if e["involvedObject"]["name"] == "late"],
            30,
            "the new pod told why it waits",
        )
        # Longer than the reclaim delay (3 s): the pods admitted before still run.
        time.sleep(6)
        running = sorted(p["metadata"]["name"] for p in k.admitted_pods(ns))
        assert running == ["early-1", "early-2"]
        assert not k.events(ns, "Reclaimed")
        assert not k.events(ns, "Preempted")
        assert len(_warnings("default", "Cohort", c1, "CycleDetected")) == 1
        # Fixed: the new pod is let in.
        cluster.kubectl("patch", "cohort", c1, "--type=json", "-p",
                        '[{"op": "remove", "path": "/spec/parent"}]')  # fmt: skip
        cluster.wait_until(lambda: len(k.admitted_pods(ns)) == 3, 30, "admission after the fix")
    finally:
        _cleanup(cluster, ("namespace", ns), ("cohort", c2), ("cohort", c1))


def test_two_quotas_with_one_name_both_say_so_and_deleting_one_leaves_the_other(
    cluster: ModuleType, operator: OperatorProcess
) -> None:
    s = k.suffix()
    ns1, ns2, name = f"dup1-{s}", f"dup2-{s}", f"dup-{s}"
    try:
        # No webhook runs (as when it is down): the second object gets past validation.
        k.apply(k.namespace(ns1), k.namespace(ns2))
        k.apply(k.quota(name, ns1, min={"cpu": "1"}), k.quota(name, ns2, min={"cpu": "1"}))
        k.apply(k.pod("p", ns1, {"cpu": "100m"}), k.pod("p", ns2, {"cpu": "100m"}))

        def valid(ns: str) -> dict[str, Any]:
            return k.condition(k.status("eq", name, ns), "Valid")

        for ns in (ns1, ns2):
            cluster.wait_until(
                lambda ns=ns: valid(ns).get("reason") == "DuplicateName",
                30,
                f"DuplicateName on the quota in {ns}",
            )
            assert valid(ns)["status"] == "False"
            assert "share the name" in valid(ns)["message"]
            cluster.wait_until(
                lambda ns=ns: _warnings(ns, "ElasticQuota", name, "DuplicateName"),
                30,
                f"a Warning event on the quota in {ns}",
            )
        assert k.admitted_pods(ns1) == k.admitted_pods(ns2) == []  # neither is active
        cluster.kubectl("delete", "elasticquota", name, "-n", ns1)
        # The other stays, becomes valid and active, and admits its pod.
        cluster.wait_until(lambda: valid(ns2).get("status") == "True", 30, "the other valid")
        cluster.wait_until(lambda: len(k.admitted_pods(ns2)) == 1, 30, "its pod admitted")
        cluster.wait_until(
            lambda: k.status("eq", name, ns2).get("admittedPods") == 1,
            30,
            "its status counting the pod (written after the admission)",
        )
        assert k.admitted_pods(ns1) == []
    finally:
        _cleanup(cluster, ("namespace", ns1), ("namespace", ns2))
