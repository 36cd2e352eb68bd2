"""The operator's side of flavors and maintenance mode: what it reads into the engine."""

from __future__ import annotations

from typing import Any

from quotree.engine import PodState
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from tests.unit.objects import node, pod

GPU = "nvidia.com/gpu"


def controller(env: dict[str, str] | None = None) -> Controller:
    return Controller(OperatorConfig.from_env(env or {}), kube=None)  # type: ignore[arg-type]


def gpu_node(name: str, model: str) -> dict[str, Any]:
    return node(name, {GPU: "4"}, labels={"gpu": model})


def test_flavors_and_node_labels_reach_the_engine() -> None:
    inputs = controller().inputs
    inputs.observe_flavor(
        {
            "kind": "ResourceFlavor",
            "metadata": {"name": "a100"},
            "spec": {"nodeLabels": {"gpu": "a"}},
        },
        deleted=False,
    )
    inputs.observe_cluster_node(gpu_node("n1", "a"), deleted=False)
    inputs.observe_cluster_node(gpu_node("n2", "h"), deleted=False)
    assert inputs.engine.tree.capacity[f"{GPU}@a100"] == 4
    # A ResourceFlavor that cannot be read is left out, with a log line (no traceback).
    inputs.observe_flavor(
        {"kind": "ResourceFlavor", "metadata": {"name": "a100"}, "spec": {"nodeLabels": "x"}},
        deleted=False,
    )
    assert "a100" not in inputs.engine.flavors
    assert inputs.engine.tree.capacity.get(f"{GPU}@a100", 0) == 0


def test_quotree_maintenance_holds_every_pod() -> None:
    assert OperatorConfig.from_env({"QUOTREE_MAINTENANCE": "1"}).maintenance
    assert not OperatorConfig.from_env({}).maintenance
    ctl = controller({"QUOTREE_MAINTENANCE": "1"})
    inputs = ctl.inputs
    inputs.observe_cluster_node(gpu_node("n1", "a"), deleted=False)
    inputs.observe_quota_object(
        {
            "kind": "ElasticQuota",
            "metadata": {"name": "team", "namespace": "team"},
            "spec": {"min": {GPU: "2"}},
        },
        deleted=False,
    )
    inputs.observe_pod(pod("team", "p", {GPU: "1"}, uid="p", labels=None), deleted=False)
    out = ctl.engine.decide(0.0)
    assert not out.admitted
    assert "maintenance mode (QUOTREE_MAINTENANCE is set on the operator)" in out.pending["team/p"]
    assert ctl.engine.pods["team/p"].state is PodState.PENDING
