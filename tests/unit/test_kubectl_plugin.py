"""`kubectl quotree` on a live cluster given as API objects (no cluster: views are pure)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from quotree.report import render_tree, usage_bar
from quotree.simulate import render_table, simulate, to_json
from quotree_kubectl.cli import main, table_report
from quotree_kubectl.cluster import PluginError, live_documents
from quotree_kubectl.tree_view import pending_reasons, tree_report
from quotree_kubectl.what_if import render_what_if, what_if
from quotree_kubectl.why import why
from tests.unit.live_objects import cluster_node, live_cluster, quota_pod


def _docs(text: str) -> list[tuple[str, dict[str, Any]]]:
    return [(f"proposal {i}", d) for i, d in enumerate(yaml.safe_load_all(text)) if d]


def test_tree_shows_the_status_the_operator_wrote() -> None:
    report = tree_report(live_cluster(), {"ns-a/a-2": "does not fit: the operator's words"})
    team_a = report["nodes"]["team-a"]
    assert (team_a["used"], team_a["runtime"], team_a["request"]) == (
        {"cpu": "5"},
        {"cpu": "5"},
        {"cpu": "7"},
    )
    assert team_a["parent"] == "research"
    assert team_a["min"] == {"cpu": "4"}
    assert report["capacity"] == {"cpu": "8"}  # the NotReady node does not count
    assert report["pods"]["ns-a/a-2"] == {
        "quota": "team-a",
        "state": "pending",
        "capacity": None,
        "reason": "does not fit: the operator's words",
    }
    assert "kube-system/dns" not in report["pods"]  # not quotree's
    text = render_tree(report)
    assert "   ├─ team-a (eq)" in text
    assert "ns-a/a-2" in text
    assert "the operator's words" in text


def test_pods_without_the_quota_label_count_by_the_quota_of_their_namespace() -> None:
    """A pod created gated before the operator knew its quota is admitted without the
    quota-name label: it is the quota's all the same (in the counts, not unmanaged)."""
    state = live_cluster()
    state.pods += [
        quota_pod("ns-b", "b-2", "1", gated=False, created="2026-01-01T00:00:03Z"),
        quota_pod("ns-a", "a-3", "1", gated=True, created="2026-01-01T00:00:04Z"),
        quota_pod("elsewhere", "x", "1", gated=False, created="2026-01-01T00:00:05Z"),
    ]
    report = tree_report(state, {})
    assert report["pods"]["ns-b/b-2"] == {
        "quota": "team-b",
        "state": "admitted",
        "capacity": None,
        "reason": "",
    }
    assert report["pods"]["ns-a/a-3"]["quota"] == "team-a"
    assert "elsewhere/x" not in report["pods"]  # no quota covers its namespace
    assert "kube-system/dns" not in report["pods"]
    lines = render_tree(table_report(state, report)).splitlines()
    assert lines[0] == "cluster (capacity: cpu 7; unmanaged pods hold cpu 1 of 8 allocatable)"
    assert "pods: 3 admitted, 2 pending" in lines


def test_the_plugin_and_simulate_draw_with_the_same_renderer() -> None:
    sim = simulate(["examples/koordinator-runtime.yaml"])
    assert render_table(sim) == render_tree(to_json(sim), sim.warnings)


def test_usage_bars() -> None:
    entry = {"used": {"cpu": "2"}, "runtime": {"cpu": "4"}}
    assert usage_bar(entry, "cpu", 8) == "[####====]"
    over = {"used": {"cpu": "4"}, "runtime": {"cpu": "2"}}
    assert usage_bar(over, "cpu", 8) == "[####!!!!]"
    assert usage_bar({"used": {}, "runtime": {}}, "cpu", 4) == "[    ]"
    report = tree_report(live_cluster(), {})
    assert "USED/RUNTIME" in render_tree(report, bar_width=10)
    assert "USED/RUNTIME" not in render_tree(report)


def test_pending_reasons_take_the_latest_event() -> None:
    events = [
        {
            "reason": "Pending",
            "involvedObject": {"kind": "Pod", "namespace": "n", "name": "p"},
            "lastTimestamp": "2026-01-01T00:00:05Z",
            "message": "new",
        },
        {
            "reason": "Pending",
            "involvedObject": {"kind": "Pod", "namespace": "n", "name": "p"},
            "lastTimestamp": "2026-01-01T00:00:01Z",
            "message": "old",
        },
        {"reason": "Admitted", "involvedObject": {"kind": "Pod", "namespace": "n", "name": "q"}},
    ]
    assert pending_reasons(events) == {"n/p": "new"}


