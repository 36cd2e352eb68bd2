"""Parsing Cohorts, ElasticQuotas and pods into what the engine uses."""

from typing import Any

import pytest

from quotree.models import ConfigError, parse_member
from quotree.podfacts import effective_request, pod_facts
from quotree.quantity import UNLIMITED
from tests.unit.objects import quota


def test_parse_elastic_quota_all_fields() -> None:
    config = parse_member(
        quota(
            "team-a",
            "team-a",
            **{
                "parent": "research",
                "min": {"cpu": "10", "memory": "20Gi"},
                "max": {"cpu": "20"},
                "sharedWeight": {"cpu": "4"},
                "lendingLimit": {"cpu": "0"},
                "borrowingLimit": {"cpu": "5"},
                "namespaces": ["team-a-dev"],
                "preemption": {"withinQuota": "Never"},
            },
        )
    )
    assert config.kind == "ElasticQuota"
    assert config.parent == "research"
    assert config.min == {"cpu": 10000, "memory": 20 * 2**30}
    assert config.max == {"cpu": 20000}
    assert config.shared_weight == {"cpu": 4000}
    assert config.lending_limit == {"cpu": 0}
    assert config.borrowing_limit == {"cpu": 5000}
    assert config.namespaces == ("team-a-dev",)
    assert config.preempt_within_quota is False
    assert config.covers("team-a")
    assert config.covers("team-a-dev")
    assert not config.covers("team-b")


def test_capacity_scheduling_yaml_is_accepted() -> None:
    config = parse_member(quota("team-a", "team-a", **{"min": {"cpu": 4}, "max": {"cpu": 6}}))
    assert config.min == {"cpu": 4000}
    assert config.preempt_within_quota is True
    assert config.max["cpu"] < UNLIMITED


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"min": {"cpu": "-1"}}, "ElasticQuota team-a: spec.min: cpu: '-1' is negative"),
        ({"max": {"memory": "lots"}}, "ElasticQuota team-a: spec.max: memory: 'lots' is not a"),
        ({"min": {"cpu": "1e30"}}, "out of range"),
        ({"mni": {"cpu": "1"}}, "ElasticQuota team-a: spec.mni: unknown field"),
        ({"min": "10"}, "ElasticQuota team-a: spec.min:"),
        ({"preemption": {"withinQuota": "Sometimes"}}, "spec.preemption.withinQuota"),
        ({"parent": "Not_A_Name"}, "is not a valid object name"),
        ({"min": {"bad name!": "1"}}, "is not a resource name"),
    ],
)
def test_parse_errors_are_one_line_and_name_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_member(quota("team-a", "team-a", **spec))
    text = str(caught.value)
    assert message in text
    assert "\n" not in text


def test_parse_errors_for_the_object_itself() -> None:
    with pytest.raises(ConfigError, match="kind must be Cohort or ElasticQuota"):
        parse_member({"kind": "Deployment", "metadata": {"name": "x"}})
    with pytest.raises(ConfigError, match=r"needs metadata\.namespace"):
        parse_member({"kind": "ElasticQuota", "metadata": {"name": "x"}, "spec": {}})
    with pytest.raises(ConfigError, match=r"spec\.namespaces"):
        parse_member({"kind": "Cohort", "metadata": {"name": "x"}, "spec": {"namespaces": ["a"]}})


def container(**requests: str) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": requests}}


def test_effective_request_sums_containers_and_takes_init_peak() -> None:
    spec = {
        "containers": [container(cpu="1"), container(cpu="500m", memory="1Gi")],
        "initContainers": [container(cpu="2"), container(memory="3Gi")],
    }
    assert effective_request(spec) == {"cpu": 2000, "memory": 3 * 2**30}


def test_effective_request_counts_sidecars_and_overhead() -> None:
    spec = {
        "initContainers": [
            {**container(cpu="1"), "restartPolicy": "Always"},  # sidecar: runs throughout
            container(cpu="2500m"),  # runs beside the sidecar: 3.5 at that moment
        ],
        "containers": [container(cpu="1")],
        "overhead": {"cpu": "100m"},
    }
    # max(1 (containers) + 1 (sidecar), 1 + 2.5 (init with sidecar)) + 0.1 overhead
    assert effective_request(spec) == {"cpu": 3600}


def test_limit_without_request_counts_as_request() -> None:
    spec = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    assert effective_request(spec) == {"nvidia.com/gpu": 2}


def test_bad_pod_quantity_names_the_pod_and_container() -> None:
    with pytest.raises(ConfigError, match="Pod ns/p: container c resources cpu"):
        effective_request({"containers": [container(cpu="x")]}, "ns/p")


def test_pods_that_ask_the_same_share_one_request_and_label_strings() -> None:
    """Memory per pod: one request dict per distinct request, label values kept once."""

    def facts(name: str, cpu: str, app: str) -> Any:
        doc = {
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "".join(app)}},
            "spec": {"containers": [container(cpu=cpu)]},
        }
        return pod_facts(doc)

    a, b, c = facts("a", "1", "web"), facts("b", "1", "web"), facts("c", "2", "web")
    assert a.request == b.request == {"cpu": 1000}
    assert a.request is b.request
    assert c.request == {"cpu": 2000}
    assert a.labels["app"] is b.labels["app"]


def test_pod_facts() -> None:
    facts = pod_facts(
        {
            "metadata": {
                "name": "p",
                "namespace": "ns",
                "labels": {"quotree.io/preemptible": "false"},
                "creationTimestamp": "2024-01-01T00:00:10Z",
            },
            "spec": {
                "priority": 7,
                "containers": [container(cpu="1")],
                "schedulingGates": [{"name": "other"}, {"name": "quotree.io/admission"}],
            },
            "status": {"phase": "Pending"},
        }
    )
    assert facts.key == "ns/p"
    assert facts.priority == 7
    assert facts.gated is True
    assert facts.preemptible is False
    assert facts.created == 1704067210.0
    assert facts.request == {"cpu": 1000}
