"""Every example in examples/ runs through `quotree simulate` and shows what its comment says."""

from pathlib import Path
from typing import Any

import pytest

from quotree.simulate import simulate, to_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(name: str) -> dict[str, Any]:
    return to_json(simulate([EXAMPLES / name]))


def used(report: dict[str, Any], member: str, resource: str) -> str:
    return str(report["nodes"][member]["used"][resource])


def runtime(report: dict[str, Any], member: str, resource: str) -> str:
    return str(report["nodes"][member]["runtime"][resource])


def pod_states(report: dict[str, Any]) -> dict[str, str]:
    return {key: entry["state"] for key, entry in report["pods"].items()}


def test_every_example_is_covered() -> None:
    tested = {
        "koordinator-runtime.yaml",
        "capacity-story-1.yaml",
        "capacity-story-2.yaml",
        "kueue-story-1.yaml",
        "kueue-story-2.yaml",
        "nos-over-quota.yaml",
        "forest.yaml",
        "flavors.yaml",
        "gpu-memory.yaml",
        "gang.yaml",
        "native-gang.yaml",
        "reclaim-pays.yaml",
    }
    assert {p.name for p in EXAMPLES.glob("*.yaml")} == tested


def test_koordinator_runtime() -> None:
    report = run("koordinator-runtime.yaml")
    unit = "example.com/unit"
    assert {n: runtime(report, n, unit) for n in "abcd"} == {
        "a": "5",
        "b": "20",
        "c": "35",
        "d": "40",
    }
    assert {n: report["nodes"][n]["request"][unit] for n in "abcd"} == {
        "a": "5",
        "b": "20",
        "c": "40",
        "d": "70",
    }
    assert pod_states(report)["c/c-2"] == "pending"
    assert pod_states(report)["d/d-2"] == "pending"


def test_capacity_story_one() -> None:
    report = run("capacity-story-1.yaml")
    gpu = "nvidia.com/gpu"
    assert (used(report, "quota-a", gpu), runtime(report, "quota-a", gpu)) == ("4", "4")
    assert (used(report, "quota-b", gpu), runtime(report, "quota-b", gpu)) == ("6", "6")
    states = pod_states(report)
    assert sorted(k for k, s in states.items() if s == "reclaimed") == [
        "user-a/a-5",
        "user-a/a-6",
    ]
    assert states["user-a/a-7"] == "pending"
    for i in range(1, 5):
        assert report["pods"][f"user-a/a-{i}"]["capacity"] == "in-quota"


def test_capacity_story_two() -> None:
    report = run("capacity-story-2.yaml")
    gpu = "nvidia.com/gpu"
    assert [used(report, q, gpu) for q in ("quota-a", "quota-b", "quota-c")] == ["3", "4", "3"]
    states = pod_states(report)
    assert [k for k, s in states.items() if s != "admitted"] == ["user-a/a-4"]
    assert states["user-a/a-4"] == "reclaimed"


def test_kueue_story_one() -> None:
    report = run("kueue-story-1.yaml")
    assert runtime(report, "research", "cpu") == "50"
    assert runtime(report, "ml", "cpu") == "50"
    assert runtime(report, "production", "cpu") == "45"
    assert runtime(report, "batch", "cpu") == "45"
    assert pod_states(report) == {
        "research/train-1": "admitted",
        "research/train-2": "pending",
        "production/etl-1": "admitted",
    }


def test_kueue_story_two() -> None:
    report = run("kueue-story-2.yaml")
    assert runtime(report, "org-1", "cpu") == runtime(report, "team-1", "cpu") == "30"
    assert runtime(report, "special", "cpu") == "50"
    assert runtime(report, "org-2", "cpu") == runtime(report, "team-2", "cpu") == "0"
    assert pod_states(report) == {
        "org-1/job-1": "pending",
        "org-1/job-2": "admitted",
        "special/low-1": "admitted",
    }


def test_nos_over_quota() -> None:
    report = run("nos-over-quota.yaml")
    gpu = "nvidia.com/gpu"
    assert (used(report, "team-a", gpu), runtime(report, "team-a", gpu)) == ("6", "6")
    pods = report["pods"]
    assert pods["team-a/train-1"]["capacity"] == "in-quota"
    assert pods["team-a-dev/notebook-1"]["capacity"] == "in-quota"
    assert pods["team-a-dev/notebook-1"]["quota"] == "team-a"
    assert pods["team-a/sweep-1"]["capacity"] == "over-quota"
    assert pods["team-a/sweep-2"]["capacity"] == "over-quota"
    assert pods["team-a-dev/sweep-3"]["state"] == "reclaimed"
    assert pods["team-a-dev/sweep-4"]["state"] == "reclaimed"
    assert pods["team-b/infer-1"] == {
        "quota": "team-b",
        "state": "admitted",
        "capacity": "in-quota",
        "reason": pytest.approx(pods["team-b/infer-1"]["reason"]),
    }


