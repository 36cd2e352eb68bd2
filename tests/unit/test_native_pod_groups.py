"""Kubernetes' own pod groups in the engine (docs/reference/pods.md, "Pod groups"): a pod that names
a PodGroup with a gang policy belongs to it (size = `minCount`), a basic policy groups
nothing, a PodGroup not there yet keeps its pods waiting, and the PodGroup wins over
quotree's label."""

from __future__ import annotations

import dataclasses

import pytest
from builders import arrive, cohort, engine, pod, quota, states

from quotree.engine import Engine
from quotree.groups import POD_GROUP_LABEL, GroupSpec, JobFacts
from quotree.models import ConfigError
from quotree.native_groups import (
    PodGroupFacts,
    label_disagreement,
    pod_group_facts,
    workload_policies,
)
from quotree.podfacts import PodFacts, facts_from_wire, facts_to_wire, pod_facts


def linked(ns: str, name: str, pod_group: str, amount: int = 1, **kw: object) -> PodFacts:
    return dataclasses.replace(pod(ns, name, amount, **kw), pod_group=pod_group)  # type: ignore[arg-type]


def gang(ns: str, name: str, min_count: int | None) -> PodGroupFacts:
    return PodGroupFacts(ns, name, min_count)


def put(eng: Engine, pod_group: PodGroupFacts) -> None:
    eng.group_ledger.observe_pod_group(pod_group.key, pod_group)


def admitted(eng: Engine) -> set[str]:
    return {k for k, s in states(eng).items() if s == "admitted"}


def test_the_pods_of_a_gang_podgroup_are_one_group_of_min_count() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6)
    put(eng, gang("q", "train", 3))
    arrive(eng, linked("q", "t-0", "train"), linked("q", "t-1", "train"))
    assert admitted(eng) == set()
    view = eng.groups["q/train"]
    assert (view.state, view.size, view.min) == ("incomplete", 3, 3)
    assert "2 of 3 pods exist" in eng.pods["q/t-0"].reason
    arrive(eng, linked("q", "t-2", "train"))
    assert admitted(eng) == {"q/t-0", "q/t-1", "q/t-2"}
    assert eng.groups["q/train"].state == "admitted"


def test_a_gang_podgroup_over_the_room_waits_whole_until_the_quota_grows() -> None:
    eng = engine(quota("q", min=3, max=3), capacity=8)
    put(eng, gang("q", "train", 4))
    arrive(eng, *(linked("q", f"t-{i}", "train") for i in range(4)))
    assert admitted(eng) == set()
    assert "pod group q/train can never fit: its 4 pods request x 4" in eng.groups["q/train"].reason
    eng.set_config(quota("q", min=4, max=4))
    out = eng.decide()
    assert sorted(k for k, _ in out.admitted) == [f"q/t-{i}" for i in range(4)]


def test_pods_of_a_podgroup_not_there_yet_wait_and_say_so_then_join_it() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6)
    arrive(eng, linked("q", "t-0", "train"), linked("q", "t-1", "train"))
    assert admitted(eng) == set()
    assert eng.pods["q/t-0"].reason.startswith("waiting: its PodGroup q/train does not exist yet")
    assert dict(eng.groups) == {}
    put(eng, gang("q", "train", 2))
    eng.decide()
    assert admitted(eng) == {"q/t-0", "q/t-1"}
    assert eng.groups["q/train"].pods == ("q/t-0", "q/t-1")


def test_a_basic_podgroup_groups_nothing() -> None:
    eng = engine(quota("q", min=2, max=2), capacity=6)
    put(eng, gang("q", "web", None))
    arrive(eng, *(linked("q", f"w-{i}", "web") for i in range(3)))
    assert admitted(eng) == {"q/w-0", "q/w-1"}  # one by one, as single pods
    assert dict(eng.groups) == {}


def test_the_podgroup_wins_over_a_quotree_label_naming_another_group() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6)
    put(eng, gang("q", "train", 2))
    labelled = [
        dataclasses.replace(linked("q", f"t-{i}", "train"), group=GroupSpec("other", 5, 5))
        for i in range(2)
    ]
    arrive(eng, *labelled)
    assert admitted(eng) == {"q/t-0", "q/t-1"}
    assert set(eng.groups) == {"q/train"}


