"""The status writer looks only at what changed.

A round computes the desired status of the quota objects whose pods, runtime or
configuration changed (and their ancestors), and of those whose last write failed; an
object whose numbers did not change is neither recomputed nor written. The engine and the
operator's inputs are real; the API is a fake that records (or refuses) the writes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotree import ADMISSION_GATE
from quotree.groups import POD_GROUP_LABEL, POD_GROUP_SIZE_ANNOTATION
from quotree.models import QUOTA_LABEL
from quotree_operator import status_writer as writer_mod
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_operator.desired_status import desired
from quotree_operator.kube_errors import KubeError
from quotree_operator.status_writer import StatusWriter
from tests.unit.objects import cohort, node, pod, quota
from tests.unit.operator.fake_kube import FakeKube

TREE = (
    cohort("c1", min={"cpu": "4"}),
    cohort("c2", min={"cpu": "4"}),
    quota("qa", "ns-a", parent="c1", min={"cpu": "2"}),
    quota("qb", "ns-b", parent="c1", min={"cpu": "2"}),
    quota("qz", "ns-z", parent="c2", min={"cpu": "2"}),
)
NAMESPACES = {"qa": "ns-a", "qb": "ns-b", "qz": "ns-z"}


DOWN = KubeError(0, "connection refused")


def pod_of(name: str, q: str, cpu: str = "1", *, gated: bool = True) -> dict[str, Any]:
    """A pod of quota `q` (in its namespace) asking for `cpu`."""
    gates = [ADMISSION_GATE] if gated else []
    return pod(NAMESPACES[q], name, {"cpu": cpu}, gates=gates, uid=name)


def group_pod(name: str, q: str, group: str, cpu: str = "1", size: int = 2) -> dict[str, Any]:
    """A gated pod of pod group `group` (of `size` pods) labelled for quota `q`."""
    labels = {POD_GROUP_LABEL: group, QUOTA_LABEL: q}
    body = pod(NAMESPACES[q], name, {"cpu": cpu}, uid=name, labels=labels)
    body["metadata"]["annotations"] = {POD_GROUP_SIZE_ANNOTATION: str(size)}
    return body


class Setup:
    def __init__(self, capacity: str = "100") -> None:
        self.controller = Controller(OperatorConfig(), kube=None)  # type: ignore[arg-type]
        self.inputs = self.controller.inputs
        self.inputs.observe_cluster_node(node("n1", {"cpu": capacity}), deleted=False)
        for body in TREE:
            self.inputs.observe_quota_object(body, deleted=False)
        self.kube = FakeKube()
        self.writer = StatusWriter(self.kube, self.inputs, self.inputs.memory, 4)
        self.computed: list[str] = []

    async def round(self) -> tuple[list[str], list[str]]:
        """One status round: (names whose desired status was computed, names written)."""
        self.computed.clear()
        self.kube.patches.clear()
        await self.writer.write_statuses()
        return sorted(self.computed), sorted(patch.name for patch in self.kube.patches)

    def decide(self) -> None:
        decisions = self.controller.engine.decide(0.0)
        if decisions:
            self.controller._decided_on(decisions)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Setup:
    setup = Setup()
    real = writer_mod.desired

    def counting(engine: Any, name: str, *args: Any) -> Any:
        setup.computed.append(name)
        return real(engine, name, *args)

    monkeypatch.setattr(writer_mod, "desired", counting)
    return setup


async def test_the_first_round_writes_every_object_and_a_quiet_one_nothing(
    counted: Setup,
) -> None:
    computed, written = await counted.round()
    assert written == ["c1", "c2", "qa", "qb", "qz"]
    assert computed == written
    assert await counted.round() == ([], [])


async def test_a_pod_in_one_quota_recomputes_that_quota_and_its_ancestors_only(
    counted: Setup,
) -> None:
    await counted.round()
    counted.inputs.observe_pod(pod_of("p1", "qa"), deleted=False)
    computed, written = await counted.round()
    assert computed == ["c1", "qa"]  # qb (its sibling) and c2, qz are not looked at
    assert written == ["c1", "qa"]  # request and pendingPods moved
    counted.decide()  # admitted: used and admittedPods move
    computed, written = await counted.round()
    assert computed == ["c1", "qa"]
    assert written == ["c1", "qa"]
    # The watch then shows the gate gone: nothing left to write.
    counted.inputs.observe_pod(pod_of("p1", "qa", gated=False), deleted=False)
    assert (await counted.round())[1] == []


async def test_a_pod_event_that_changes_no_number_recomputes_nothing(counted: Setup) -> None:
    counted.inputs.observe_pod(pod_of("p1", "qa", gated=False), deleted=False)
    await counted.round()
    running = pod_of("p1", "qa", gated=False)
    running["status"] = {"phase": "Running"}
    running["spec"]["nodeName"] = "n1"
    counted.inputs.observe_pod(running, deleted=False)
    assert await counted.round() == ([], [])


async def test_a_pod_its_incomplete_group_holds_recomputes_its_own_quota_only(
    counted: Setup,
) -> None:
    # Another quota covers the pod's namespace too: the pod, labelled for qa, counts in
    # qa's pendingPods only while its group holds it, so qa2 is not looked at.
    counted.inputs.observe_quota_object(
        quota("qa2", "ns-a", parent="c2", min={"cpu": "1"}), deleted=False
    )
    await counted.round()
    counted.inputs.observe_pod(group_pod("g-0", "qa", "g"), deleted=False)
    assert counted.controller.engine.groups["ns-a/g"].state == "incomplete"
    computed, written = await counted.round()
    assert computed == ["c1", "qa"]
    assert written == ["qa"]  # pendingGroups and pendingPods moved (it holds no request)
    counted.inputs.observe_pod(group_pod("g-1", "qa", "g"), deleted=False)  # complete
    computed, written = await counted.round()
    assert computed == ["c1", "qa"]
    assert written == ["c1", "qa"]  # request and pendingPods moved
    counted.inputs.observe_pod(group_pod("g-1", "qa", "g"), deleted=True)  # held again
    computed, written = await counted.round()
    assert computed == ["c1", "qa"]
    assert written == ["c1", "qa"]


async def test_runtime_moved_by_capacity_recomputes_the_quotas_it_moved(
    counted: Setup,
) -> None:
    small = Setup(capacity="10")  # qa borrows: its runtime follows the cluster's capacity
    small.computed = counted.computed
    small.inputs.observe_pod(pod_of("p1", "qa", cpu="12"), deleted=False)
    await small.round()
    assert small.controller.engine.report("qa").runtime == {"cpu": 10000}
    small.inputs.observe_cluster_node(node("n2", {"cpu": "2"}), deleted=False)  # 10 -> 12 cpu
    computed, written = await small.round()
    assert small.controller.engine.report("qa").runtime == {"cpu": 12000}
    assert computed == ["c1", "qa"]  # runtime up, no pod event; c2 and qz stay at 0
    assert written == ["c1", "qa"]


async def test_a_failed_write_is_retried_until_it_is_written(counted: Setup) -> None:
    await counted.round()
    counted.inputs.observe_pod(pod_of("p1", "qz"), deleted=False)
    counted.kube.down = DOWN
    computed, written = await counted.round()
    assert computed == ["c2", "qz"]
    assert written == []
    counted.kube.down = None
    # Nothing changed since, but the write did not happen: compared and written again.
    computed, written = await counted.round()
    assert computed == ["c2", "qz"]
    assert written == ["c2", "qz"]
    assert await counted.round() == ([], [])


async def test_a_configuration_change_compares_every_object(counted: Setup) -> None:
    await counted.round()
    counted.inputs.observe_quota_object(
        quota("qb", "ns-b", parent="c1", min={"cpu": "3"}), deleted=False
    )
    computed, written = await counted.round()
    assert computed == ["c1", "c2", "qa", "qb", "qz"]
    assert "qb" in written
    assert "qz" not in written


async def test_a_new_leader_compares_every_object(counted: Setup) -> None:
    await counted.round()
    counted.controller.set_leading(True)
    computed, _ = await counted.round()
    assert computed == ["c1", "c2", "qa", "qb", "qz"]


async def test_a_full_comparison_at_least_every_status_full_every(
    counted: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    await counted.round()
    monkeypatch.setattr(writer_mod, "STATUS_FULL_EVERY", 0.0)
    computed, written = await counted.round()
    assert len(computed) == 5
    assert written == []


STEP = st.one_of(
    st.tuples(st.just("pod"), st.sampled_from(sorted(NAMESPACES)), st.integers(1, 4)),
    st.tuples(st.just("delete"), st.integers(0, 12), st.just(0)),
    st.tuples(st.just("node"), st.integers(1, 12), st.just(0)),
    st.tuples(st.just("decide"), st.just(0), st.just(0)),
    st.tuples(st.just("group"), st.sampled_from(sorted(NAMESPACES)), st.integers(0, 2)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, min_size=1, max_size=25))
async def test_after_every_round_nothing_is_left_unwritten(steps: list[Any]) -> None:
    # However pods arrive, leave, get admitted and the capacity moves, a round that looks
    # only at what changed leaves every object showing its desired status: a full
    # comparison afterwards finds nothing to write.
    setup = Setup(capacity="6")
    await setup.round()
    pods: list[str] = []
    for kind, a, b in steps:
        if kind == "pod":
            name = f"p{len(pods)}"
            setup.inputs.observe_pod(pod_of(name, a, str(b)), deleted=False)
            pods.append(name)
        elif kind == "group":  # a pod of one of three 2-pod groups of the quota
            name = f"p{len(pods)}"
            setup.inputs.observe_pod(group_pod(name, a, f"g{b}"), deleted=False)
            pods.append(name)
        elif kind == "delete" and pods:
            name = pods[a % len(pods)]
            setup.inputs.observe_pod(pod_of(name, "qa"), deleted=True)
        elif kind == "node":
            setup.inputs.observe_cluster_node(node("n1", {"cpu": str(a)}), deleted=False)
        else:
            setup.decide()
        await setup.round()
        inputs = setup.inputs
        for key, obj in inputs.quota_objects.items():
            new = desired(inputs.engine, obj.name, obj.kind == "ElasticQuota")
            assert inputs.memory.changes(key, new, "now") == (None, None), (key, steps)
