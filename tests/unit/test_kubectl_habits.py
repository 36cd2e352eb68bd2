"""`kubectl quotree` behaves like kubectl: global flags anywhere on the line, the context's
namespace without `-n`, exit codes a pipeline can read; `why` on a pod that can never fit.

The command line runs `main` against a stand-in kubectl (a shell script that logs its
arguments and answers `config view` and `get` as the real one would).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from quotree_kubectl.cli import EVICTS, REFUSED, main
from quotree_kubectl.cluster import ClusterState
from quotree_kubectl.why import why
from tests.unit.live_objects import fake_kubectl, live_cluster, quota_pod


@pytest.mark.parametrize(
    "argv",
    [
        ["-n", "ns-a", "why", "a-2"],
        ["why", "a-2", "-n", "ns-a"],
        ["why", "-n", "ns-a", "a-2"],
        ["--namespace=ns-a", "why", "a-2"],
        ["--context", "lab", "-n", "ns-a", "why", "a-2"],
        ["why", "a-2", "--context", "lab", "--namespace", "ns-a"],
    ],
)
def test_global_flags_go_before_or_after_the_command(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = fake_kubectl(tmp_path, monkeypatch, live_cluster(), namespace="elsewhere")
    assert main(argv) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.startswith("Pod ns-a/a-2\n")
    calls = log.read_text().splitlines()
    if "--context" in argv:
        assert all(call.startswith("--context lab ") for call in calls)
    assert not any(" config " in f" {call} " for call in calls)  # -n given: not asked


def test_a_flag_after_the_command_wins_over_the_same_flag_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_kubectl(tmp_path, monkeypatch, live_cluster())
    assert main(["-n", "ns-b", "why", "a-2", "-n", "ns-a"]) == 0
    assert capsys.readouterr().out.startswith("Pod ns-a/a-2\n")


def test_without_n_the_namespace_is_the_contexts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = fake_kubectl(tmp_path, monkeypatch, live_cluster(), namespace="ns-a")
    assert main(["--kubeconfig", "/some/config", "why", "a-2"]) == 0
    assert capsys.readouterr().out.startswith("Pod ns-a/a-2\n")
    config = next(c for c in log.read_text().splitlines() if " config " in f" {c} ")
    assert config.startswith("--kubeconfig /some/config config view --minify")


def test_without_n_and_a_context_namespace_it_is_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_kubectl(tmp_path, monkeypatch, live_cluster(), namespace="")
    assert main(["why", "a-2"]) == 1
    assert "pod default/a-2 not found" in capsys.readouterr().err


def test_why_refuses_all_namespaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_kubectl(tmp_path, monkeypatch, live_cluster())
    assert main(["why", "a-2", "-A"]) == 1
    assert "give its namespace with -n, not -A" in capsys.readouterr().err


def _proposal(tmp_path: Path, text: str) -> str:
    path = tmp_path / "proposal.yaml"
    path.write_text(text)
    return str(path)


ADMITS = """apiVersion: quotree.io/v1alpha1
kind: Cohort
metadata: {name: research}
spec: {min: {cpu: "6"}, max: {cpu: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: node-3}
status:
  allocatable: {cpu: "8"}
  conditions: [{type: Ready, status: "True"}]
"""

REFUSED_MIN = """apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: team-b, namespace: ns-b}
spec: {parent: research, min: {cpu: "3"}, max: {cpu: "8"}}
"""

# team-a's min grows to 7 (research's to 8): team-b's pod, 2 cpu above its new min 1, is
# taken back for team-a's waiting pod.
RECLAIMS = """apiVersion: v1
kind: Node
metadata: {name: node-3}
status:
  allocatable: {cpu: "8"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: quotree.io/v1alpha1
kind: Cohort
metadata: {name: research}
spec: {min: {cpu: "8"}, max: {cpu: "8"}}
---
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


@pytest.mark.parametrize(
    ("proposal", "code", "words"),
    [
        (ADMITS, 0, "would be admitted"),
        (REFUSED_MIN, REFUSED, "refused: ElasticQuota team-b"),
        (RECLAIMS, EVICTS, "would be reclaimed"),
    ],
)
@pytest.mark.parametrize("output", ["table", "json"])
def test_what_if_exit_codes(
    proposal: str,
    code: int,
    words: str,
    output: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_kubectl(tmp_path, monkeypatch, live_cluster())
    assert main(["what-if", _proposal(tmp_path, proposal), "-o", output]) == code
    out = capsys.readouterr().out
    if output == "table":
        assert words in out
    else:
        json.loads(out)


def _big_pod(state: ClusterState, cpu: str, **labels: str) -> ClusterState:
    body: dict[str, Any] = quota_pod(
        "ns-a", "big", cpu, gated=True, created="2026-01-01T00:00:09Z", quota="team-a"
    )
    body["metadata"]["labels"].update(labels)
    state.pods.append(body)
    return state


def test_why_says_a_pod_over_its_quotas_max_never_fits() -> None:
    state = live_cluster()
    state.quotas[0]["spec"]["max"] = {"cpu": "6"}
    text = why(_big_pod(state, "7"), "ns-a", "big", {})
    assert "never:   it can never fit as the tree stands, whatever finishes:" in text
    assert "cpu: the request 7 is over ElasticQuota team-a's max 6 by 1" in text
    assert "freed by" not in text  # no advice to wait
    assert "what would let it in: a smaller request, or a higher bound" in text


def test_why_names_the_cohort_max_when_the_quota_has_none() -> None:
    state = live_cluster()
    del state.quotas[0]["spec"]["max"]
    text = why(_big_pod(state, "20"), "ns-a", "big", {})
    assert "cpu: the request 20 is over Cohort research's max 8 by 12" in text


def test_why_names_the_cluster_capacity_when_nothing_caps_the_pod() -> None:
    state = live_cluster()
    del state.quotas[0]["spec"]["max"]
    del state.cohorts[0]["spec"]["max"]
    text = why(_big_pod(state, "20"), "ns-a", "big", {})
    assert "cpu: the request 20 is over the cluster's capacity 8 by 12" in text


def test_why_names_a_borrowing_limit_cap() -> None:
    state = live_cluster()
    state.quotas[0]["spec"]["borrowingLimit"] = {"cpu": "1"}  # cap min 4 + 1 = 5
    text = why(_big_pod(state, "6"), "ns-a", "big", {})
    assert "cpu: the request 6 is over ElasticQuota team-a's min plus borrowingLimit 5 by 1" in (
        text
    )


def test_why_says_a_non_preemptible_pod_over_its_min_never_fits() -> None:
    state = _big_pod(live_cluster(), "5", **{"quotree.io/preemptible": "false"})
    text = why(state, "ns-a", "big", {})
    assert "cpu: the non-preemptible request 5 is over ElasticQuota team-a's min 4 by 1" in text


def test_why_still_suggests_waiting_for_a_pod_that_fits_one_day() -> None:
    text = why(live_cluster(), "ns-a", "a-2", {})
    assert "never:" not in text
    assert "what would let it in:" in text
