"""`kubectl quotree why`, `tree` and `what-if` on pods that name a Kubernetes PodGroup:
the PodGroups are read with the other objects, and such a pod answers for its group."""

from __future__ import annotations

from typing import Any

from quotree.simulate import simulate_documents, to_json
from quotree_kubectl.cluster import ClusterState, Kubectl, PluginError, live_documents
from quotree_kubectl.tree_view import tree_report
from quotree_kubectl.why import why
from tests.unit.live_objects import live_cluster, quota_pod


def _linked(state: ClusterState, count: int, min_count: int) -> ClusterState:
    """`state` with a gang PodGroup `mpi` of `min_count` and `count` gated 2-cpu pods naming it."""
    state.pod_groups.append(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "mpi", "namespace": "ns-a", "uid": "pg"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
        }
    )
    for i in range(count):
        body = quota_pod("ns-a", f"mpi-{i}", "2", gated=True, created=f"2026-01-01T00:01:0{i}Z")
        body["spec"]["schedulingGroup"] = {"podGroupName": "mpi"}
        state.pods.append(body)
    return state


def test_why_answers_for_the_podgroup_of_a_pod() -> None:
    text = why(_linked(live_cluster(), 2, 3), "ns-a", "mpi-1", {})
    assert "group:   pod group ns-a/mpi, incomplete: 2 of 3 pods exist" in text
    assert "does not exist yet" not in text


def test_tree_counts_the_podgroups_group() -> None:
    report = tree_report(_linked(live_cluster(), 2, 3), {"ns-a/mpi-0": "incomplete"})
    group = report["groups"]["ns-a/mpi"]
    assert (group["size"], group["min"], group["state"]) == (3, 3, "pending")
    assert group["pods"] == ["ns-a/mpi-0", "ns-a/mpi-1"]


def test_what_if_reads_the_podgroups_too() -> None:
    report = to_json(simulate_documents(live_documents(_linked(live_cluster(), 2, 3))))
    assert report["groups"]["ns-a/mpi"]["state"] == "incomplete"


class _Answers(Kubectl):
    """kubectl's answers by the kinds asked for (a PluginError for PodGroups: not served)."""

    def __init__(self, objects: list[dict[str, Any]], served: bool) -> None:
        super().__init__()
        self.objects, self.served = objects, served
        self.asked: list[str] = []

    def get_json(self, *args: str) -> dict[str, Any]:
        self.asked.append(args[0])
        if args[0].startswith("podgroups"):
            if not self.served:
                raise PluginError(
                    'kubectl get podgroups: the server doesn\'t have a resource type "podgroups"'
                )
            return {"items": [o for o in self.objects if o["kind"] == "PodGroup"]}
        return {"items": [o for o in self.objects if o["kind"] != "PodGroup"]}


def test_podgroups_are_asked_for_only_when_a_pod_names_one_and_may_be_missing() -> None:
    plain = live_cluster()
    objects = [{**p, "kind": "Pod"} for p in plain.pods]
    kubectl = _Answers(objects, served=False)
    assert ClusterState.read(kubectl).pod_groups == []
    assert not any(a.startswith("podgroups") for a in kubectl.asked)
    linked = _linked(live_cluster(), 2, 3)
    objects = [{**p, "kind": "Pod"} for p in linked.pods] + linked.pod_groups
    assert ClusterState.read(_Answers(objects, served=False)).pod_groups == []  # not served
    assert len(ClusterState.read(_Answers(objects, served=True)).pod_groups) == 1
