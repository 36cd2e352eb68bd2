"""Admission at creation through the operator's parts: the leader's webhook answer, the
reservation it makes, the watch confirming it, and who may admit.

The controller runs with the in-memory API (fake_kube.py); the pod CREATE review is
answered by the webhook's own function (fastpath.mutate_pod) with the controller's
`CreateAdmitter`, and the "API server" applies the answer's patch before the pod shows
up in the watch.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from typing import Any

import jsonpatch

from quotree import ADMISSION_GATE, STANDING_LABEL
from quotree.create_admission import RESERVATION_ANNOTATION
from quotree.engine import PodState
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller
from quotree_webhooks import fastpath
from tests.unit.objects import node, pod, quota
from tests.unit.operator.fake_kube import FakeKube
from tests.unit.operator.test_standby import running, settle


def _controller(kube: FakeKube, **config: Any) -> Controller:
    controller = Controller(OperatorConfig(**config), kube=kube)
    inputs = controller.inputs
    inputs.observe_cluster_node(node("n", {"cpu": "100"}), deleted=False)
    inputs.observe_quota_object(quota("team", "team", min={"cpu": "2"}, max={"cpu": "2"}), False)
    return controller


def _new_pod(**kwargs: Any) -> dict[str, Any]:
    """A pod as a client sends it: a generateName, no gate, no name yet."""
    body = pod("team", gates=None, **kwargs)
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "job-"
    return body


def _create(controller: Controller, body: dict[str, Any], *, dry_run: bool = False) -> Any:
    """The webhook's answer, applied as the API server applies it (None: denied)."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "r", "object": body, "dryRun": dry_run},
    }
    never = OperatorConfig().never_gated
    answer = fastpath.mutate_pod(
        controller.engine, never, review, controller.inputs.book, admit=controller.admitter
    )
    assert answer is not None
    response = answer["response"]
    if not response["allowed"]:
        return None
    ops = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return jsonpatch.apply_patch(copy.deepcopy(body), ops)


def _stored(kube: FakeKube, body: dict[str, Any], name: str) -> dict[str, Any]:
    """The pod as the API server stores it: named, with a uid."""
    body["metadata"]["name"] = name
    body["metadata"]["uid"] = f"uid-{name}"
    kube.put_pod(body)
    return body


def _gated(body: dict[str, Any]) -> bool:
    return any(g["name"] == ADMISSION_GATE for g in body["spec"].get("schedulingGates") or ())


def _used(controller: Controller) -> str:
    controller.engine.refresh()
    return str(controller.engine.report("team").used.get("cpu", 0))


def test_the_leader_admits_a_pod_that_fits_and_the_watch_confirms_it() -> None:
    async def scenario() -> None:
        kube = FakeKube()
        controller = _controller(kube)
        controller.set_leading(True)
        created = _create(controller, _new_pod())
        assert not _gated(created)
        assert created["metadata"]["labels"][STANDING_LABEL] == "in-quota"
        assert created["metadata"]["labels"]["quotree.io/quota-name"] == "team"
        token = created["metadata"]["annotations"][RESERVATION_ANNOTATION]
        assert token in controller.engine.created
        assert _used(controller) == "1000"  # reserved before the answer went out
        async with running(controller):
            body = _stored(kube, created, "job-abcde")
            controller.inputs.observe_pod(body, deleted=False)
            assert token not in controller.engine.created
            record = controller.engine.pods["team/job-abcde"]
            assert record.state is PodState.ADMITTED
            assert _used(controller) == "1000"  # the pod took the reservation's place
            await settle(controller, kube, 1.5)
        # No second write to the pod: no gate removal, no label; one Admitted event.
        assert kube.admits == []
        assert kube.pod_labels == []
        assert [e.reason for e in kube.pod_events] == ["Admitted"]

    asyncio.run(scenario())


def test_pods_past_the_room_are_gated_and_admitted_in_their_turn() -> None:
    kube = FakeKube()
    controller = _controller(kube)
    controller.set_leading(True)
    answers = [_create(controller, _new_pod()) for _ in range(3)]
    assert [_gated(a) for a in answers] == [False, False, True]
    assert RESERVATION_ANNOTATION not in (answers[2]["metadata"].get("annotations") or {})
    assert _used(controller) == "2000"


def test_a_standby_a_dry_run_and_the_setting_off_reserve_nothing() -> None:
    kube = FakeKube()
    standby = _controller(kube)
    assert _gated(_create(standby, _new_pod()))
    leader = _controller(kube)
    leader.set_leading(True)
    assert _gated(_create(leader, _new_pod(), dry_run=True))
    off = _controller(kube, admit_at_create=False)
    off.set_leading(True)
    assert _gated(_create(off, _new_pod()))
    for controller in (standby, leader, off):
        assert len(controller.engine.created) == 0
        assert _used(controller) == "0"


def test_a_reservation_whose_pod_never_shows_up_is_released_on_time() -> None:
    kube = FakeKube()
    controller = _controller(kube, admit_reservation_seconds=5.0)
    now = [100.0]
    controller.admitter.clock = lambda: now[0]
    controller.set_leading(True)
    assert not _gated(_create(controller, _new_pod(requests={"cpu": "2"})))
    now[0] = 104.9
    controller.admitter.expire()
    assert _used(controller) == "2000"
    assert _gated(_create(controller, _new_pod()))  # no room while it holds
    now[0] = 105.0
    controller.admitter.expire()
    assert _used(controller) == "0"
    assert len(controller.engine.created) == 0
    assert controller.admitter.released == 1


def test_a_reservation_whose_pod_is_deleted_first_is_released() -> None:
    kube = FakeKube()
    controller = _controller(kube)
    controller.set_leading(True)
    created = _create(controller, _new_pod())
    body = _stored(kube, created, "job-gone")
    controller.inputs.observe_pod(body, deleted=True)
    assert len(controller.engine.created) == 0
    assert _used(controller) == "0"
    assert "team/job-gone" not in controller.engine.pods


def test_a_new_leader_waits_out_what_the_former_one_may_have_admitted() -> None:
    kube = FakeKube()
    controller = _controller(kube, admit_reservation_seconds=10.0)
    now, wall = [50.0], [1000.0]
    controller.admitter.clock = lambda: now[0]
    controller.admitter.wall = lambda: wall[0]
    # The former leader renewed 15 s ago (a 15 s Lease): it may have admitted until
    # 10 s after that renewal, and those pods may show up 10 s later still.
    controller.set_leading(True, (wall[0] - 15.0, 15.0))
    assert not controller.admitter.active()
    assert not controller.admitter.deciding()
    assert _gated(_create(controller, _new_pod()))
    now[0] += 4.9
    assert not controller.admitter.deciding()
    now[0] += 0.1
    assert controller.admitter.active()
    assert controller.admitter.deciding()
    assert not _gated(_create(controller, _new_pod()))
