"""Pod groups at pod CREATE: a Job's pods named as its group, and a pod that disagrees
with its group refused (docs/reference/pods.md, "Pod groups"). A pod that names a Kubernetes
PodGroup (`spec.schedulingGroup.podGroupName`) has its group from it: it gets no label
from its Job, and a quotree label that names another group is refused.

Why a module of its own: the pod CREATE review (decisions.review_pod_create) answers for
quotas; groups add two questions with their own inputs, the Jobs and what each group's
existing pods declared (`quotree.group_book.GroupBook`, which the operator keeps and
copies to the webhook process). Pure functions; the rules are `quotree.groups`'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from quotree.group_book import Declaration
from quotree.groups import (
    NO_GROUP,
    POD_GROUP_LABEL,
    POD_GROUP_SIZE_ANNOTATION,
    JobFacts,
    controller_job,
    disagreement,
    group_spec,
)
from quotree.models import ConfigError
from quotree.native_groups import label_disagreement, pod_group_name

__all__ = ["GroupAnswer", "GroupLookup", "WithJob", "job_unknown", "review_group"]


class GroupLookup(Protocol):
    """What the review reads of the Jobs and groups (`GroupBook`)."""

    def job(self, namespace: str, name: str) -> JobFacts | None: ...

    def declaration(self, namespace: str, group: str) -> Declaration | None: ...


class WithJob:
    """`groups` and one Job more: a Job the webhook read from the API because the
    operator's watch had not shown it yet (handlers.py), so that its pod gets its group."""

    def __init__(self, groups: GroupLookup, job: JobFacts) -> None:
        self._groups = groups
        self._job = job

    def job(self, namespace: str, name: str) -> JobFacts | None:
        if (namespace, name) == (self._job.namespace, self._job.name):
            return self._job
        return self._groups.job(namespace, name)

    def declaration(self, namespace: str, group: str) -> Declaration | None:
        return self._groups.declaration(namespace, group)


def job_unknown(groups: GroupLookup, pod: Mapping[str, Any], namespace: str) -> str | None:
    """The name of the Job that controls `pod` when `groups` does not know it (and the pod
    does not opt out of grouping): its group can only be told once the Job is read."""
    owner = controller_job(pod)
    if owner is None or groups.job(namespace, owner) is not None:
        return None
    metadata = pod.get("metadata")
    labels = _strings(metadata.get("labels")) if isinstance(metadata, Mapping) else {}
    if labels.get(POD_GROUP_LABEL, "").strip() == NO_GROUP:
        return None
    return owner


@dataclass(frozen=True, slots=True)
class GroupAnswer:
    """Refuse the pod (`denied`), or set these labels and annotations."""

    denied: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def review_group(
    groups: GroupLookup,
    pod: Mapping[str, Any],
    namespace: str,
    quota: str | None,
    where: str,
) -> GroupAnswer:
    """The group answer for a new pod charged to `quota`; `where` names it ("Pod ns/name").

    A pod of a known Job whose pods form a group, with no group label of its own, gets the
    label (the Job's name) and, unless it says so already, the size annotation. A pod
    whose declaration cannot be read is refused with that line (unless its Job, not known
    here yet, may still complete it). A pod that declares a group whose existing pods
    declared another quota, size, min or priority is refused with `groups.disagreement`'s
    line.
    """
    metadata = pod.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    labels = _strings(metadata.get("labels"))
    annotations = _strings(metadata.get("annotations"))
    spec = pod.get("spec")
    native = pod_group_name(spec) if isinstance(spec, Mapping) else None
    if native is not None:  # its PodGroup is its group (the job controller's, too)
        return GroupAnswer(denied=label_disagreement(labels, native, where))
    if labels.get(POD_GROUP_LABEL, "").strip() == NO_GROUP:
        return GroupAnswer()
    owner = controller_job(pod)
    job = groups.job(namespace, owner) if owner is not None else None
    answer = GroupAnswer()
    if POD_GROUP_LABEL not in labels and job is not None and job.group_size is not None:
        answer.labels[POD_GROUP_LABEL] = job.name
        if POD_GROUP_SIZE_ANNOTATION not in annotations:
            answer.annotations[POD_GROUP_SIZE_ANNOTATION] = str(job.group_size)
    try:
        spec = group_spec(
            {**labels, **answer.labels}, {**annotations, **answer.annotations}, where, job=job
        )
    except ConfigError as exc:
        if owner is not None and job is None:
            return answer  # its Job, once the operator sees it, completes the group
        return GroupAnswer(denied=str(exc))
    if spec is None:
        return answer
    theirs = groups.declaration(namespace, spec.name)
    if theirs is not None:
        priority = (pod.get("spec") or {}).get("priority")
        mine = (quota, spec, priority if isinstance(priority, int) else 0)
        why = disagreement(f"{namespace}/{spec.name}", mine, theirs)
        if why is not None:
            return GroupAnswer(denied=f"{where}: {why}")
    return answer