def test_forest() -> None:
    report = run("forest.yaml")
    assert {n: used(report, n, "cpu") for n in ("team-a", "team-b", "proj-x", "proj-y")} == {
        "team-a": "4",
        "team-b": "5",
        "proj-x": "6",
        "proj-y": "3",
    }
    assert runtime(report, "team-a", "cpu") == "6"  # a-2 fits its team...
    assert {n: report["nodes"][n]["tree"] for n in ("engineering", "proj-x")} == {
        "engineering": "default",
        "proj-x": "projects",
    }
    assert pod_states(report) == {
        "team-a/a-1": "admitted",
        "team-b/b-1": "admitted",
        "team-a/a-2": "pending",
        "team-b/b-2": "admitted",
    }
    pods = report["pods"]
    assert pods["team-a/a-2"]["reason"].startswith(  # ...but not its project
        "does not fit in ElasticQuota proj-x (tree projects): cpu: used 6 + request 2 > runtime 6"
    )
    assert pods["team-b/b-1"]["quotas"] == {"default": "team-b", "projects": "proj-x"}
    assert pods["team-b/b-2"]["quotas"] == {"default": "team-b", "projects": "proj-y"}
    assert report["nodes"]["proj-x"]["pendingPods"] == 1


def test_flavors() -> None:
    report = run("flavors.yaml")
    a100, h100 = "nvidia.com/gpu@a100", "nvidia.com/gpu@h100"
    assert (used(report, "team-a", a100), used(report, "team-a", h100)) == ("4", "3")
    assert runtime(report, "team-a", h100) == "3"
    pods = report["pods"]
    flavors = {key: (entry["state"], entry.get("flavor")) for key, entry in pods.items()}
    assert flavors == {
        **{f"team-a/job-{i}": ("admitted", "a100") for i in range(1, 5)},
        **{f"team-a/job-{i}": ("admitted", "h100") for i in range(5, 8)},
        "team-b/infer-1": ("admitted", "a100"),
        "team-b/infer-2": ("pending", "a100"),
    }
    assert report["capacity"][a100] == "8"
    assert report["capacity"][h100] == "4"


def test_gpu_memory() -> None:
    report = run("gpu-memory.yaml")
    memory = "quotree.io/gpu-memory"
    assert report["capacity"][memory] == "696Gi"
    assert used(report, "team-a", memory) == "240Gi"
    assert used(report, "team-a", "nvidia.com/gpu@a100") == "3"
    pods = report["pods"]
    assert {k: (e["state"], e.get("flavor")) for k, e in pods.items()} == {
        "team-a/job-1": ("admitted", "a100"),
        "team-a/job-2": ("admitted", "a100"),
        "team-a/job-3": ("admitted", "a100"),
        "team-a/job-4": ("pending", "a100"),
    }
    assert (
        "quotree.io/gpu-memory: used 240Gi + request 80Gi > runtime 250Gi"
        in (pods["team-a/job-4"]["reason"])
    )


def test_gang() -> None:
    report = run("gang.yaml")
    assert used(report, "team", "nvidia.com/gpu") == "6"
    groups = {key: entry["state"] for key, entry in report["groups"].items()}
    assert groups == {
        "team/sweep": "admitted",
        "team/train-a": "admitted",
        "team/train-b": "pending",
    }
    states = pod_states(report)
    assert sorted(k for k, s in states.items() if s == "pending") == sorted(
        report["groups"]["team/train-b"]["pods"]
    )
    assert len([s for s in states.values() if s == "admitted"]) == 6
    assert report["groups"]["team/train-b"]["reason"] == (
        "pod group team/train-b (4 pods) does not fit in ElasticQuota team: nvidia.com/gpu: "
        "used 6 + request 4 > runtime 6 (min 6, cap 6)"
    )


def test_native_gang() -> None:
    report = run("native-gang.yaml")
    assert used(report, "team", "nvidia.com/gpu") == "6"
    groups = {key: (entry["state"], entry["size"]) for key, entry in report["groups"].items()}
    assert groups == {"team/train": ("admitted", 4), "team/eval": ("incomplete", 3)}
    states = pod_states(report)
    assert sorted(k for k, s in states.items() if s == "pending") == [
        "team/eval-0",
        "team/eval-1",
        "team/report-0",
        "team/sweep-2",
    ]
    assert "2 of 3 pods exist" in report["groups"]["team/eval"]["reason"]
    assert report["pods"]["team/report-0"]["reason"].startswith(
        "waiting: its PodGroup team/reports does not exist yet"
    )


def test_reclaim_pays() -> None:
    report = run("reclaim-pays.yaml")
    gpu = "nvidia.com/gpu"
    assert pod_states(report) == {
        "batch/train": "admitted",
        "burst/job-1": "admitted",
        "burst/job-2": "admitted",
        "burst/job-3": "admitted",
        "burst/job-4": "reclaimed",
        "team-x/small": "pending",
        "serve/web": "admitted",
    }
    assert (used(report, "batch", gpu), runtime(report, "batch", gpu)) == ("8", "7")
    assert report["pods"]["team-x/small"]["reason"].endswith(
        "waits: taking 8 nvidia.com/gpu from ElasticQuota batch would leave it borrowing "
        "less than ElasticQuota team-x by weight (nvidia.com/gpu: batch would borrow 0 at "
        "weight 8, team-x 1 at weight 8)"
    )
