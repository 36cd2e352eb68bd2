"""A Cohort's max is a ceiling, also while lent quota is reclaimed.

The story on the local control plane, with QUOTREE_RECLAIM_DELAY=5: a Cohort
with min = max = 4 GPUs and two ElasticQuotas of min 2. Team a runs 4 one-GPU pods
(borrowing b's idle min); team b then creates 2 pods. b's pods wait, saying which ancestor
is full, which quota holds the lent GPUs and when they are reclaimed; after the delay two
of a's pods are reclaimed and b's 2 run. A sampler lists the story's pods every 200 ms
from start to end: the GPUs held by admitted pods never exceed the Cohort's max (= its
runtime, the cluster being larger); pods whose eviction is in flight (deletion started)
are counted apart, and are the only ones ever allowed on top.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, start_operator

GPU = "nvidia.com/gpu"
DELAY = 5


@pytest.fixture
def operator(cluster: ModuleType) -> Iterator[OperatorProcess]:
    proc = start_operator(
        {"QUOTREE_RECLAIM_DELAY": str(DELAY), "QUOTREE_WEBHOOKS": "0"},
        log_name="operator-reclaim-ceiling",
    )
    yield proc
    alive = proc.alive
    proc.stop()
    assert alive, "the operator died\n" + proc.log_tail()


class GpuSampler:
    """Every 200 ms: (GPUs of admitted pods not being deleted, GPUs of those being deleted)."""

    def __init__(self, cluster: ModuleType, selector: str) -> None:
        self.cluster = cluster
        self.selector = selector
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                items = self.cluster.kubectl_json("get", "pods", "-A", "-l", self.selector)
            except Exception:  # a failed list is skipped
                continue
            held = evicting = 0
            for p in items["items"]:
                if k.gated(p) or p["status"].get("phase") in ("Succeeded", "Failed"):
                    continue
                gpus = int(p["spec"]["containers"][0]["resources"]["requests"][GPU])
                if p["metadata"].get("deletionTimestamp"):
                    evicting += gpus
                else:
                    held += gpus
            self.samples.append((started, held, evicting))
            self._stop.wait(max(0.0, 0.2 - (time.monotonic() - started)))


def test_the_cohort_never_holds_more_than_its_max_while_lent_quota_is_reclaimed(
    cluster: ModuleType, operator: OperatorProcess
) -> None:
    s = k.suffix()
    ns_a, ns_b, top = f"ceil-a-{s}", f"ceil-b-{s}", f"ceil-{s}"
    story = {"story": f"ceil-{s}"}
    try:
        k.apply(
            k.namespace(ns_a),
            k.namespace(ns_b),
            k.cohort(top, min={GPU: "4"}, max={GPU: "4"}),
            k.quota("a", ns_a, parent=top, min={GPU: "2"}),
            k.quota("b", ns_b, parent=top, min={GPU: "2"}),
        )
        with GpuSampler(cluster, f"story=ceil-{s}") as sampler:
            k.apply(*(k.pod(f"a-{i}", ns_a, {GPU: "1"}, labels=story) for i in range(4)))
            cluster.wait_until(
                lambda: len(k.admitted_pods(ns_a)) == 4, 60, "a's 4 pods admitted (borrowing)"
            )
            k.apply(*(k.pod(f"b-{i}", ns_b, {GPU: "1"}, labels=story) for i in range(2)))
            created_b = time.monotonic()
            # b's pods wait for the GPUs lent to a, and say so: the ancestor, the quota
            # being reclaimed and when.
            waits = cluster.wait_until(
                lambda: [
                    e
                    for e in k.events(ns_b, "Pending")
                    if f"does not fit in Cohort {top}" in e["message"]
                ],
                30,
                "a Pending event naming the Cohort",
            )
            message = waits[0]["message"]
            assert f"{GPU}: used 4 + request 1 > runtime 4" in message, message
            assert re.search(
                rf"waits for 1 {re.escape(GPU)} lent to ElasticQuota a, reclaimed in [1-5] s",
                message,
            ), message
            assert k.admitted_pods(ns_b) == []
            cluster.wait_until(
                lambda: len(k.admitted_pods(ns_b)) == 2, 60, "b's 2 pods admitted after reclaim"
            )
            admitted_after = time.monotonic() - created_b
            cluster.wait_until(
                lambda: len([p for p in k.pods(ns_a) if k.live(p)]) == 2,
                30,
                "a's reclaimed pods gone",
            )
            time.sleep(1)  # a few samples of the end state
        # Reclaimed only after the delay: b waited for it.
        assert admitted_after >= DELAY - 1, admitted_after
        reclaimed = k.events(ns_a, "Reclaimed")
        assert len({e["involvedObject"]["name"] for e in reclaimed}) == 2
        assert len(k.admitted_pods(ns_a)) == 2
        st_a, st_b = k.status("eq", "a", ns_a), k.status("eq", "b", ns_b)
        assert st_a["used"] == st_b["used"] == {GPU: "2"}
        assert k.status("coh", top)["runtime"] == {GPU: "4"}
        # The ceiling held at every sample; only pods being evicted ever came on top.
        samples = sampler.samples
        assert len(samples) >= 20, f"only {len(samples)} samples"
        over = [(t, held, gone) for t, held, gone in samples if held > 4]
        assert not over, f"admitted GPUs above the Cohort's max of 4: {over[:5]}"
        assert max(held for _, held, _ in samples) == 4  # the story did fill the Cohort
        in_flight = [sample for sample in samples if sample[2]]
        print(f"{len(samples)} samples, {len(in_flight)} with evictions in flight: {in_flight}")
    finally:
        for kind, name in (("namespace", ns_a), ("namespace", ns_b), ("cohort", top)):
            cluster.kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)
