"""Any JSON value in place of any field of a document: one line and exit 1, or a report.

For Pod, Node, Cohort, ElasticQuota and ResourceFlavor documents, every field (top level,
metadata, spec, status, nested down to list items) is replaced in turn by a random JSON
shape (null, bool, int, float, string, list, object, nested). `quotree simulate` must
then exit 0, or exit 1 with one line on stderr starting `quotree: error:`; never a
traceback, never `internal error`.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import sys
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quotree.cli import main

API = "quotree.io/v1alpha1"
BASE: dict[str, dict[str, Any]] = {
    "Node": {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"zone": "a"}},
        "spec": {"unschedulable": False},
        "status": {
            "allocatable": {"cpu": "10", "nvidia.com/gpu": "4"},
            "capacity": {"cpu": "10"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    },
    "ResourceFlavor": {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": {"name": "a100"},
        "spec": {
            "nodeLabels": {"zone": "a"},
            "gpuMemoryPerGPU": "80Gi",
            "gpuResource": "nvidia.com/gpu",
        },
    },
    "Cohort": {
        "apiVersion": API,
        "kind": "Cohort",
        "metadata": {"name": "org", "annotations": {"quotree.io/maintenance": "false"}},
        "spec": {
            "min": {"cpu": "8"},
            "max": {"cpu": 10},
            "sharedWeight": {"cpu": "1"},
            "lendingLimit": {"cpu": "8"},
            "borrowingLimit": {"cpu": "2"},
            "tree": "default",
            "flavors": [{"name": "a100", "min": {"nvidia.com/gpu": "2"}}],
        },
    },
    "ElasticQuota": {
        "apiVersion": API,
        "kind": "ElasticQuota",
        "metadata": {"name": "a", "namespace": "a"},
        "spec": {
            "parent": "org",
            "min": {"cpu": "4"},
            "max": {"cpu": "6"},
            "namespaces": ["a-dev"],
            "preemption": {"withinQuota": "LowerPriority"},
            "flavors": [{"name": "a100", "min": {"nvidia.com/gpu": "2"}}],
        },
    },
    "Pod": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "a",
            "labels": {"app": "x"},
            "annotations": {"note": "y"},
            "creationTimestamp": "2024-01-01T00:00:00Z",
        },
        "spec": {
            "priority": 5,
            "nodeSelector": {"zone": "a"},
            "schedulingGates": [{"name": "quotree.io/admission"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]
                            }
                        ]
                    }
                }
            },
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": 1},
                    },
                }
            ],
            "initContainers": [
                {"name": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}
            ],
            "overhead": {"cpu": "10m"},
        },
        "status": {"phase": "Pending"},
    },
}

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every field and list item below `value`, as key paths."""
    if isinstance(value, dict):
        for key, entry in value.items():
            yield (*prefix, key)
            yield from paths(entry, (*prefix, key))
    elif isinstance(value, list):
        for index, entry in enumerate(value):
            yield (*prefix, index)
            yield from paths(entry, (*prefix, index))


def replaced(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return out


def simulate(docs: list[dict[str, Any]]) -> tuple[int, str, str]:
    text = "\n---\n".join(json.dumps(d, ensure_ascii=False) for d in docs)
    stdin = io.TextIOWrapper(io.BytesIO(text.encode()))
    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.object(sys, "stdin", stdin),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main(["simulate", "-", "-o", "json"])
    return code, out.getvalue(), err.getvalue()


def test_the_documents_as_given_simulate() -> None:
    code, out, err = simulate(list(BASE.values()))
    assert code == 0, err
    report = json.loads(out)
    assert report["pods"]["a/p"]["state"] == "admitted"


@pytest.mark.parametrize("kind", list(BASE))
@given(data=st.data())
def test_any_json_in_place_of_any_field_is_one_line_or_a_report(
    kind: str, data: st.DataObject
) -> None:
    path = data.draw(st.sampled_from(list(paths(BASE[kind]))), label="path")
    value = data.draw(JSON, label="value")
    docs = [replaced(doc, path, value) if k == kind else doc for k, doc in BASE.items()]
    code, out, err = simulate(docs)
    assert "internal error" not in err
    assert "Traceback" not in err
    assert code in (0, 1), err
    if code == 1:
        assert out == ""
        assert err.startswith("quotree: error: standard input")
        assert err.count("\n") == 1, err
