"""Kubernetes' own pod groups (`scheduling.k8s.io/v1alpha2`), read as quotree's groups.

Why a module of its own: Kubernetes 1.36 has a gang API of its own, alpha behind the
`GenericWorkload` feature gate: a PodGroup (the runtime group, its
`spec.schedulingPolicy` either `basic` or `gang` with `minCount`), made from a Workload's
PodGroup template, and pods linked to it by `spec.schedulingGroup.podGroupName`. The job
controller makes both for a Job (`WorkloadWithJob` gate). The engine, the webhooks and the
simulator read these the same way, here; what a group may do is the engine's
(group_ledger.py).

- A pod that names a PodGroup with a gang policy belongs to that group: its name is the
  PodGroup's, its size (and min) the PodGroup's `minCount`.
- A PodGroup with a basic policy groups nothing: its pods are single units.
- Where a pod carries both the link and quotree's label `quotree.io/pod-group`, the link
  is the group, and the label must name the same group (`label_disagreement`); the label
  `none` takes no pod out of its PodGroup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from quotree.groups import NO_GROUP, POD_GROUP_LABEL, GroupSpec
from quotree.models import ConfigError

__all__ = [
    "POD_GROUP_API",
    "PodGroupFacts",
    "label_disagreement",
    "pod_group_facts",
    "pod_group_name",
    "read_documents",
    "workload_policies",
]

#: The API group and version of PodGroup and Workload, as served by Kubernetes 1.36.
POD_GROUP_API = "scheduling.k8s.io/v1alpha2"


@dataclass(frozen=True, slots=True)
class PodGroupFacts:
    """What quotree reads of a PodGroup: where it is and its gang's `minCount` (None: a
    basic policy, which groups nothing)."""

    namespace: str
    name: str
    min_count: int | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def spec(self) -> GroupSpec | None:
        """The group its pods form (None: they stay single units)."""
        if self.min_count is None:
            return None
        return GroupSpec(self.name, self.min_count, self.min_count)


def pod_group_name(pod_spec: Mapping[str, Any]) -> str | None:
    """The PodGroup a pod names (`spec.schedulingGroup.podGroupName`), if it names one."""
    link = pod_spec.get("schedulingGroup")
    if not isinstance(link, Mapping):
        return None
    name = link.get("podGroupName")
    if not isinstance(name, str):
        return None
    return name.strip() or None


def _policy(policy: object, where: str) -> int | None:
    """A `schedulingPolicy`'s gang `minCount` (None: basic), or one line saying what is wrong."""
    if not isinstance(policy, Mapping) or ("gang" in policy) == ("basic" in policy):
        raise ConfigError(f"{where}: schedulingPolicy must have exactly one of basic or gang")
    gang = policy.get("gang")
    if gang is None:
        return None
    count = gang.get("minCount") if isinstance(gang, Mapping) else None
    if type(count) is not int or count < 1:
        raise ConfigError(
            f"{where}: schedulingPolicy.gang.minCount must be a whole number >= 1, not {count!r}"
        )
    return count


def workload_policies(obj: Mapping[str, Any]) -> dict[str, int | None]:
    """A Workload's PodGroup templates: name -> their gang's `minCount` (None: basic)."""
    metadata = obj.get("metadata") or {}
    where = f"Workload {metadata.get('namespace') or 'default'}/{metadata.get('name') or '?'}"
    templates = (obj.get("spec") or {}).get("podGroupTemplates") or ()
    return {
        str(t.get("name")): _policy(t.get("schedulingPolicy"), f"{where} template {t.get('name')}")
        for t in templates
        if isinstance(t, Mapping)
    }


def pod_group_facts(
    obj: Mapping[str, Any], workloads: Mapping[str, Mapping[str, int | None]] | None = None
) -> PodGroupFacts:
    """Read a PodGroup object (a dict as the API serves it).

    Its own `spec.schedulingPolicy` says the policy. One without (a document written by
    hand for `quotree simulate`) takes its template's from `workloads` ("namespace/name"
    of a Workload -> `workload_policies`), through `spec.podGroupTemplateRef.workload`.
    """
    metadata = obj.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default")
    name = str(metadata.get("name") or "?")
    where = f"PodGroup {namespace}/{name}"
    spec = obj.get("spec") or {}
    policy = spec.get("schedulingPolicy")
    if policy is None:
        ref = (spec.get("podGroupTemplateRef") or {}).get("workload") or {}
        workload = f"{namespace}/{ref.get('workloadName')}"
        templates = (workloads or {}).get(workload)
        template = ref.get("podGroupTemplateName")
        if templates is None or template not in templates:
            raise ConfigError(
                f"{where}: no spec.schedulingPolicy, and no template {template!r} "
                f"in a Workload {workload} to take it from"
            )
        return PodGroupFacts(namespace, name, templates[str(template)])
    return PodGroupFacts(namespace, name, _policy(policy, where))


def label_disagreement(labels: Mapping[str, str], pod_group: str, where: str) -> str | None:
    """Why a pod that names PodGroup `pod_group` cannot carry its quotree group label, or
    None when the two agree (or it has no label, or `none`)."""
    label = str(labels.get(POD_GROUP_LABEL, "")).strip()
    if not label or label in (NO_GROUP, pod_group):
        return None
    return (
        f"{where}: label {POD_GROUP_LABEL}={label} disagrees with "
        f"spec.schedulingGroup.podGroupName {pod_group} (the PodGroup is the pod's group; "
        "name the same group in both, or leave the label out)"
    )


def read_documents(docs: Iterable[tuple[str, Mapping[str, Any]]]) -> list[PodGroupFacts]:
    """The PodGroups among Workload and PodGroup documents (each with where it came from),
    their policies taken from the Workloads where they say none; a document that cannot
    be read is a ConfigError that names where it came from."""
    docs = list(docs)
    workloads: dict[str, dict[str, int | None]] = {}
    found = []
    for kind in ("Workload", "PodGroup"):
        for origin, doc in (d for d in docs if d[1].get("kind") == kind):
            try:
                if kind == "PodGroup":
                    found.append(pod_group_facts(doc, workloads))
                    continue
                meta = doc.get("metadata") or {}
                key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
                workloads[key] = workload_policies(doc)
            except ConfigError as exc:
                raise ConfigError(f"{origin}: {exc}") from None
    return found
