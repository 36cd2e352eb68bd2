"""A burst of a few hundred pods under one Cohort, sampled and checked (operator e2e tests).

Shared by the tests that disturb the operator or its control plane mid-burst
(test_operator_resilience.py, test_control_plane_faults.py). Everything is read through
kubectl; the expected end state is `quotree simulate` of the same objects.

- ``Burst(quotas, pods_per_quota, ...)``: the objects (a namespace, a Cohort, ElasticQuotas of
  min 1 / max `per_quota_max` cpu under it, pods of POD_CPU labelled round-robin);
- ``Burst.create_pods(after_chunks=..., then=...)``: creates the pods in chunks (a chunk that
  fails while the API is away is created again; pods that exist already count as created),
  calling ``then()`` once ``after_chunks`` chunks are in;
- ``Sampler(ns)``: a thread listing the pods every `interval` s; each sample is one list's
  (name, quota, gated) of the live pods;
- ``Burst.settled()``, ``Burst.check(samples)``: every quota admitted exactly what fits, no
  sample above a runtime, every pod admitted once (one Admitted event) or waiting with a
  Pending event, and the statuses equal to `quotree simulate`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from quotree.engine import Engine
from quotree.models import parse_member
from quotree.podfacts import pod_facts
from quotree.quantity import parse_quantity
from tests.e2e import cluster
from tests.e2e import kube_helpers as k

#: The operator's summary of admissions beyond the per-pod event budget (event_budget.py).
SUMMARY = re.compile(r"^admitted (\d+) more pods to ElasticQuota (\S+) ")

POD_CPU = "100m"
POD_MILLI = 100
QUOTA_LABEL = "quotree.io/quota-name"


def simulate(docs: list[dict[str, Any]], capacity_cpu: str, name: str) -> dict[str, Any]:
    """`quotree simulate -o json` of `docs` on one node of `capacity_cpu`."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "all"},
        "status": {"allocatable": {"cpu": capacity_cpu}},
    }
    path = Path(cluster.RUN_DIR) / f"{name}-simulate.yaml"
    path.write_text(yaml.safe_dump_all([node, *docs]))
    out = subprocess.run(
        [str(Path(sys.executable).with_name("quotree")), "simulate", str(path), "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def over_runtime(
    configs: list[dict[str, Any]], snapshot: list[tuple[str, str, bool]], ns: str, total_cpu: int
) -> dict[str, tuple[int, int]]:
    """Quotas whose admitted cpu is above the runtime the engine gives this snapshot."""
    engine = Engine()
    engine.set_cluster_node("all", {"cpu": total_cpu * 1000})
    for doc in configs:
        engine.set_config(parse_member(doc))
    for name, quota_name, gated in snapshot:
        body = k.pod(name, ns, {"cpu": POD_CPU}, labels={QUOTA_LABEL: quota_name})
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


class Sampler:
    """Lists the pods of `ns` every `interval` seconds in a thread (see module docstring)."""

    def __init__(self, ns: str, interval: float = 0.3) -> None:
        self.ns = ns
        self.interval = interval
        self.samples: list[list[tuple[str, str, bool]]] = []
        self.failed = 0  # lists that failed (the API was away): skipped
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                items = k.pods(self.ns)
            except Exception:  # the API is away: this sample is skipped
                self.failed += 1
                time.sleep(self.interval)
                continue
            self.samples.append(
                [
                    (p["metadata"]["name"], p["metadata"]["labels"][QUOTA_LABEL], k.gated(p))
                    for p in items
                    if k.live(p)
                ]
            )
            time.sleep(self.interval)


def create_retrying(docs: list[dict[str, Any]], timeout: float = 180) -> None:
    """`kubectl create` the pods, again while the API is away; existing ones count as made."""
    deadline = time.monotonic() + timeout
    while True:
        listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
        out = cluster.kubectl("create", "-f", "-", input=listed, check=False, timeout=120)
        errors = [line for line in out.stderr.splitlines() if line.strip()]
        if out.returncode == 0 or all("AlreadyExists" in line for line in errors):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"could not create the pods: {out.stderr[-500:]}")
        time.sleep(1)


