"""The pod CREATE webhook answered directly, without Kopf's admission machinery.

Why a module of its own: every pod created in a managed namespace waits for this
answer, so its cost is paid once per pod (in the webhook process, worker.py). Kopf's
generic path (handlers.mutate_pod) builds a Body, runs the handler through its retry
and logging machinery and then finds the JSON patch by diffing the whole pod against
its patched copy; under a burst of creations that was most of the webhook's time
(bench/RESULTS.md). The decision is the same function
(`decisions.review_pod_create`) and the answer the same AdmissionReview: here the JSON
patch is written from the decision, which names exactly what changes (a label or two
and the gate list).

A review whose object is not shaped like a pod (metadata or spec not a map) gets
None, and the server hands it to Kopf's path, whose answer to malformed objects
stays the one documented in server.py.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from quotree_webhooks import decisions
from quotree_webhooks.admit_at_create import Admit, admitted, as_created
from quotree_webhooks.pod_groups import GroupLookup, job_unknown

__all__ = [
    "PodReview",
    "answer_is_error",
    "decide",
    "failed",
    "finish",
    "json_patch",
    "mutate_pod",
    "read_review",
    "wants_admission",
]

logger = logging.getLogger("quotree.webhooks")

#: The code of a denial (handlers.DENIED), and of an unexpected failure (Kopf's default).
DENIED = 403
FAILED = 500


def _pointer(key: str) -> str:
    """A map key as one JSON-pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def json_patch(pod: Mapping[str, Any], mutation: decisions.PodMutation) -> list[dict[str, Any]]:
    """The RFC 6902 operations that apply `mutation` to `pod`."""
    ops: list[dict[str, Any]] = []
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels")
    if mutation.labels:
        if not isinstance(labels, Mapping):
            added = {k: v for k, v in mutation.labels.items() if v is not None}
            if added:
                ops.append({"op": "add", "path": "/metadata/labels", "value": added})
        else:
            for key, value in mutation.labels.items():
                path = f"/metadata/labels/{_pointer(key)}"
                if value is None:
                    if key in labels:
                        ops.append({"op": "remove", "path": path})
                else:
                    ops.append({"op": "add", "path": path, "value": value})
    if mutation.annotations:
        notes = metadata.get("annotations")
        if not isinstance(notes, Mapping):
            ops.append(
                {"op": "add", "path": "/metadata/annotations", "value": dict(mutation.annotations)}
            )
        else:
            for key, value in mutation.annotations.items():
                path = f"/metadata/annotations/{_pointer(key)}"
                ops.append({"op": "add", "path": path, "value": value})
    if mutation.gates is not None:
        # "add" on an existing member replaces it (RFC 6902, 4.1).
        ops.append({"op": "add", "path": "/spec/schedulingGates", "value": mutation.gates})
    if mutation.node_selector:
        selector = (pod.get("spec") or {}).get("nodeSelector")
        if not isinstance(selector, Mapping):
            whole = dict(mutation.node_selector)
            ops.append({"op": "add", "path": "/spec/nodeSelector", "value": whole})
        else:
            for key, value in sorted(mutation.node_selector.items()):
                path = f"/spec/nodeSelector/{_pointer(key)}"
                ops.append({"op": "add", "path": path, "value": value})
    return ops


