"""Workload objects expanded into the pods their controllers would create.

`quotree simulate` reads Deployments, ReplicaSets, StatefulSets and `batch/v1`
Jobs as people keep them, and runs the pods their controllers would make. One
small pure function per kind; each takes the object as a checked mapping
(`quotree.schemas`) and returns new Pod objects (dicts as the API serves them):
the pod template's metadata and spec, the object's namespace, an owner reference
to the object, and the labels the controller adds.

Names follow the controllers' patterns, with suffixes drawn from a hash rather
than at random so the same input always gives the same names:

- StatefulSet: `name-0` .. `name-N-1`;
- Deployment: `name-<hash>-<suffix>` (the ReplicaSet `name-<hash>`, the hash
  taken from the pod template, as `pod-template-hash`);
- ReplicaSet and Job: `name-<suffix>` (an Indexed Job: `name-<index>-<suffix>`);
- CronJob: the Job it would create next, `name-<minutes>` (a number drawn from a hash,
  where the controller writes the scheduled time in minutes), whose pods are the Job's.

The hash and suffixes use the controllers' alphabet and lengths (10 and 5
characters) but are not the ones a cluster would draw.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "JobPods",
    "cronjob_job",
    "deployment_pods",
    "job_pods",
    "replicaset_pods",
    "statefulset_pods",
]

#: The letters Kubernetes' generated names use (no vowels, no look-alike digits).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x00".join(parts).encode()).digest()


def _suffix(owner: str, index: int) -> str:
    """The 5-character suffix of pod `index` of `owner` (deterministic)."""
    digest = _digest(owner, str(index))
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _template_hash(template: Mapping[str, Any]) -> str:
    """A pod-template-hash: a 32-bit hash of the template, spelled in the alphabet."""
    number = int.from_bytes(_digest(json.dumps(template, sort_keys=True, default=str))[:4])
    return "".join(_ALPHABET[int(d) % len(_ALPHABET)] for d in str(number))


def _meta(doc: Mapping[str, Any]) -> tuple[str, str]:
    metadata = doc.get("metadata") or {}
    return str(metadata.get("name") or ""), str(metadata.get("namespace") or "default")


def _pod(
    doc: Mapping[str, Any],
    name: str,
    labels: Mapping[str, str] = {},
    annotations: Mapping[str, str] = {},
) -> dict[str, Any]:
    """A Pod from the object's template, owned by the object."""
    owner, namespace = _meta(doc)
    template = (doc.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {**(tmeta.get("labels") or {}), **labels},
        "ownerReferences": [
            {
                "apiVersion": doc.get("apiVersion"),
                "kind": doc.get("kind"),
                "name": owner,
                "controller": True,
            }
        ],
    }
    if tmeta.get("annotations") or annotations:
        metadata["annotations"] = {**(tmeta.get("annotations") or {}), **annotations}
    spec = copy.deepcopy(dict(template.get("spec") or {}))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _replicas(doc: Mapping[str, Any]) -> int:
    replicas = (doc.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def replicaset_pods(
    doc: Mapping[str, Any], extra_labels: Mapping[str, str] = {}
) -> list[dict[str, Any]]:
    """A ReplicaSet's `spec.replicas` pods (default 1), `name-<suffix>`."""
    name, _ = _meta(doc)
    return [_pod(doc, f"{name}-{_suffix(name, i)}", extra_labels) for i in range(_replicas(doc))]


def deployment_pods(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A Deployment's `spec.replicas` pods (default 1), through its ReplicaSet `name-<hash>`."""
    name, _ = _meta(doc)
    template = (doc.get("spec") or {}).get("template") or {}
    pod_hash = _template_hash(template)
    replicaset = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {**(doc.get("metadata") or {}), "name": f"{name}-{pod_hash}"},
        "spec": {**(doc.get("spec") or {})},
    }
    return replicaset_pods(replicaset, {"pod-template-hash": pod_hash})


def statefulset_pods(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A StatefulSet's `spec.replicas` pods (default 1), `name-0` .. `name-N-1`."""
    name, _ = _meta(doc)
    return [
        _pod(
            doc,
            f"{name}-{i}",
            {
                "statefulset.kubernetes.io/pod-name": f"{name}-{i}",
                "apps.kubernetes.io/pod-index": str(i),
            },
        )
        for i in range(_replicas(doc))
    ]


@dataclass(frozen=True, slots=True)
class JobPods:
    """A Job's pods running at once, and the facts about the Job they came from."""

    name: str
    namespace: str
    #: `spec.parallelism` as written (default 1): how many pods may run at once.
    parallelism: int
    #: `spec.completions` (None: unset, the pods work off a queue until one succeeds).
    completions: int | None
    #: `status.succeeded` (0 when the document has no status).
    succeeded: int
    indexed: bool
    pods: tuple[dict[str, Any], ...]


def job_pods(doc: Mapping[str, Any]) -> JobPods:
    """The pods a `batch/v1` Job runs at once: parallelism, capped by what is left to complete.

    As the Job controller: min(parallelism, completions - succeeded) pods, none
    while suspended. An Indexed Job's pods are `name-<index>-<suffix>` with the
    completion index as label and annotation, taken from the lowest not done.
    """
    name, namespace = _meta(doc)
    spec = doc.get("spec") or {}
    parallelism = 1 if spec.get("parallelism") is None else int(spec["parallelism"])
    completions = None if spec.get("completions") is None else int(spec["completions"])
    succeeded = int((doc.get("status") or {}).get("succeeded") or 0)
    indexed = spec.get("completionMode") == "Indexed"
    count = parallelism
    if completions is not None:
        count = min(parallelism, max(completions - succeeded, 0))
    if spec.get("suspend"):
        count = 0
    labels = {JOB_NAME_LABEL: name, "job-name": name}
    pods = []
    for i in range(count):
        if indexed:
            index = str(succeeded + i)
            marks = {**labels, COMPLETION_INDEX: index}
            pods.append(
                _pod(doc, f"{name}-{index}-{_suffix(name, i)}", marks, {COMPLETION_INDEX: index})
            )
        else:
            pods.append(_pod(doc, f"{name}-{_suffix(name, i)}", labels))
    return JobPods(name, namespace, parallelism, completions, succeeded, indexed, tuple(pods))


def cronjob_job(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The `batch/v1` Job a CronJob would create next (`spec.jobTemplate`), owned by it; a
    suspended CronJob's Job is suspended too (it runs no pods)."""
    name, namespace = _meta(doc)
    spec = doc.get("spec") or {}
    template = spec.get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    minutes = int.from_bytes(_digest(name, namespace)[:3]) + 29_000_000  # a 2025-ish time
    metadata: dict[str, Any] = {
        "name": f"{name}-{minutes}",
        "namespace": namespace,
        "labels": dict(tmeta.get("labels") or {}),
        "ownerReferences": [
            {
                "apiVersion": doc.get("apiVersion"),
                "kind": "CronJob",
                "name": name,
                "controller": True,
            }
        ],
    }
    if tmeta.get("annotations"):
        metadata["annotations"] = dict(tmeta["annotations"])
    job_spec = copy.deepcopy(dict(template.get("spec") or {}))
    if spec.get("suspend"):
        job_spec["suspend"] = True
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": job_spec}