class Burst:
    """See module docstring."""

    def __init__(
        self, name: str, quotas: int, pods_per_quota: int, per_quota_max_cpu: int = 2
    ) -> None:
        s = k.suffix()
        self.name = name
        self.ns = self.top = f"{name}-{s}"
        self.quota_names = [f"q{i:02d}-{s}" for i in range(quotas)]
        self.quotas = [
            k.quota(
                q, self.ns, parent=self.top, min={"cpu": "1"}, max={"cpu": str(per_quota_max_cpu)}
            )
            for q in self.quota_names
        ]
        cohort = k.cohort(
            self.top, min={"cpu": str(quotas)}, max={"cpu": str(quotas * per_quota_max_cpu)}
        )
        self.configs = [cohort, *self.quotas]
        self.pods = [
            k.pod(
                f"p{i:04d}",
                self.ns,
                {"cpu": POD_CPU},
                labels={QUOTA_LABEL: self.quota_names[i % quotas]},
            )
            for i in range(quotas * pods_per_quota)
        ]
        self.fit = per_quota_max_cpu * 1000 // POD_MILLI  # pods each quota admits
        self.waiting = pods_per_quota - self.fit

    def create_objects(self) -> None:
        k.apply(k.namespace(self.ns), *self.configs)

    def create_pods(
        self, after_chunks: int | None = None, then: Callable[[], None] | None = None
    ) -> None:
        """Create the pods in chunks of 50 (two at a time); `then()` after `after_chunks`."""
        chunks = [self.pods[i : i + 50] for i in range(0, len(self.pods), 50)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(create_retrying, chunk) for chunk in chunks]
            if then is not None:
                cluster.wait_until(
                    lambda: sum(f.done() for f in futures) >= (after_chunks or 0),
                    120,
                    f"{after_chunks} chunks of pods created",
                    interval=0.1,
                )
                then()
            for future in futures:
                future.result()

    def settled(self) -> bool:
        """Every quota shows that it admitted exactly what fits and the rest waits."""
        for name in self.quota_names:
            st = k.status("eq", name, self.ns)
            if st.get("admittedPods") != self.fit or st.get("pendingPods") != self.waiting:
                return False
        return True

    def total_cpu(self) -> int:
        """The cluster's allocatable cpu, in whole cpus (a node may show e.g. "1k")."""
        allocatable = cluster.kubectl_json("get", "nodes")["items"]
        milli = sum(parse_quantity(n["status"]["allocatable"]["cpu"], "cpu") for n in allocatable)
        return milli // 1000

    def check(self, sampler: Sampler, min_samples: int = 5, *, all_announced: bool = True) -> None:
        """The checks of the module docstring, on the settled burst.

        `all_announced=False`: an operator was killed, and the Admitted events it had not
        written yet are lost with it; then only "never announced twice" is checked.
        """
        total_cpu = self.total_cpu()
        # At no sampled moment is a quota's admitted usage above its runtime. A sample is
        # one consistent list, and during a burst runtimes only grow (requests only grow
        # and the Cohort's max fits in the cluster), so the allowance for pods in flight
        # is 0 here.
        samples = sampler.samples
        assert len(samples) >= min_samples, f"only {len(samples)} samples"
        for index, snapshot in enumerate(samples):
            over = over_runtime(self.configs, snapshot, self.ns, total_cpu)
            assert not over, f"sample {index} of {len(samples)}: {over}"
        # Every pod is admitted exactly once, or waits and was told why.
        live = [p for p in k.pods(self.ns) if k.live(p)]
        admitted = {p["metadata"]["name"] for p in live if not k.gated(p)}
        waiting = {p["metadata"]["name"] for p in live if k.gated(p)}
        assert len(live) == len(self.pods)
        announced = Counter(
            e["involvedObject"]["name"]
            for e in k.events(self.ns, "Admitted")
            if e["involvedObject"].get("kind") == "Pod"
        )
        twice = {name: n for name, n in announced.items() if n > 1}
        assert not twice, f"admitted more than once: {twice}"
        gated_but_announced = sorted(set(announced) - admitted)
        assert not gated_but_announced, f"Admitted event but gated: {gated_but_announced[:5]}"
        if all_announced:
            # Per-pod Admitted events are budgeted (operator event_budget.py); the pods beyond
            # the budget are counted in one Admitted event on their ElasticQuota every 10 s.
            quota_of = {
                p["metadata"]["name"]: p["metadata"]["labels"].get(QUOTA_LABEL) for p in live
            }
            unannounced = Counter(quota_of[name] for name in admitted - set(announced))
            cluster.wait_until(
                lambda: all(
                    self._summarised().get(quota, 0) >= count
                    for quota, count in unannounced.items()
                ),
                40,
                f"Admitted events for every admitted pod (per pod or summed on the quota): "
                f"{dict(unannounced)} without their own",
            )
        told = {e["involvedObject"]["name"] for e in k.events(self.ns, "Pending")}
        assert waiting <= told, f"waiting without a Pending event: {sorted(waiting - told)[:5]}"
        # The end state equals the offline simulator fed the same objects.
        expected = simulate([*self.configs, *self.pods], str(total_cpu), self.name)
        for name in [*self.quota_names, self.top]:
            is_top = name == self.top
            st = k.status("coh" if is_top else "eq", name, None if is_top else self.ns)
            sim = expected["nodes"][name]
            for field in ("runtime", "used", "request", "admittedPods", "pendingPods"):
                assert st.get(field, 0) == sim[field], (name, field, st.get(field), sim[field])
        sim_admitted = sum(1 for p in expected["pods"].values() if p["state"] == "admitted")
        assert len(admitted) == sim_admitted == len(self.quota_names) * self.fit

    def _summarised(self) -> Counter[str]:
        """Per ElasticQuota, how many admissions its summary Admitted events counted."""
        counted: Counter[str] = Counter()
        for event in k.events(self.ns, "Admitted"):
            if event["involvedObject"].get("kind") != "ElasticQuota":
                continue
            found = SUMMARY.match(event.get("message") or "")
            if found is not None:
                counted[found.group(2)] += int(found.group(1)) * int(event.get("count") or 1)
        return counted

    def cleanup(self, timeout: float = 180) -> None:
        """Delete the namespace (its quotas and pods go with it) and the Cohort, and wait.

        Waiting matters after a fault: a deletion still in flight when the session stops
        the control plane is finished, if ever, by whoever starts it next (`make run`).
        """
        for kind, name in (("namespace", self.ns), ("cohort", self.top)):
            cluster.kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)

        def gone() -> bool:
            if cluster.kubectl("get", "namespace", self.ns, check=False).returncode == 0:
                return False
            # Its children are gone with the namespace: the in-use finalizer has nothing left
            # to hold, and the operator that would take it off may be stopped by now.
            k.without_in_use(self.top)
            return cluster.kubectl("get", "cohort", self.top, check=False).returncode != 0

        cluster.wait_until(
            gone,
            timeout,
            f"namespace {self.ns} and Cohort {self.top} deleted",
            interval=1,
        )