def answer_is_error(status: int, body: bytes | bytearray | None) -> bool:
    """An answer that is not a decision: a malformed request (400), not ready or failed (5xx).

    Denials are answered with 403 (handlers.DENIED) and are not errors; this is the
    `error` of the metrics (quotree_webhook_errors_total).
    """
    if status >= 500:
        return True
    if not body:
        return False
    try:
        code = json.loads(body)["response"]["status"]["code"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(code, int) and (code == 400 or code >= 500)


@dataclass(frozen=True, slots=True)
class PodReview:
    """A pod CREATE review, read: the pod, its namespace and the answer being made."""

    pod: Mapping[str, Any]
    namespace: str
    dry_run: bool
    #: The AdmissionReview answer (allowed, no patch yet) and its `response` map.
    answer: dict[str, Any]
    response: dict[str, Any]


def read_review(review: Mapping[str, Any]) -> PodReview | None:
    """The review's pod and the answer's frame; None: the object is not shaped like a pod
    (Kopf's path answers it, server.py)."""
    request = review.get("request")
    if not isinstance(request, Mapping):
        return None
    pod = request.get("object")
    if not isinstance(pod, Mapping):
        return None
    metadata = pod.get("metadata")
    spec = pod.get("spec", {})
    if not isinstance(metadata, Mapping) or not isinstance(spec, Mapping):
        return None
    labels = metadata.get("labels")
    if labels is not None and not isinstance(labels, Mapping):
        return None
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    answer = {
        "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
        "kind": review.get("kind", "AdmissionReview"),
        "response": response,
    }
    namespace = str(metadata.get("namespace") or "")
    return PodReview(pod, namespace, bool(request.get("dryRun")), answer, response)


def wants_admission(mutation: decisions.PodMutation) -> bool:
    """The answer would hold the pod behind the gate: admission at creation may let it in."""
    return mutation.denied is None and mutation.gates is not None


def decide(
    resolver: decisions.Resolver,
    never_gated: Collection[str],
    pod: Mapping[str, Any],
    namespace: str,
    groups: GroupLookup | None = None,
    *,
    admit: Admit | None = None,
) -> decisions.PodMutation:
    """What the pod's CREATE changes (decisions.review_pod_create); with `admit`, on the
    replica that decides, a pod the answer would gate is admitted at creation if it fits
    now (admit_at_create.py). The caller leaves `admit` out for a dry run."""
    mutation = decisions.review_pod_create(resolver, pod, namespace, never_gated, groups)
    if admit is not None and wants_admission(mutation):
        admission = admit(as_created(pod, mutation))
        if admission is not None:
            mutation = admitted(mutation, admission)
    return mutation


def failed(review: PodReview, exc: Exception) -> dict[str, Any]:
    """The answer when deciding raised: refused, pointing at the operator's log."""
    what = decisions.describe_pod(review.pod)
    logger.error("webhooks: %s: unexpected error", what, exc_info=exc)
    review.response["allowed"] = False
    review.response["status"] = {
        "code": FAILED,
        "message": f"{what}: quotree could not decide ({type(exc).__name__}); "
        "see the quotree operator's log",
    }
    return review.answer


def finish(review: PodReview, mutation: decisions.PodMutation) -> dict[str, Any]:
    """The AdmissionReview answer that applies `mutation`: a denial, or a JSON patch."""
    response = review.response
    if mutation.denied is not None:
        response["allowed"] = False
        response["status"] = {"code": DENIED, "message": mutation.denied}
        return review.answer
    ops = json_patch(review.pod, mutation)
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode("ascii")
    return review.answer


def mutate_pod(
    resolver: decisions.Resolver,
    never_gated: Collection[str],
    review: Mapping[str, Any],
    groups: GroupLookup | None = None,
    admit: Admit | None = None,
) -> dict[str, Any] | None:
    """The AdmissionReview answer to a pod CREATE, as handlers.mutate_pod would give it.

    `resolver` is the engine, or the webhook process's copy of its coverage (worker.py);
    `groups` the Jobs and pod groups (the operator's `GroupBook`, or the worker's copy);
    `admit`, on the replica that decides, admits at creation a pod the answer would gate
    (admit_at_create.py; never for a dry run, which reserves nothing).
    None: the object is not shaped like a pod, or it is the pod of a Job `groups` does not
    know yet (Kopf's path reads the Job from the API); Kopf's path answers it instead.
    """
    read = read_review(review)
    if read is None:
        return None
    if not read.namespace:
        return read.answer  # as handlers._mutate: nothing to decide without it
    if groups is not None and job_unknown(groups, read.pod, read.namespace) is not None:
        return None  # a Job not seen yet: Kopf's path reads it, so the pod gets its group
    try:
        mutation = decide(
            resolver,
            never_gated,
            read.pod,
            read.namespace,
            groups,
            admit=None if read.dry_run else admit,
        )
    except Exception as exc:
        return failed(read, exc)
    return finish(read, mutation)