def test_a_jobs_own_podgroup_is_the_jobs_group_evicted_through_the_job() -> None:
    eng = engine(
        cohort("c", min=8, max=8),
        quota("a", "c", min=4, max=8),
        quota("b", "c", min=4, max=8),
        capacity=8,
        instant_evictions=False,
    )
    # The job controller's own: an Indexed Job of 6, its PodGroup under another name.
    eng.observe_job(JobFacts("b", "train", "uid", parallelism=6, completions=6))
    put(eng, gang("b", "train-pg", 6))
    for i in range(6):
        facts = linked("b", f"train-{i}", "train-pg")
        eng.observe_pod(dataclasses.replace(facts, owner_job="train"))
    eng.decide()
    assert len(admitted(eng)) == 6
    assert set(eng.groups) == {"b/train-pg"}  # one group, under the native name
    eng.observe_pod(pod("a", "mine", 4))
    out = eng.decide()
    assert sorted(e.pod for e in out.evictions) == [f"b/train-{i}" for i in range(6)]
    assert {(e.group, e.job, e.kind) for e in out.evictions} == {
        ("b/train-pg", "train", "Reclaimed")
    }


def test_a_running_pod_whose_podgroup_is_unknown_is_counted_on_its_own() -> None:
    eng = engine(quota("q", min=6, max=6), capacity=6)
    arrive(eng, linked("q", "t-0", "train", gated=False))
    assert admitted(eng) == {"q/t-0"}


def test_without_the_api_pods_name_no_podgroup_and_groups_are_as_before() -> None:
    """A cluster without the API serves no `spec.schedulingGroup`: pods read as before,
    quotree's own groups unchanged."""
    body = {
        "metadata": {
            "name": "p",
            "namespace": "q",
            "labels": {POD_GROUP_LABEL: "g"},
            "annotations": {"quotree.io/pod-group-size": "2"},
        },
        "spec": {"containers": [{"name": "c"}]},
    }
    facts = pod_facts(body)
    assert facts.pod_group is None
    assert facts.group == GroupSpec("g", 2, 2)


def test_a_pod_body_names_its_podgroup_and_keeps_it_over_the_wire() -> None:
    body = {
        "metadata": {"name": "p", "namespace": "q", "labels": {POD_GROUP_LABEL: "g"}},
        "spec": {"containers": [{"name": "c"}], "schedulingGroup": {"podGroupName": "g"}},
    }
    facts = pod_facts(body)  # the label alone (no size) is no error: the PodGroup says it
    assert (facts.pod_group, facts.group) == ("g", None)
    assert facts_from_wire(facts_to_wire(facts)).pod_group == "g"


def test_podgroup_objects_read_gang_basic_and_from_the_workload() -> None:
    def pg(spec: dict[str, object]) -> dict[str, object]:
        return {"metadata": {"name": "pg", "namespace": "q"}, "spec": spec}

    assert pod_group_facts(pg({"schedulingPolicy": {"gang": {"minCount": 3}}})) == gang(
        "q", "pg", 3
    )
    assert pod_group_facts(pg({"schedulingPolicy": {"basic": {}}})).min_count is None
    workload = {
        "metadata": {"name": "w", "namespace": "q"},
        "spec": {
            "podGroupTemplates": [{"name": "t", "schedulingPolicy": {"gang": {"minCount": 2}}}]
        },
    }
    ref = {"podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}}}
    assert pod_group_facts(pg(ref), {"q/w": workload_policies(workload)}).min_count == 2


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"schedulingPolicy": {}}, "PodGroup q/pg: schedulingPolicy must have exactly one of"),
        (
            {"schedulingPolicy": {"gang": {"minCount": 0}}},
            "PodGroup q/pg: schedulingPolicy.gang.minCount must be a whole number >= 1, not 0",
        ),
        ({}, "PodGroup q/pg: no spec.schedulingPolicy, and no template None"),
    ],
)
def test_a_podgroup_that_cannot_be_read_is_one_line(spec: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        pod_group_facts({"metadata": {"name": "pg", "namespace": "q"}, "spec": spec})
    assert str(caught.value).startswith(message)


def test_the_label_must_name_the_podgroup_the_pod_names() -> None:
    assert label_disagreement({POD_GROUP_LABEL: "train"}, "train", "Pod q/p") is None
    assert label_disagreement({}, "train", "Pod q/p") is None
    assert label_disagreement({POD_GROUP_LABEL: "none"}, "train", "Pod q/p") is None
    assert label_disagreement({POD_GROUP_LABEL: "sweep"}, "train", "Pod q/p") == (
        "Pod q/p: label quotree.io/pod-group=sweep disagrees with "
        "spec.schedulingGroup.podGroupName train (the PodGroup is the pod's group; name "
        "the same group in both, or leave the label out)"
    )