def test_why_gives_the_engines_numbers_and_what_would_let_it_in() -> None:
    text = why(live_cluster(), "ns-a", "a-2", {"ns-a/a-2": "from the event"})
    assert "quota:   ElasticQuota team-a in namespace ns-a, under Cohort research" in text
    assert "operator: from the event" in text
    assert (
        "engine:  does not fit in ElasticQuota team-a: cpu: used 5 + request 2 > runtime 5" in text
    )
    assert "short by 2" in text
    assert "Cohort research: used 8, runtime 8, min 6, cap 8  (the request goes over the cap)" in (
        text
    )
    assert "research may never use more than 8 cpu" in text


def test_why_names_what_is_lent_when_no_cap_holds_the_pod_back() -> None:
    state = live_cluster()
    state.cohorts[0]["spec"]["max"] = {"cpu": "20"}  # the cluster (8 cpu) is the limit now
    text = why(state, "ns-a", "a-2", {})
    assert "short by 2" in text
    assert "may never use more than" not in text
    assert "2 freed by team-a's own admitted pods finishing" in text
    assert "idle quota: it needs 2 more cpu" in text
    assert "lent now: team-b uses 3, 1 above its min 2" in text


def test_why_for_admitted_unmanaged_and_unknown_pods() -> None:
    state = live_cluster()
    assert "state:   admitted" in why(state, "ns-a", "a-1", {})
    assert "not managed by quotree" in why(state, "kube-system", "dns", {})
    with pytest.raises(PluginError, match="pod ns-a/nope not found"):
        why(state, "ns-a", "nope", {})


def test_why_says_when_a_pod_fits_now() -> None:
    state = live_cluster()
    state.pods = [p for p in state.pods if p["metadata"]["name"] != "b-1"]
    text = why(state, "ns-a", "a-2", {})
    assert "it fits now" in text


def test_live_documents_keep_admitted_pods_admitted() -> None:
    state = live_cluster()
    state.pods[0]["spec"].pop("nodeName")  # gate removed, not bound yet
    docs = dict(live_documents(state))
    assert docs["cluster Pod ns-a/a-1"]["spec"]["nodeName"]
    assert "nodeName" not in docs["cluster Pod ns-a/a-2"]["spec"]
    assert "nodeName" not in state.pods[0]["spec"]  # the input is not changed


def test_what_if_a_larger_cohort_admits_the_waiting_pod() -> None:
    proposal = _docs(
        """
apiVersion: v1
kind: Node
metadata: {name: node-3}
status:
  allocatable: {cpu: "8"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: quotree.io/v1alpha1
kind: Cohort
metadata: {name: research}
spec: {min: {cpu: "6"}, max: {cpu: "10"}}
"""
    )
    result = what_if(live_cluster(), proposal)
    assert result.refused == []
    assert result.before["nodes"]["team-a"]["runtime"] == {"cpu": "5"}
    assert result.after["nodes"]["team-a"]["runtime"] == {"cpu": "7"}
    assert result.after["pods"]["ns-a/a-2"]["state"] == "admitted"
    text = render_what_if(result)
    assert "team-a                  cpu                            5  →  7  (changed)" in text
    assert "ns-a/a-2" in text
    assert "would be admitted" in text
    assert "applied (not written): Node node-3, Cohort research" in text


def test_what_if_refuses_with_the_webhooks_message() -> None:
    proposal = _docs(
        """
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: team-b, namespace: ns-b}
spec: {parent: research, min: {cpu: "3"}, max: {cpu: "8"}}
"""
    )
    result = what_if(live_cluster(), proposal)
    assert result.refused == [
        "ElasticQuota team-b: min cpu 3 would make the children of Cohort research need 7 "
        "in all, over research's min of 6"
    ]
    assert result.before == result.after
    assert "pods: no change" in render_what_if(result)


def test_what_if_reclaims_when_a_min_grows() -> None:
    state = live_cluster()
    state.cohorts[0]["spec"]["min"] = {"cpu": "8"}
    proposal = _docs(
        """
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: team-b, namespace: ns-b}
spec: {parent: research, min: {cpu: "1"}, max: {cpu: "8"}}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: team-a, namespace: ns-a}
spec: {parent: research, min: {cpu: "7"}, max: {cpu: "8"}}
"""
    )
    state.nodes.append(cluster_node("node-3", "8"))
    result = what_if(state, proposal)
    assert result.refused == []
    assert result.after["nodes"]["team-a"]["runtime"]["cpu"] == "7"
    assert result.after["pods"]["ns-b/b-1"]["state"] == "reclaimed"
    assert result.after["pods"]["ns-a/a-2"]["state"] == "admitted"
    assert "would be reclaimed" in render_what_if(result)


def test_what_if_takes_only_tree_objects_and_nodes() -> None:
    with pytest.raises(PluginError, match="what-if takes Cohort, ElasticQuota and Node"):
        what_if(live_cluster(), _docs("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"))


