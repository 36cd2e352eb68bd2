"""`quotree simulate`: input forms, arrival order, JSON keys, and bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from quotree.cli import main

HEADER = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {capacity: {cpu: "10"}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: a, namespace: a}
spec: {min: {cpu: "4"}, max: {cpu: "4"}}
"""


def pod_yaml(name: str, cpu: str, extra: str = "", ns: str = "a") -> str:
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}{extra}}}
spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]}}
"""


def run(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "input.yaml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "quotree.cli", "simulate", str(path), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_json_report_has_the_stable_keys(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, HEADER + pod_yaml("p1", "1"), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert list(report) == ["capacity", "nodes", "pods", "groups"]
    assert report["groups"] == {}  # no pod groups here
    assert report["capacity"] == {"cpu": "10"}
    member = report["nodes"]["a"]
    for key in ("kind", "namespace", "parent", "min", "max", "request", "runtime", "used"):
        assert key in member
    assert member["kind"] == "ElasticQuota"
    assert member["namespace"] == "a"
    assert member["used"] == {"cpu": "1"}
    entry = report["pods"]["a/p1"]
    assert entry["quota"] == "a"
    assert entry["state"] == "admitted"
    assert entry["capacity"] == "in-quota"
    assert "reason" in entry


def test_running_pods_and_unmanaged_pods(tmp_path: Path) -> None:
    text = (
        HEADER
        + pod_yaml("old", "3").replace("spec: {", "spec: {nodeName: n1, ")
        + pod_yaml("dns", "2", ns="kube-system")
        + pod_yaml("free", "1", ns="elsewhere")
        + pod_yaml("new", "2")
    )
    code, out, err = run(tmp_path, text, "-o", "json")
    assert code == 0, err
    pods = json.loads(out)["pods"]
    assert pods["a/old"]["state"] == "admitted"
    assert pods["kube-system/dns"]["state"] == "unmanaged"
    assert pods["kube-system/dns"]["capacity"] is None
    assert pods["elsewhere/free"]["state"] == "unmanaged"
    assert pods["a/new"]["state"] == "pending"  # 3 + 2 > max 4


def test_creation_timestamp_overrides_document_order(tmp_path: Path) -> None:
    # Two running low-priority pods fill the quota; the document lists the newer
    # one first. A high-priority arrival preempts the newest by timestamp.
    running = "spec: {nodeName: n1, "
    text = (
        HEADER
        + pod_yaml("newer", "2", ", creationTimestamp: '2024-01-01T00:00:09Z'").replace(
            "spec: {", running
        )
        + pod_yaml("older", "2", ", creationTimestamp: '2024-01-01T00:00:01Z'").replace(
            "spec: {", running
        )
        + pod_yaml("urgent", "2").replace("spec: {", "spec: {priority: 100, ")
    )
    code, out, err = run(tmp_path, text, "-o", "json")
    assert code == 0, err
    pods = json.loads(out)["pods"]
    assert pods["a/newer"]["state"] == "preempted"
    assert pods["a/older"]["state"] == "admitted"
    assert pods["a/urgent"]["state"] == "admitted"


def test_table_output_reads_as_a_tree(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, HEADER + pod_yaml("p1", "1"))
    assert code == 0
    assert out.startswith("cluster (capacity: cpu 10)")
    assert "└─ a (eq)" in out
    assert "pods: 1 admitted" in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: DaemonSet\nmetadata: {name: d}\n", "document 1: DaemonSet d: apiVersion not set"),
        ("apiVersion: v1\nkind: Pod\nspec: {}\n", "document 1: Pod: metadata.name not set"),
        ("apiVersion: v1\nmetadata: {name: d}\n", "document 1: object d: kind not set"),
        (
            "apiVersion: apps/v1beta2\nkind: Deployment\nmetadata: {name: d}\n",
            "Deployment d: apiVersion must be apps/v1",
        ),
        (
            HEADER.replace('min: {cpu: "4"}', 'min: {cpu: "four"}'),
            "ElasticQuota a: spec.min: cpu: 'four' is not a quantity",
        ),
        (
            HEADER.replace('max: {cpu: "4"}', 'max: {cpu: "2"}'),
            "ElasticQuota a: min cpu 4 is above max 2",
        ),
        (
            HEADER + "---\napiVersion: quotree.io/v1alpha1\nkind: Cohort\nmetadata: {name: r}\n"
            "spec: {min: {cpu: '1'}}\n---\napiVersion: quotree.io/v1alpha1\nkind: "
            "ElasticQuota\nmetadata: {name: b, namespace: b}\nspec: {parent: r, min: {cpu: '2'}}\n",
            "ElasticQuota b: min cpu 2 would make the children of Cohort r need 2 in all, "
            "over r's min of 1",
        ),
        (HEADER + pod_yaml("p", "1", ", labels: {quotree.io/quota-name: zz}"), "Pod a/p: rejected"),
        (
            HEADER + pod_yaml("p", "lots"),
            "document 3: Pod a/p: spec.containers[0].resources.requests.cpu: 'lots' is not a",
        ),
        ("a: [unclosed\n", "line"),
        (HEADER.replace("quotree.io/v1alpha1", "quotree.io/v1beta1"), "apiVersion must be"),
        (HEADER + pod_yaml("p", "1") + pod_yaml("p", "1"), "Pod a/p: defined twice"),
    ],
)
def test_bad_input_is_one_line_and_exits_non_zero(tmp_path: Path, text: str, message: str) -> None:
    code, out, err = run(tmp_path, text, "-o", "json")
    assert code == 1
    assert out == ""
    assert message in err
    assert err.count("\n") == 1  # one line, no traceback
    assert "Traceback" not in err


def test_missing_file_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "/nonexistent/file.yaml"]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_missing_parent_is_a_warning_and_the_subtree_waits(tmp_path: Path) -> None:
    text = HEADER.replace('spec: {min: {cpu: "4"}', 'spec: {parent: nowhere, min: {cpu: "4"}')
    code, out, err = run(tmp_path, text + pod_yaml("p", "1"), "-o", "json")
    assert code == 0
    report = json.loads(out)
    assert report["pods"]["a/p"]["state"] == "pending"
    assert "parent Cohort nowhere does not exist" in err


FOREST = (
    HEADER
    + """---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: proj, namespace: a}
