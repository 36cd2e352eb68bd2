"""The operator's helper reads the real API server's protobuf pod list as the JSON one
(podproto.py against the server of this cluster's version, not only against kept bytes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import ModuleType

import pytest

from quotree_operator.liststream import ListStream
from quotree_operator.pod_entries import pod_entry
from quotree_operator.podproto import ProtoListStream
from tests.e2e import pod_lists


@pytest.fixture
def settled(cluster: ModuleType) -> Iterator[None]:
    pod_lists.settle()
    try:
        yield
    finally:
        pod_lists.clean_up()


def test_every_pod_of_the_protobuf_list_reads_as_in_the_json_list(settled: None) -> None:
    listed, proto = pod_lists.answers()
    stream = ProtoListStream()
    bodies = stream.feed(proto) + stream.close()
    items = json.loads(listed)["items"]
    assert len(items) == 10
    assert [pod_entry(body) for body in bodies] == [pod_entry(item) for item in items]
    as_json = ListStream()
    as_json.feed(listed)
    as_json.close()
    assert stream.fields["metadata"] == as_json.fields["metadata"]