def test_cli_errors_are_one_line(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    assert main(["what-if", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kubectl quotree: error: ")
    assert err.count("\n") == 1
    monkeypatch.setenv("QUOTREE_KUBECTL", str(tmp_path / "no-such-kubectl"))
    assert main(["tree"]) == 1
    err = capsys.readouterr().err
    assert "not found on PATH" in err
    assert err.count("\n") == 1


def test_waiting_pods_come_after_the_running_ones() -> None:
    """All created in the same second: a gated pod named first must not take a runner's place."""
    state = live_cluster()
    for p in state.pods:
        p["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    state.pods[2]["metadata"]["name"] = "a-0"  # the gated pod sorts first by name
    order = [o for o, d in live_documents(state) if d.get("kind") == "Pod"]
    assert order[-1] == "cluster Pod ns-a/a-0"
    result = what_if(state, [])
    assert result.before["pods"]["ns-a/a-1"]["state"] == "admitted"
    assert result.before["pods"]["ns-a/a-0"]["state"] == "pending"


def test_simulate_runs_the_live_cluster_then_the_files(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = live_cluster()
    items = [*state.nodes, *state.cohorts, *state.quotas, *state.pods]
    answer = tmp_path / "cluster.json"
    answer.write_text(json.dumps({"kind": "List", "items": items}))
    fake = tmp_path / "kubectl"
    fake.write_text(f"#!/bin/sh\ncat {answer}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("QUOTREE_KUBECTL", str(fake))
    extra = tmp_path / "more.yaml"
    extra.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a-9, namespace: ns-a}\n"
        "spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}\n"
    )
    assert main(["simulate", str(extra), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["nodes"]["team-a"]["min"] == {"cpu": "4"}
    assert list(report["pods"])[-1] == "ns-a/a-9"  # after the live pods
    assert main(["simulate", str(tmp_path / "missing.yaml")]) == 1
    assert capsys.readouterr().err.startswith("kubectl quotree: error: ")


def _grouped(state: Any, size: int, count: int) -> Any:
    """`state` with `count` gated 2-cpu pods of group mpi (size `size`) in ns-a."""
    for i in range(count):
        body = quota_pod("ns-a", f"mpi-{i}", "2", gated=True, created=f"2026-01-01T00:01:0{i}Z")
        body["metadata"]["labels"]["quotree.io/pod-group"] = "mpi"
        body["metadata"]["annotations"] = {"quotree.io/pod-group-size": str(size)}
        state.pods.append(body)
    return state


def test_tree_counts_pod_groups_and_lists_the_ones_that_wait() -> None:
    state = _grouped(live_cluster(), 2, 2)
    report = tree_report(state, {"ns-a/mpi-0": "the group does not fit"})
    assert report["groups"] == {
        "ns-a/mpi": {
            "name": "mpi",
            "quota": "team-a",
            "state": "pending",
            "size": 2,
            "min": 2,
            "pods": ["ns-a/mpi-0", "ns-a/mpi-1"],
            "reason": "the group does not fit",
        }
    }
    text = render_tree(report)
    assert "pod groups: 1 pending" in text
    assert "the group does not fit" in text


def test_why_answers_for_the_group_of_a_pod() -> None:
    text = why(_grouped(live_cluster(), 3, 2), "ns-a", "mpi-1", {})
    assert "group:   pod group ns-a/mpi, incomplete: 2 of 3 pods exist" in text
    assert "state:   pending (gated by quotree.io/admission) with its group" in text
    assert "engine:  " in text
    assert "mpi" in text.split("engine:  ")[1]


def test_why_shows_the_reason_reclaim_would_not_pay() -> None:
    """Two borrowers in research: team-a's 1-cpu pod fits team-a but not research, and
    taking team-b's 5-cpu pod would leave team-b borrowing less than team-a by weight."""
    state = live_cluster()
    for obj in state.quotas:
        obj["spec"]["min"] = {"cpu": "0"}
    pods = {p["metadata"]["name"]: p for p in state.pods}
    pods["a-1"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    pods["b-1"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5"
    pods["a-2"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    text = why(state, "ns-a", "a-2", {})
    # The engine's reason says so before the delay has passed (its dry run), not "reclaimed
    # in 30 s": no separate outlook line is needed.
    assert "engine:  does not fit in Cohort research" in text
    assert "reclaim: once its reclaim delay has passed" not in text
    assert (
        "waits: taking 5 cpu from ElasticQuota team-b would leave it borrowing less than "
        "ElasticQuota team-a by weight (cpu: team-b would borrow 0 at weight 8000, team-a 4 at "
        "weight 8000)"
    ) in text
