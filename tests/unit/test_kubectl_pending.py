"""`kubectl quotree pending`: the waiting units in the engine's order, with positions, and
its namespace rules (`-n`, `-A`, the context's namespace, `--quota`, `--cohort`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quotree_kubectl.cli import main
from quotree_kubectl.cluster import ClusterState, PluginError
from quotree_kubectl.pending import Selection, age, pending, render_pending
from tests.unit.live_objects import fake_kubectl, live_cluster, quota_pod
from tests.unit.objects import cohort, quota

#: 2026-01-01T00:05:00Z
NOW = 1767225900.0


def _busy() -> ClusterState:
    """live_cluster with three more 1-cpu pods waiting in each of team-a and team-b."""
    state = live_cluster()
    for i in range(3):
        for namespace, name in (("ns-a", "team-a"), ("ns-b", "team-b")):
            state.pods.append(
                quota_pod(
                    namespace,
                    f"{name[-1]}-x{i}",
                    "1",
                    gated=True,
                    created=f"2026-01-01T00:01:0{i}Z",
                    quota=name,
                )
            )
    return state


def test_pending_lists_every_unit_in_the_engines_order_with_positions() -> None:
    units = pending(_busy(), Selection())
    assert [u.key for u in units] == [
        "ns-b/b-x0",
        "ns-a/a-2",
        "ns-b/b-x1",
        "ns-a/a-x0",
        "ns-b/b-x2",
        "ns-a/a-x1",
        "ns-a/a-x2",
    ]
    assert [u.order for u in units] == list(range(1, 8))
    assert units[1].positions == [("team-a", 1), ("research", 2)]
    assert units[6].positions == [("team-a", 4), ("research", 7)]
    text = render_pending(units, NOW).splitlines()
    assert text[0].split() == [
        "#",
        "NAMESPACE",
        "NAME",
        "KIND",
        "QUOTA",
        "IN",
        "QUOTA",
        "UNDER",
        "PRIORITY",
        "AGE",
        "REQUEST",
        "REASON",
    ]
    assert text[2].split()[:11] == [
        "2",
        "ns-a",
        "a-2",
        "Pod",
        "team-a",
        "1",
        "research",
        "2",
        "0",
        "4m",
        "cpu=2",
    ]
    assert "does not fit in ElasticQuota team-a" in text[2]


def test_the_order_is_the_order_the_engine_admits_in_as_research_grows() -> None:
    """Raise research's max one cpu at a time (with node room): each step admits the next
    unit listed, in the plugin's rebuilt engine as in the operator's. Every unit asks for
    1 cpu: a smaller unit behind a larger one may go first (the queue does not block)."""
    state = _busy()
    a_2 = next(p for p in state.pods if p["metadata"]["name"] == "a-2")
    a_2["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    state.nodes[0]["status"]["allocatable"]["cpu"] = "64"
    state.nodes[0]["status"]["capacity"] = {"cpu": "64"}
    listed = [u.key for u in pending(state, Selection())]
    admitted: list[str] = []
    for grown in range(9, 20):
        state.cohorts[0]["spec"]["max"] = {"cpu": str(grown)}
        now = {u.key for u in pending(state, Selection())}
        admitted += [key for key in listed if key not in now and key not in admitted]
        for pod in state.pods:  # what the operator does: the admitted pods' gates go
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            if key in admitted:
                pod["spec"].pop("schedulingGates", None)
                pod["spec"]["nodeName"] = "node-1"
    # team-a's last pod would take it over its max (8): it is listed last and never admitted.
    assert listed[-1] == "ns-a/a-x2"
    assert admitted == listed[:-1]


def test_pending_selects_a_namespace_a_quota_or_a_cohort() -> None:
    state = _busy()
    ns_a = pending(state, Selection(namespace="ns-a"))
    assert [u.key for u in ns_a] == ["ns-a/a-2", "ns-a/a-x0", "ns-a/a-x1", "ns-a/a-x2"]
    assert [u.order for u in ns_a] == [2, 4, 6, 7]  # the place in the whole tree stays
    assert [u.key for u in pending(state, Selection(quota="team-b"))] == [
        "ns-b/b-x0",
        "ns-b/b-x1",
        "ns-b/b-x2",
    ]
    assert len(pending(state, Selection(cohort="research"))) == 7
    with pytest.raises(PluginError, match="Cohort nope not found"):
        pending(state, Selection(cohort="nope"))
    with pytest.raises(PluginError, match="ElasticQuota research not found"):
        pending(state, Selection(quota="research"))


def test_a_deeper_tree_gives_a_position_under_each_ancestor() -> None:
    state = _busy()
    state.cohorts = [
        cohort("org", min={"cpu": "6"}, max={"cpu": "8"}),
        {**state.cohorts[0], "spec": {**state.cohorts[0]["spec"], "parent": "org"}},
    ]
    state.quotas.append(quota("team-c", "ns-c", "org", max={"cpu": "4"}))
    state.pods.append(
        quota_pod("ns-c", "c-0", "1", gated=True, created="2026-01-01T00:00:30Z", quota="team-c")
    )
    units = {u.key: u for u in pending(state, Selection())}
    assert units["ns-c/c-0"].positions[0] == ("team-c", 1)
    assert [name for name, _ in units["ns-c/c-0"].positions] == ["team-c", "org"]
    assert [name for name, _ in units["ns-a/a-2"].positions] == ["team-a", "research", "org"]
    assert sorted(at for u in units.values() for name, at in u.positions if name == "org") == (
        list(range(1, 9))
    )


def test_age_is_written_as_kubectl_writes_it() -> None:
    assert [age(s) for s in (5, 59, 60, 3599, 7199, 7200, 172799, 172800)] == [
        "5s",
        "59s",
        "1m",
        "59m",
        "119m",
        "2h",
        "47h",
        "2d",
    ]


def test_pending_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_kubectl(tmp_path, monkeypatch, _busy(), namespace="ns-b")
    assert main(["pending"]) == 0  # the context's namespace
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[2] for row in rows] == ["b-x0", "b-x1", "b-x2"]
    assert main(["pending", "-A", "-o", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    assert len(items) == 7
    assert items[1]["positions"] == {"team-a": 1, "research": 2}
    assert items[1]["request"] == {"cpu": "2"}
    assert main(["-n", "ns-a", "pending", "--quota", "team-a"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 5
    assert main(["pending", "--cohort", "research"]) == 0  # every namespace
    assert len(capsys.readouterr().out.splitlines()) == 8
    assert main(["pending", "-A", "-n", "ns-a"]) == 1
    assert "give -n NAMESPACE or -A, not both" in capsys.readouterr().err
    assert main(["pending", "-n", "elsewhere"]) == 0
    assert capsys.readouterr().out == "No waiting pods or pod groups.\n"
