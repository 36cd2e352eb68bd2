"""`kubectl quotree import` and the simulator's conversion of Kueue, capacity scheduling and
Koordinator objects (quotree/importer.py), on test data modelled on each project's own
published samples (tests/unit/data/import/, each file says which)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from quotree.cli import main as quotree_main
from quotree.importer import convert
from quotree.manifests import load_documents
from quotree_kubectl.cli import main as plugin_main

DATA = Path(__file__).parent / "data" / "import"
NODE = """apiVersion: v1
kind: Node
metadata: {name: n1, labels: {node-type: on-demand}}
status: {allocatable: {cpu: "64", memory: 256Gi, nvidia.com/gpu: "16"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {node-type: spot}}
status: {allocatable: {cpu: "32"}}
"""


def run_import(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, list[str]]:
    code = plugin_main(["import", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def objects(out: str) -> dict[str, dict[str, Any]]:
    """The converted objects by `Kind name`."""
    return {f"{d['kind']} {d['metadata']['name']}": d for d in yaml.safe_load_all(out) if d}


def simulate_output(tmp_path: Path, out: str, capsys: pytest.CaptureFixture[str]) -> Any:
    """`quotree simulate` on the import's output and a cluster's nodes: the JSON report."""
    converted = tmp_path / "converted.yaml"
    converted.write_text(out)
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODE)
    code = quotree_main(["simulate", str(nodes), str(converted), "-o", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_kueue_sample_converts_and_simulates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_import(capsys, str(DATA / "kueue.yaml"))
    assert code == 0, err
    got = objects(out)
    assert list(got) == [
        "ResourceFlavor on-demand",
        "ResourceFlavor spot",
        "Cohort root-cohort",
        "Cohort important-org",
        "Cohort regular-org",
        "ElasticQuota research-queue",
        "ElasticQuota batch-queue",
    ]
    # A flavor with no node labels alone in its resource group: plain resources.
    assert got["ResourceFlavor spot"]["spec"] == {"nodeLabels": {"node-type": "spot"}}
    research = got["ElasticQuota research-queue"]
    assert research["metadata"] == {"name": "research-queue", "namespace": "research"}
    spec = research["spec"]
    assert spec["parent"] == "important-org"
    assert spec["min"] == {"cpu": "9", "memory": "36Gi"}
    assert spec["borrowingLimit"] == {"cpu": "3"}
    assert spec["lendingLimit"] == {"memory": "6Gi"}
    assert spec["namespaces"] == ["research-dev"]  # its second LocalQueue's namespace
    assert spec["preemption"] == {"withinQuota": "LowerPriority"}
    assert "flavors" not in spec
    batch = got["ElasticQuota batch-queue"]["spec"]
    assert batch["flavors"] == [
        {"name": "on-demand", "min": {"cpu": "9"}, "sharedWeight": {"cpu": "1000"}},
        {
            "name": "spot",
            "min": {"cpu": "9"},
            "sharedWeight": {"cpu": "1000"},
            "borrowingLimit": {"cpu": "0"},
        },
    ]
    # Kueue's Cohort quota is on top of its members': the quotree Cohort guarantees both.
    important = got["Cohort important-org"]["spec"]
    assert important["min"] == {"cpu": "13", "memory": "44Gi"}
    assert important["sharedWeight"] == {"cpu": "750", "memory": "750"}
    root = got["Cohort root-cohort"]["spec"]
    assert root["min"] == {"cpu": "13", "memory": "44Gi"}
    assert [(f["name"], f["min"]) for f in root["flavors"]] == [
        ("on-demand", {"cpu": "9"}),
        ("spot", {"cpu": "9"}),
    ]
    # Each object says what it came from.
    assert "# From Kueue ClusterQueue research-queue (kueue.x-k8s.io/v1beta1), its " in out
    assert out.count("# From ") == 7
    assert [line.split(": ", 3)[3] for line in err] == [
        "Kueue ResourceFlavor spot (kueue.x-k8s.io/v1beta1): spec.nodeTaints not carried "
        "over: quotree places pods by node labels only",
        "Kueue ClusterQueue research-queue (kueue.x-k8s.io/v1beta1): spec.queueingStrategy "
        "not carried over: quotree admits each quota's pods by priority, then arrival",
        "Kueue ClusterQueue batch-queue (kueue.x-k8s.io/v1beta1): "
        "preemption.withinClusterQueue LowerOrNewerEqualPriority not carried over: quotree "
        "preempts lower priorities only (LowerPriority)",
        "Kueue ClusterQueue batch-queue (kueue.x-k8s.io/v1beta1): "
        "preemption.reclaimWithinCohort Never not carried over: quotree always takes lent "
        "quota back from borrowers, whatever their priority",
    ]
    assert all(line.startswith("kubectl quotree: note: ") for line in err)
    report = simulate_output(tmp_path, out, capsys)
    assert set(report["nodes"]) == {
        "root-cohort",
        "important-org",
        "regular-org",
        "research-queue",
        "batch-queue",
    }
    assert all(node["valid"] for node in report["nodes"].values())


def test_capacity_scheduling_sample_converts_and_simulates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_import(capsys, str(DATA / "capacity-scheduling.yaml"))
    assert code == 0, err
    assert err == []  # min and max carry over whole; status is not configuration
    got = objects(out)
    assert got["ElasticQuota test"] == {
        "apiVersion": "quotree.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "test", "namespace": "test"},
        "spec": {
            "min": {"cpu": "10", "memory": "20Gi", "nvidia.com/gpu": "1"},
            "max": {"cpu": "20", "memory": "40Gi", "nvidia.com/gpu": "2"},
        },
    }
    assert got["ElasticQuota quota-b"]["spec"] == {
        "min": {"nvidia.com/gpu": "6"},
        "max": {"nvidia.com/gpu": "8"},
    }
    assert "# From capacity scheduling ElasticQuota test/test (scheduling.x-k8s.io/v1alpha1)" in out
    report = simulate_output(tmp_path, out, capsys)
    assert {name: node["parent"] for name, node in report["nodes"].items()} == {
        "quota-a": None,
        "quota-b": None,
        "test": None,
    }


def test_koordinator_sample_converts_and_simulates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_import(capsys, str(DATA / "koordinator.yaml"))
    assert code == 0, err
    got = objects(out)
    assert list(got) == [
        "Cohort quota-parent-example",
        "ElasticQuota quota-example",
        "ElasticQuota test",
    ]
    parent = got["Cohort quota-parent-example"]
    assert parent["metadata"] == {"name": "quota-parent-example"}  # cluster-scoped
    assert "parent" not in parent["spec"]  # under the root quota: top-level
    example = got["ElasticQuota quota-example"]["spec"]
    assert example["parent"] == "quota-parent-example"
    assert example["sharedWeight"] == {"cpu": "40", "memory": "40Gi"}
    assert example["lendingLimit"] == {"cpu": "0", "memory": "0"}  # allow-lent-resource false
    # The proposal's label name for the parent works too.
    assert got["ElasticQuota test"]["spec"]["parent"] == "quota-parent-example"
    assert len(err) == 2
    assert "koordinator-root-quota" in err[0]
    assert "not converted: the root quota is the cluster itself in quotree" in err[0]
    assert "quota.scheduling.koordinator.sh/tree-id not carried over" in err[1]
    report = simulate_output(tmp_path, out, capsys)
    assert report["nodes"]["test"]["parent"] == "quota-parent-example"


def test_a_converted_tree_that_breaks_a_rule_is_reported_not_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (DATA / "koordinator.yaml").read_text().replace("cpu: 30\n", "cpu: 15\n")
    path = tmp_path / "tree.yaml"
    path.write_text(text)
    code, out, err = run_import(capsys, str(path))
    assert code == 1
    assert err[-1] == (
        "kubectl quotree: error: Cohort quota-parent-example: its children's min cpu add up "
        "to 20, over its own min of 15 (rule broken: MinSumExceeded)"
    )
    # Written as converted: the user chooses the fix.
    assert objects(out)["Cohort quota-parent-example"]["spec"]["min"]["cpu"] == "15"
    assert objects(out)["ElasticQuota test"]["spec"]["min"]["cpu"] == "10"


def test_kueue_queues_without_or_sharing_local_queues_are_noted(tmp_path: Path) -> None:
    text = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: a}
spec:
  cohort: org
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 2}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: b}
spec: {cohort: org}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: c}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: one, namespace: shared}
spec: {clusterQueue: a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: two, namespace: shared}
spec: {clusterQueue: b}
"""
    path = tmp_path / "queues.yaml"
    path.write_text(text)
    conversion = convert(load_documents([path]))
    docs = {d["metadata"]["name"]: d for _, d in conversion.documents()}
    # A cohort only named by ClusterQueues is a Cohort; its min is its members'.
    assert docs["org"]["kind"] == "Cohort"
    assert docs["org"]["spec"]["flavors"] == [{"name": "f", "min": {"cpu": "2"}}]
    assert docs["c"]["metadata"]["namespace"] == "c"
    assert docs["c"]["spec"]["preemption"] == {"withinQuota": "Never"}  # Kueue's default
    assert conversion.notes == [
        f"{path} document 3: Kueue ClusterQueue c (kueue.x-k8s.io/v1beta1): no LocalQueue "
        "points to it: its ElasticQuota is put in namespace c, whose pods it takes",
        "namespace shared: LocalQueues of several ClusterQueues (a, b): its pods must name "
        "their quota with label quotree.io/quota-name",
    ]
    assert conversion.problems() == []


def test_import_reads_standard_input_and_leaves_other_objects_out(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (DATA / "capacity-scheduling.yaml").read_text() + (
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
    )
    monkeypatch.setattr("sys.stdin", _Stdin(text.encode()))
    code, out, err = run_import(capsys)
    assert code == 0
    assert len(objects(out)) == 3
    assert err == [
        "kubectl quotree: note: left out 1 object that is not Kueue, capacity scheduling or "
        "Koordinator quota objects: Service (v1)"
    ]


def test_import_of_nothing_convertible_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "none.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    code, out, err = run_import(capsys, "-f", str(path))
    assert code == 1
    assert out == ""
    assert err == [f"kubectl quotree: error: nothing to convert in {path}"]


def test_simulate_converts_other_systems_objects_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODE)
    code = quotree_main(["simulate", str(nodes), str(DATA / "capacity-scheduling.yaml")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "quota-b (eq)" in captured.out
    assert captured.err.splitlines() == [
        "quotree: note: converted capacity scheduling ElasticQuota test/test "
        "(scheduling.x-k8s.io/v1alpha1) to ElasticQuota test/test",
        "quotree: note: converted capacity scheduling ElasticQuota quota-a/quota-a "
        "(scheduling.sigs.k8s.io/v1alpha1) to ElasticQuota quota-a/quota-a",
        "quotree: note: converted capacity scheduling ElasticQuota quota-b/quota-b "
        "(scheduling.sigs.k8s.io/v1alpha1) to ElasticQuota quota-b/quota-b",
    ]


def test_simulate_reports_a_rule_the_converted_tree_breaks(tmp_path: Path) -> None:
    text = (DATA / "koordinator.yaml").read_text().replace("cpu: 30\n", "cpu: 15\n")
    path = tmp_path / "tree.yaml"
    path.write_text(NODE + "---\n" + text)
    code = quotree_main(["simulate", str(path)])
    assert code == 1


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = _Buffer(data)


class _Buffer:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data


@pytest.mark.parametrize(
    "spec",
    [
        "resourceGroups: nope",
        "resourceGroups: [{flavors: nope}]",
        "resourceGroups: [{flavors: [{name: f, resources: [{name: cpu, nominalQuota: lots}]}]}]",
        "resourceGroups: [{flavors: [{name: f, resources: 3}]}]",
        "fairSharing: 3\n  preemption: nope",
    ],
)
def test_malformed_kueue_fields_are_notes_not_crashes(tmp_path: Path, spec: str) -> None:
    path = tmp_path / "cq.yaml"
    path.write_text(
        f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {{name: q}}\n"
        f"spec:\n  {spec}\n"
    )
    conversion = convert(load_documents([path]))
    assert [c.describe() for c in conversion.objects] == ["ElasticQuota q/q"]
    if "lots" in spec:
        assert any("nominalQuota.cpu not carried over: " in n for n in conversion.notes)
