"""Pod groups rebuilt from running pods (docs/reference/pods.md, "Pod groups"): a group whose pods
were admitted before the engine saw them (a restart, a standby that watched another replica
admit them, `quotree simulate`'s bound pods) is one unit for reclaim, preemption, the
in-quota labels and the counts, as if this engine had admitted it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml
from builders import engine, pod, quota, states

from quotree.group_rebuild import INCONSISTENT
from quotree.groups import GroupSpec, JobFacts
from quotree.podfacts import PodFacts
from quotree.simulate import simulate, to_json

GPU = "nvidia.com/gpu"

#: The story: a Cohort of 8 GPUs, `lender` min 4, `borrower` min 4 max 8.
STORY = f"""apiVersion: v1
kind: Node
metadata: {{name: n1}}
status: {{allocatable: {{{GPU}: "8"}}}}
---
apiVersion: quotree.io/v1alpha1
kind: Cohort
metadata: {{name: c}}
spec: {{min: {{{GPU}: "8"}}, max: {{{GPU}: "8"}}}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {{name: lender, namespace: lender}}
spec: {{parent: c, min: {{{GPU}: "4"}}, max: {{{GPU}: "8"}}}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {{name: borrower, namespace: borrower}}
spec: {{parent: c, min: {{{GPU}: "4"}}, max: {{{GPU}: "8"}}}}
"""


def member(
    name: str, ns: str, size: int, *, least: int | None = None, bound: bool = True, **spec: Any
) -> dict[str, Any]:
    annotations = {"quotree.io/pod-group-size": str(size)}
    if least is not None:
        annotations["quotree.io/pod-group-min"] = str(least)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"quotree.io/pod-group": "g6"},
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}], **spec},
    }
    if bound:
        body["spec"]["nodeName"] = "n1"
    return body


def lone(name: str, ns: str, gpus: int, **spec: Any) -> dict[str, Any]:
    containers = [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": containers, **spec},
    }


def report(tmp_path: Path, tree: str, *docs: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "in.yaml"
    path.write_text(tree + "".join("---\n" + yaml.safe_dump(d) for d in docs))
    return to_json(simulate([path]))


def pod_states(out: dict[str, Any]) -> dict[str, str]:
    return {key: entry["state"] for key, entry in out["pods"].items()}


def test_a_bound_group_is_reclaimed_whole(tmp_path: Path) -> None:
    group = [member(f"g6-{i}", "borrower", 6) for i in range(6)]
    out = report(tmp_path, STORY, *group, lone("big", "lender", 3))
    assert out["pods"]["lender/big"]["state"] == "admitted"
    assert [out["pods"][f"borrower/g6-{i}"]["state"] for i in range(6)] == ["reclaimed"] * 6


def test_a_bound_group_is_counted_as_one_admitted_group_with_all_its_pods(tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    docs = [member(f"g6-{i}", "borrower", 6) for i in range(6)]
    path.write_text(STORY + "".join("---\n" + yaml.safe_dump(d) for d in docs))
    sim = simulate([path])
    out = to_json(sim)
    group = out["groups"]["borrower/g6"]
    assert group["state"] == "admitted"
    assert group["pods"] == [f"borrower/g6-{i}" for i in range(6)]
    assert sim.engine.report("borrower").admitted_groups == 1
    assert sim.engine.report("borrower").pending_groups == 0
    # One place in the in-quota order: the 4 GPUs of min are not split by pods' arrival.
    seqs = {sim.engine.pods[f"borrower/g6-{i}"].admitted_seq for i in range(6)}
    assert len(seqs) == 1


def test_a_bound_group_is_preempted_whole(tmp_path: Path) -> None:
    one = f"""apiVersion: v1
kind: Node
metadata: {{name: n1}}
status: {{allocatable: {{{GPU}: "8"}}}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {{name: borrower, namespace: borrower}}
spec: {{min: {{{GPU}: "6"}}, max: {{{GPU}: "6"}}}}
"""
    group = [member(f"g6-{i}", "borrower", 6) for i in range(6)]
    out = report(tmp_path, one, *group, lone("urgent", "borrower", 1, priority=10))
    assert out["pods"]["borrower/urgent"]["state"] == "admitted"
    assert [out["pods"][f"borrower/g6-{i}"]["state"] for i in range(6)] == ["preempted"] * 6


#: The story with `lender` min 6 and `borrower` min 2: the borrower's unit of 4 is lent too.
LENT_MORE = STORY.replace(
    f'lender}}\nspec: {{parent: c, min: {{{GPU}: "4"}}',
    f'lender}}\nspec: {{parent: c, min: {{{GPU}: "6"}}',
).replace(
    f'borrower}}\nspec: {{parent: c, min: {{{GPU}: "4"}}',
    f'borrower}}\nspec: {{parent: c, min: {{{GPU}: "2"}}',
)


def test_an_elastic_bound_group_above_its_min_gives_its_joined_pods_back_first(
    tmp_path: Path,
) -> None:
    # Min 4 of 6: the first 4 bound pods are its unit, the last 2 joined one by one. The
    # lender's 3-GPU pod needs 1 GPU: the latest joined pod goes, alone.
    assert LENT_MORE != STORY
    group = [member(f"g6-{i}", "borrower", 6, least=4) for i in range(6)]
    out = report(tmp_path, LENT_MORE, *group, lone("three", "lender", 3))
    assert out["pods"]["lender/three"]["state"] == "admitted"
    assert [out["pods"][f"borrower/g6-{i}"]["state"] for i in range(6)] == [
        *["admitted"] * 5,
        "reclaimed",
    ]
    assert out["groups"]["borrower/g6"]["state"] == "admitted"
    # A 5-GPU pod needs 3: more than the joined pods hold, so the unit of 4 goes whole.
    out = report(tmp_path, LENT_MORE, *group, lone("five", "lender", 5))
    assert out["pods"]["lender/five"]["state"] == "admitted"
    unit = [out["pods"][f"borrower/g6-{i}"]["state"] for i in range(4)]
    assert unit == ["reclaimed"] * 4


def grouped(facts: PodFacts, size: int) -> PodFacts:
    return dataclasses.replace(facts, group=GroupSpec("g", size, size))


def test_a_standby_that_saw_another_replica_admit_a_group_treats_it_as_one_unit() -> None:
    # The standby's engine sees the group's pods gated (pending), then ungated one by one
    # (the leader admitted them); it never decides meanwhile. Then it leads.
    eng = engine(quota("q", min=4, max=4), capacity=4, instant_evictions=False)
    gated = [grouped(pod("q", f"g-{i}", 1, created=float(i)), 3) for i in range(3)]
    for facts in gated:
        eng.observe_pod(facts)
    assert eng.groups["q/g"].state == "pending"
    for facts in gated:
        eng.observe_pod(dataclasses.replace(facts, gated=False))
    assert eng.groups["q/g"].state == "admitted"
    assert eng.report("q").admitted_groups == 1
    eng.observe_pod(pod("q", "urgent", 2, priority=10, created=9.0))
    out = eng.decide(10.0)
    assert sorted(e.pod for e in out.evictions) == ["q/g-0", "q/g-1", "q/g-2"]
    assert {e.group for e in out.evictions} == {"q/g"}


def test_a_running_pod_that_disagrees_with_its_group_counts_alone_and_is_said_once() -> None:
    eng = engine(quota("q", min=8, max=8), capacity=8, instant_evictions=False)
    for i in range(3):
        eng.observe_pod(grouped(pod("q", f"g-{i}", 1, gated=False, node="n"), 3))
    eng.observe_pod(grouped(pod("q", "g-odd", 1, gated=False, node="n"), 4))
    assert states(eng)["q/g-odd"] == "admitted"
    assert eng.report("q").used == {"x": 4}
    assert eng.groups["q/g"].pods == ("q/g-0", "q/g-1", "q/g-2")
    warnings = eng.decide(1.0).warnings
    assert [(key, reason) for key, reason, _ in warnings] == [("q/g-odd", INCONSISTENT)]
    assert "this pod's size is 4, but the group's other pods have size 3" in warnings[0][2]
    assert not eng.decide(2.0).warnings


def test_a_running_group_with_pods_missing_is_one_unit_of_those_and_said_once() -> None:
    eng = engine(quota("q", min=8, max=8), capacity=8, instant_evictions=False)
    for i in range(2):
        eng.observe_pod(grouped(pod("q", f"g-{i}", 1, gated=False, node="n"), 3))
    eng.group_ledger.rebuild.check()  # every pod has been seen (the operator's start-up)
    warnings = eng.decide(1.0).warnings
    assert [(key, reason) for key, reason, _ in warnings] == [("q/g-0", INCONSISTENT)]
    assert "2 of its 3 pods run" in warnings[0][2]
    assert eng.groups["q/g"].state == "admitted"
    eng.group_ledger.rebuild.check()
    assert not eng.decide(2.0).warnings


def test_a_jobs_running_pods_without_the_label_are_its_group_by_their_owner() -> None:
    # After a restart: the Job is known first, then its 3 running pods, which the webhook
    # did not label. They are the Job's group, admitted, and evicted as one (the Job named).
    eng = engine(quota("q", min=4, max=4), capacity=4, instant_evictions=False)
    eng.observe_job(JobFacts("q", "train", "u", parallelism=3, completions=3))
    for i in range(3):
        facts = pod("q", f"train-{i}", 1, gated=False, node="n", created=float(i))
        eng.observe_pod(dataclasses.replace(facts, owner_job="train"))
    assert eng.groups["q/train"].state == "admitted"
    assert eng.groups["q/train"].pods == ("q/train-0", "q/train-1", "q/train-2")
    eng.observe_pod(pod("q", "urgent", 2, priority=10, created=9.0))
    out = eng.decide(10.0)
    assert sorted(e.pod for e in out.evictions) == ["q/train-0", "q/train-1", "q/train-2"]
    assert {e.job for e in out.evictions} == {"train"}


def test_a_jobs_running_group_with_pods_between_completions_is_not_said_inconsistent() -> None:
    eng = engine(quota("q", min=8, max=8), capacity=8, instant_evictions=False)
    eng.observe_job(JobFacts("q", "train", "u", parallelism=3, completions=9))
    for i in range(2):
        facts = pod("q", f"train-{i}", 1, gated=False, node="n")
        eng.observe_pod(dataclasses.replace(facts, owner_job="train"))
    eng.group_ledger.rebuild.check()
    assert eng.groups["q/train"].state == "admitted"
    assert not eng.decide(1.0).warnings


def test_a_running_group_the_nodes_did_not_place_is_requeued_whole_after_the_timeout() -> None:
    # Ungated by another replica, not bound to Nodes: the scheduling timeout runs for the
    # group as one unit, and all of its pods are requeued together.
    eng = engine(
        quota("q", min=4, max=4), capacity=4, instant_evictions=False, scheduling_timeout=5.0
    )
    for i in range(3):
        eng.observe_pod(grouped(pod("q", f"g-{i}", 1, gated=False, created=float(i)), 3))
    assert not eng.decide(0.0).evictions
    out = eng.decide(6.0)
    assert sorted(e.pod for e in out.evictions) == ["q/g-0", "q/g-1", "q/g-2"]
    assert {e.kind for e in out.evictions} == {"Requeued"}
