"""The pod list in protobuf (podproto.py) reads as the same list in JSON does.

The bytes are a real API server's answers to one list in both encodings
(data/podlist.pb and data/podlist.json, captured by hack/capture_pod_lists.py from the
pods of data/podproto-pods.yaml: gates, groups, a Job's pods, init and sidecar
containers, overhead, a priority below zero, node selectors and affinity, a pod being
deleted, a generated name, an unreadable group)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quotree.podfacts import pod_facts
from quotree_operator.liststream import ListStream
from quotree_operator.pod_entries import pod_entry
from quotree_operator.podproto import ProtoListStream, pod_body

DATA = Path(__file__).parent / "data"
PROTO = (DATA / "podlist.pb").read_bytes()
LISTED = json.loads((DATA / "podlist.json").read_bytes())


def _read(raw: bytes, block: int) -> tuple[list[dict], ProtoListStream]:
    stream = ProtoListStream()
    bodies = []
    for start in range(0, len(raw), block):
        bodies += stream.feed(raw[start : start + block])
    bodies += stream.close()
    return bodies, stream


@pytest.mark.parametrize("block", [1, 7, 128, 997, len(PROTO)])
def test_every_pod_reads_as_its_json_form_reads_in_any_blocks(block: int) -> None:
    bodies, stream = _read(PROTO, block)
    assert [pod_entry(body) for body in bodies] == [pod_entry(item) for item in LISTED["items"]]
    assert stream.fields == {"metadata": LISTED["metadata"]}


def test_the_fixture_holds_what_the_comparison_is_about() -> None:
    """The pods above are not all alike: each field the entry reads is there at least once."""
    entries = {pod_entry(body).key.split("/")[1]: pod_entry(body) for body in _read(PROTO, 4096)[0]}
    sidecars = entries["sidecars-and-init"].facts
    assert sidecars is not None
    assert sidecars.priority == -7
    assert sidecars.request["cpu"] == 3000 + 250  # the init container, then the overhead
    grouped = entries["gated-in-a-group"]
    assert grouped.gates == ("quotree.io/admission", "someone-else/gate")
    assert grouped.facts is not None
    assert grouped.facts.group is not None
    assert grouped.facts.group.size == 4
    affinity = entries["placed-by-affinity"].facts
    assert affinity is not None
    assert len(affinity.node_affinity) == 2
    assert affinity.node_affinity[0][1] == ("quotree.dev/fake-node", "Exists", ())
    assert entries["held-while-deleted"].facts.deleting  # type: ignore[union-attr]
    jobs = [e for name, e in entries.items() if name.startswith("a-job-")]
    assert len(jobs) == 2
    assert all(e.facts is not None and e.facts.owner_job == "a-job" for e in jobs)
    assert "pod-group-size" in entries["unreadable-quantity-label"].problem
    assert any(name.startswith("only-a-generated-name-") for name in entries)


def test_the_podgroup_a_pod_names_reads_from_protobuf() -> None:
    entries = {pod_entry(body).key.split("/")[1]: pod_entry(body) for body in _read(PROTO, 4096)[0]}
    linked = entries["in-a-podgroup"].facts
    assert linked is not None
    assert linked.pod_group == "allreduce"


def test_an_answer_cut_anywhere_is_refused_at_its_end() -> None:
    for cut in (3, 10, len(PROTO) // 2, len(PROTO) - 1):
        stream = ProtoListStream()
        stream.feed(PROTO[:cut])
        with pytest.raises(ValueError, match="ended before its list did"):
            stream.close()


def test_an_answer_that_is_not_protobuf_is_refused() -> None:
    with pytest.raises(ValueError, match="not a protobuf answer"):
        ProtoListStream().feed(json.dumps(LISTED).encode())


def test_a_field_that_runs_past_its_message_is_refused() -> None:
    # A Pod whose metadata (field 1, length 5) claims more than the 2 bytes it has.
    with pytest.raises(ValueError, match="runs past"):
        pod_body(b"\x0a\x05\x0a\x01a", 0, 5)
    with pytest.raises(ValueError, match="wire type 7"):
        pod_body(b"\x0f")


def test_the_json_and_protobuf_streams_agree_on_the_lists_version() -> None:
    stream = ListStream()
    stream.feed((DATA / "podlist.json").read_bytes())
    stream.close()
    assert stream.fields["metadata"] == _read(PROTO, 997)[1].fields["metadata"]


def test_an_empty_list_is_a_list() -> None:
    # The envelope: magic, then runtime.Unknown with raw (field 2) an empty PodList.
    stream = ProtoListStream()
    assert stream.feed(b"k8s\x00\x12\x00") == []
    assert stream.close() == []
    assert stream.fields == {}


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative number is written 64 bits wide
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _field(number: int, content: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(content)) + content


def test_numbers_below_zero_read_as_in_the_json_form() -> None:
    """A Time before 1970 and a priority below zero (int64 and int32, 10 bytes each)."""
    time = _field(8, _varint(1 << 3 | 0) + _varint(-86400))
    pod = _field(1, time) + _field(2, _varint(25 << 3 | 0) + _varint(-2_000_000))
    body = pod_body(pod)
    listed = {
        "metadata": {"creationTimestamp": "1969-12-31T00:00:00Z"},
        "spec": {"priority": -2_000_000},
        "status": {},
    }
    assert pod_facts(body) == pod_facts(listed)
    assert pod_facts(body).created == -86400


def test_a_pod_that_never_preempts_reads_as_in_the_json_form() -> None:
    """`spec.preemptionPolicy` (field 31, copied from the pod's PriorityClass)."""
    pod = _field(2, _field(31, b"Never"))
    body = pod_body(pod)
    listed = {"spec": {"preemptionPolicy": "Never"}, "status": {}}
    assert pod_facts(body) == pod_facts(listed)
    assert pod_facts(body).never_preempts