spec: {tree: projects, max: {cpu: "2"}}
"""
)


def test_table_groups_the_nodes_by_tree(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, FOREST + pod_yaml("p1", "1") + pod_yaml("p2", "2"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[2] == "tree default"
    assert lines[3].startswith("└─ a (eq)")
    assert lines[4] == "tree projects"
    assert lines[5].startswith("└─ proj (eq)")
    assert "does not fit in ElasticQuota proj (tree projects)" in out


def test_json_names_each_node_s_tree_and_each_pod_s_quotas(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, FOREST + pod_yaml("p1", "1"), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["nodes"]["a"]["tree"] == "default"
    assert report["nodes"]["proj"]["tree"] == "projects"
    assert report["pods"]["a/p1"]["quota"] == "a"
    assert report["pods"]["a/p1"]["quotas"] == {"default": "a", "projects": "proj"}


def test_a_label_naming_a_quota_of_another_tree_is_refused(tmp_path: Path) -> None:
    text = FOREST + pod_yaml("p", "1", ", labels: {quotree.io/quota-name.projects: a}")
    code, _, err = run(tmp_path, text, "-o", "json")
    assert code == 1
    assert err.strip().endswith(
        "Pod a/p: rejected: ElasticQuota a does not cover namespace a in tree projects "
        "(quotas covering it: proj)"
    )


def test_kinds_the_simulator_does_not_read_are_skipped_and_named_once(tmp_path: Path) -> None:
    others = (
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: a}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: t, namespace: a}\n"
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: a}\n"
        "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d, namespace: a}\n"
    )
    code, out, err = run(tmp_path, HEADER + others + pod_yaml("p1", "1"), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["pods"]["a/p1"]["state"] == "admitted"
    assert err == (
        "quotree: note: skipped 4 objects of kinds the simulator does not read: "
        "ConfigMap, DaemonSet, Service x2\n"
    )
