"""Pod groups as pods declare them: the label, the annotations, and a Job's pods.

Why a module of its own: docs/reference/pods.md's "Pod groups" is read in three places (the
engine, which admits a group as one unit; the mutating webhook, which groups a Job's pods
and refuses a pod that disagrees with its group; the simulator) and must be read the same
way in all of them. This module only reads declarations; what a group is allowed to do is
the engine's.

- `quotree.io/pod-group` (label): the group's name, unique in its namespace; `none` opts a
  Job's pods out of grouping.
- `quotree.io/pod-group-size` (annotation): N, the pods the group needs at once.
- `quotree.io/pod-group-min` (annotation, optional): an elastic group, admitted at `min`.
- A `batch/v1` Job whose `parallelism` is above 1 groups its pods without any label:
  name = the Job's name, size = min(parallelism, completions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quotree.models import ConfigError

__all__ = [
    "NO_GROUP",
    "POD_GROUP_LABEL",
    "POD_GROUP_MIN_ANNOTATION",
    "POD_GROUP_SIZE_ANNOTATION",
    "GroupSpec",
    "JobFacts",
    "controller_job",
    "disagreement",
    "group_spec",
    "job_facts",
]

POD_GROUP_LABEL = "quotree.io/pod-group"
POD_GROUP_SIZE_ANNOTATION = "quotree.io/pod-group-size"
POD_GROUP_MIN_ANNOTATION = "quotree.io/pod-group-min"
#: The label's value that keeps a Job's pods out of any group.
NO_GROUP = "none"


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """What a pod says about its group: name (in the pod's namespace), size N and min
    (`min == size` for a group that is not elastic)."""

    name: str
    size: int
    min: int

    @property
    def elastic(self) -> bool:
        return self.min < self.size


def _count(value: object, what: str, where: str) -> int:
    """A positive whole number written in an annotation, or one line saying what is wrong."""
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{where}: annotation {what} must be a whole number >= 1, not {value!r}")
    return int(text)


def group_spec(
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    where: str,
    *,
    job: JobFacts | None = None,
) -> GroupSpec | None:
    """The group a pod declares (None: a pod on its own).

    `where` names the pod in errors ("Pod ns/name"). `job` is the Job that controls the
    pod, when it is known: its pods form a group (unless the label says `none`) with the
    Job's name and size; the pod's own label and annotations take precedence.
    """
    name = labels.get(POD_GROUP_LABEL)
    if name is not None:
        name = name.strip()
    if name == NO_GROUP:
        return None
    size_text = annotations.get(POD_GROUP_SIZE_ANNOTATION)
    min_text = annotations.get(POD_GROUP_MIN_ANNOTATION)
    if not name:
        if job is None or job.group_size is None:
            if size_text is not None or min_text is not None:
                what = (
                    POD_GROUP_SIZE_ANNOTATION if size_text is not None else POD_GROUP_MIN_ANNOTATION
                )
                raise ConfigError(
                    f"{where}: annotation {what} needs the label {POD_GROUP_LABEL} "
                    "(the group's name)"
                )
            return None
        name = job.name
    if size_text is not None:
        size = _count(size_text, POD_GROUP_SIZE_ANNOTATION, where)
    elif job is not None and job.group_size is not None and name == job.name:
        size = job.group_size
    else:
        raise ConfigError(
            f"{where}: label {POD_GROUP_LABEL}={name} needs the annotation "
            f"{POD_GROUP_SIZE_ANNOTATION} (how many pods the group needs at once)"
        )
    least = size if min_text is None else _count(min_text, POD_GROUP_MIN_ANNOTATION, where)
    if least > size:
        raise ConfigError(
            f"{where}: annotation {POD_GROUP_MIN_ANNOTATION} {least} is over "
            f"{POD_GROUP_SIZE_ANNOTATION} {size}"
        )
    return GroupSpec(name, size, least)


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What the engine and the webhooks need to know about a `batch/v1` Job."""

    namespace: str
    name: str
    uid: str
    parallelism: int
    completions: int | None
    suspended: bool = False
    #: Its pod template carries `quotree.io/pod-group: none`.
    opted_out: bool = False
    #: It has finished (its `Complete` or `Failed` condition is true): its group keeps no
    #: reservation for replacement pods.
    finished: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def group_size(self) -> int | None:
        """The size of the group its pods form (None: they form none)."""
        if self.opted_out or self.parallelism <= 1:
            return None
        size = self.parallelism
        if self.completions is not None:
            size = min(size, self.completions)
        return size if size > 1 else None


def job_facts(obj: Mapping[str, Any]) -> JobFacts:
    """Read a `batch/v1` Job object (a dict as the API serves it)."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    parallelism = spec.get("parallelism")
    completions = spec.get("completions")
    return JobFacts(
        namespace=str(metadata.get("namespace") or "default"),
        name=str(metadata.get("name") or "?"),
        uid=str(metadata.get("uid") or ""),
        parallelism=1 if not isinstance(parallelism, int) else parallelism,
        completions=completions if isinstance(completions, int) else None,
        suspended=bool(spec.get("suspend")),
        opted_out=str(template_labels.get(POD_GROUP_LABEL, "")).strip() == NO_GROUP,
        finished=any(
            isinstance(c, Mapping)
            and c.get("type") in ("Complete", "Failed")
            and str(c.get("status")) == "True"
            for c in (obj.get("status") or {}).get("conditions") or ()
        ),
    )


def controller_job(obj: Mapping[str, Any]) -> str | None:
    """The name of the `batch/v1` Job that controls a Pod object, if one does."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if (
            isinstance(ref, Mapping)
            and ref.get("controller")
            and ref.get("kind") == "Job"
            and str(ref.get("apiVersion", "")).startswith("batch/")
        ):
            name = ref.get("name")
            return str(name) if name else None
    return None


def disagreement(
    group: str,
    mine: tuple[str | None, GroupSpec, int],
    theirs: tuple[str | None, GroupSpec, int],
) -> str | None:
    """Why a pod cannot join group `group` ("ns/name"), or None when it agrees.

    Each side is (quota, spec, priority): pods of one group must agree on quota, size,
    min and priority (docs/reference/pods.md, "Pod groups"). The answer is the one line the webhook
    refuses with.
    """
    (q1, s1, p1), (q2, s2, p2) = mine, theirs
    for field_name, a, b in (
        ("quota", q1, q2),
        ("size", s1.size, s2.size),
        ("min", s1.min, s2.min),
        ("priority", p1, p2),
    ):
        if a != b:
            return (
                f"pod group {group}: this pod's {field_name} is {a}, "
                f"but the group's other pods have {field_name} {b}"
            )
    return None
