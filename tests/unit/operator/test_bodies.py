"""What the operator sends for a pod (quotree_operator/bodies.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from quotree import ADMISSION_GATE, STANDING_LABEL
from quotree_operator import bodies


def test_admission_removes_only_our_gate_guarded_by_a_test_op() -> None:
    ops = bodies.admission_patch(("other", ADMISSION_GATE), has_labels=True, standing=None)
    assert ops == [
        {"op": "test", "path": "/spec/schedulingGates/1/name", "value": ADMISSION_GATE},
        {"op": "remove", "path": "/spec/schedulingGates/1"},
    ]


def test_admission_sets_the_capacity_label_in_the_same_patch() -> None:
    escaped = STANDING_LABEL.replace("/", "~1")
    with_labels = bodies.admission_patch((ADMISSION_GATE,), has_labels=True, standing="in-quota")
    assert with_labels[2:] == [
        {"op": "add", "path": f"/metadata/labels/{escaped}", "value": "in-quota"}
    ]
    # a pod without any label needs the map first, or the add fails
    without = bodies.admission_patch((ADMISSION_GATE,), has_labels=False, standing="over-quota")
    assert without[2] == {"op": "add", "path": "/metadata/labels", "value": {}}
    assert without[3]["path"] == f"/metadata/labels/{escaped}"


def test_admission_on_a_flavor_adds_its_node_labels_and_the_flavor_label() -> None:
    flavor = ("a100", {"nvidia.com/gpu.product": "A100"})
    ops = bodies.admission_patch(
        (ADMISSION_GATE,), has_labels=False, standing="in-quota", flavor=flavor
    )
    assert ops[2:] == [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"nvidia.com/gpu.product": "A100"}},
        {"op": "add", "path": "/metadata/labels", "value": {}},
        {"op": "add", "path": "/metadata/labels/quotree.io~1capacity", "value": "in-quota"},
        {"op": "add", "path": "/metadata/labels/quotree.io~1flavor", "value": "a100"},
    ]
    # A pod with a nodeSelector of its own keeps it: the flavor's labels are added to it.
    kept = bodies.admission_patch(
        (ADMISSION_GATE,), has_labels=True, standing=None, flavor=flavor, has_node_selector=True
    )
    assert kept[2:] == [
        {"op": "add", "path": "/spec/nodeSelector/nvidia.com~1gpu.product", "value": "A100"},
        {"op": "add", "path": "/metadata/labels/quotree.io~1flavor", "value": "a100"},
    ]


def test_event_is_on_the_pod_and_its_message_is_cut_to_the_api_limit() -> None:
    now = datetime(2026, 11, 22, 7, 0, 1, 250000, tzinfo=UTC)
    event = bodies.pod_event(
        "team",
        "p",
        event_name="p.1",
        uid="u-1",
        reason="Pending",
        message="x" * 2000,
        warning=False,
        now=now,
    )
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "team",
        "name": "p",
        "uid": "u-1",
    }
    assert len(event["message"]) == bodies.EVENT_MESSAGE_LIMIT
    assert event["type"] == "Normal"
    assert event["firstTimestamp"] == "2026-11-22T07:00:01.250000Z"
    warning = bodies.pod_event(
        "team",
        "p",
        event_name="p.2",
        uid=None,
        reason="Reclaimed",
        message="m",
        warning=True,
        now=now,
    )
    assert warning["type"] == "Warning"
    assert "uid" not in warning["involvedObject"]


def test_finalizers_are_set_only_if_still_as_seen() -> None:
    """The test op guards another controller's finalizer; `null` stands for none at all
    (what the API server's JSON patch compares an absent list with)."""
    assert bodies.finalizers_patch([], ["quotree.io/in-use"]) == [
        {"op": "test", "path": "/metadata/finalizers", "value": None},
        {"op": "add", "path": "/metadata/finalizers", "value": ["quotree.io/in-use"]},
    ]
    assert bodies.finalizers_patch(["a", "quotree.io/in-use"], ["a"]) == [
        {"op": "test", "path": "/metadata/finalizers", "value": ["a", "quotree.io/in-use"]},
        {"op": "add", "path": "/metadata/finalizers", "value": ["a"]},
    ]
