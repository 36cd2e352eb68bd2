"""Reclaim only when it pays, on the local control plane (QUOTREE_RECLAIM_DELAY=5).

A Cohort (min 4, max 8 GPUs) with two borrowers (batch and team-x, min 0, max 8: equal
weights) and a lender (owner, min 4). batch runs one 8-GPU pod. team-x's 1-GPU pod fits
team-x but not the Cohort: taking batch's pod would leave batch borrowing less than
team-x by weight, so it waits with that reason and the 8-GPU pod keeps running past the
delay. Then owner's 1-GPU pod (within its min) reclaims it after the delay.
"""

from __future__ import annotations

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
        log_name="operator-reclaim-pays",
    )
    yield proc
    alive = proc.alive
    proc.stop()
    assert alive, "the operator died\n" + proc.log_tail()


def test_a_borrower_waits_rather_than_evict_another_and_a_lender_still_reclaims(
    cluster: ModuleType, operator: OperatorProcess
) -> None:
    s = k.suffix()
    top = f"pays-{s}"
    ns_batch, ns_x, ns_owner = f"pays-batch-{s}", f"pays-x-{s}", f"pays-owner-{s}"
    try:
        k.apply(
            k.namespace(ns_batch),
            k.namespace(ns_x),
            k.namespace(ns_owner),
            k.cohort(top, min={GPU: "4"}, max={GPU: "8"}),
            k.quota("batch", ns_batch, parent=top, min={GPU: "0"}, max={GPU: "8"}),
            k.quota("team-x", ns_x, parent=top, min={GPU: "0"}, max={GPU: "8"}),
            k.quota("owner", ns_owner, parent=top, min={GPU: "4"}, max={GPU: "8"}),
        )
        k.apply(k.pod("train", ns_batch, {GPU: "8"}))
        cluster.wait_until(
            lambda: len(k.admitted_pods(ns_batch)) == 1, 60, "batch's 8-GPU pod admitted"
        )
        k.apply(k.pod("small", ns_x, {GPU: "1"}))
        refusal = (
            f"waits: taking 8 {GPU} from ElasticQuota batch would leave it borrowing less "
            f"than ElasticQuota team-x by weight ({GPU}: batch would borrow 0 at weight 8, "
            "team-x 1 at weight 8)"
        )
        waits = cluster.wait_until(
            lambda: [e for e in k.events(ns_x, "Pending") if refusal in e["message"]],
            DELAY + 30,
            "team-x's pod says reclaim would not pay",
        )
        assert (
            f"does not fit in Cohort {top}: {GPU}: used 8 + request 1 > runtime 8"
            in (waits[0]["message"])
        )
        time.sleep(DELAY + 2)  # well past the delay: still nothing evicted
        assert k.events(ns_batch, "Reclaimed") == []
        assert [p["metadata"]["name"] for p in k.admitted_pods(ns_batch)] == ["train"]
        assert k.admitted_pods(ns_x) == []
        # A lender within its min always gets reclaim, after the delay.
        k.apply(k.pod("mine", ns_owner, {GPU: "1"}))
        created = time.monotonic()
        cluster.wait_until(
            lambda: len(k.admitted_pods(ns_owner)) == 1, 60, "owner's pod admitted after reclaim"
        )
        assert time.monotonic() - created >= DELAY - 1
        reclaimed = k.events(ns_batch, "Reclaimed")
        assert {e["involvedObject"]["name"] for e in reclaimed} == {"train"}
        assert "lent quota is reclaimed for" in reclaimed[0]["message"]
    finally:
        for kind, name in (
            ("namespace", ns_batch),
            ("namespace", ns_x),
            ("namespace", ns_owner),
            ("cohort", top),
        ):
            cluster.kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)
