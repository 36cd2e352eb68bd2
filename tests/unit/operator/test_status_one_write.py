"""A Cohort's or ElasticQuota's status change costs the API server one write.

The status and the `quotree.io/request|runtime|used` annotations go out in one merge
PATCH of the object (the CRDs have no status subresource), counted here at the client's
edge: the calls `Kube` makes on kubernetes_asyncio's CustomObjectsApi.
"""

from __future__ import annotations

import asyncio
from typing import Any

from quotree_operator.client import Kube


class _Response:
    status = 200

    async def release(self) -> None:
        return None


class _Recorder:
    """Every CustomObjectsApi call: (method, args, body)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, method: str) -> Any:
        async def call(*args: Any, **_options: Any) -> _Response:
            self.calls.append((method, args))
            return _Response()

        return call


def _kube() -> tuple[Kube, _Recorder]:
    kube = Kube.__new__(Kube)
    recorder = _Recorder()
    kube.custom = recorder
    return kube, recorder


STATUS = {"used": {"cpu": "1"}, "runtime": {"cpu": "2"}, "request": {"cpu": "1"}}
NOTES = {"quotree.io/used": '{"cpu":"1"}'}


def test_status_and_annotations_are_one_patch_of_the_object() -> None:
    kube, recorder = _kube()
    asyncio.run(kube.patch_quota_object("ElasticQuota", "team-a", "team-a", STATUS, NOTES))
    assert len(recorder.calls) == 1
    method, args = recorder.calls[0]
    assert method == "patch_namespaced_custom_object"
    assert args[:5] == ("quotree.io", "v1alpha1", "team-a", "elasticquotas", "team-a")
    assert args[5] == {"metadata": {"annotations": NOTES}, "status": STATUS}


def test_a_cohort_is_patched_once_cluster_wide() -> None:
    kube, recorder = _kube()
    asyncio.run(kube.patch_quota_object("Cohort", None, "org", STATUS, NOTES))
    assert [m for m, _ in recorder.calls] == ["patch_cluster_custom_object"]


def test_only_what_changed_is_sent_and_nothing_when_nothing_did() -> None:
    kube, recorder = _kube()
    asyncio.run(kube.patch_quota_object("ElasticQuota", "ns", "q", STATUS, None))
    asyncio.run(kube.patch_quota_object("ElasticQuota", "ns", "q", None, NOTES))
    asyncio.run(kube.patch_quota_object("ElasticQuota", "ns", "q", None, None))
    bodies = [args[5] for _, args in recorder.calls]
    assert bodies == [{"status": STATUS}, {"metadata": {"annotations": NOTES}}]
