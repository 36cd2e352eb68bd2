"""Which group a new pod belongs to: its Kubernetes PodGroup, its label, or its Job.

Why a module of its own: a pod's group is declared in three ways (docs/reference/pods.md,
"Pod groups"), and two of them need objects besides the pod: the `batch/v1` Job that
controls it and the Kubernetes PodGroup it names (native_groups.py). `GroupSources` keeps
those objects and answers for a new pod; the group ledger (group_ledger.py) keeps the
groups themselves.

In order: a pod that names a PodGroup belongs to that PodGroup's group when it is a gang
(none when it is basic), whatever its label says; else its own label and annotations;
else its Job's group. A pod whose PodGroup or Job is not known yet waits for it (`Waits`).
"""

from __future__ import annotations

from quotree.groups import GroupSpec, JobFacts, group_spec
from quotree.models import ConfigError
from quotree.native_groups import PodGroupFacts
from quotree.podfacts import PodFacts

__all__ = ["PODGROUP", "GroupSources", "Waits"]

#: What a pod held for want of a PodGroup waits for: this, then "namespace/name" (a Job
#: is awaited by its "namespace/name" alone).
PODGROUP = "PodGroup "


class Waits(Exception):
    """A pod waits alone: why, and the Job or PodGroup it waits for (if any)."""

    def __init__(self, reason: str, job: str | None) -> None:
        super().__init__(reason)
        self.job = job


class GroupSources:
    """The Jobs and PodGroups of the cluster, as the groups of new pods need them."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobFacts] = {}  # "namespace/name" -> the Job's facts
        #: "namespace/name" -> the Kubernetes PodGroup's facts.
        self.pod_groups: dict[str, PodGroupFacts] = {}
        #: A Job -> the group its pods form under their PodGroup's name.
        self._job_groups: dict[str, str] = {}

    def group_of_job(self, job: str) -> str:
        """The key of the group a Job's pods form ("namespace/name" of the Job itself,
        unless they name a PodGroup)."""
        return self._job_groups.get(job, job)

    def forget_job(self, job: str) -> None:
        self.jobs.pop(job, None)
        self._job_groups.pop(job, None)

    def spec(self, facts: PodFacts) -> tuple[GroupSpec | None, str | None]:
        """The group a new pod declares and the Job that makes it (None: on its own)."""
        if facts.pod_group is not None:
            return self._native(facts)
        if facts.group is not None:
            return facts.group, None
        if facts.owner_job is None:
            return None, None
        job_key = f"{facts.namespace}/{facts.owner_job}"
        job = self.jobs.get(job_key)
        if job is None:
            raise Waits(
                f"waiting: its Job {job_key} is not known to quotree yet (pods of a Job with "
                "parallelism above 1 are admitted as one group)",
                job_key,
            )
        try:
            spec = group_spec(facts.labels, facts.group_notes, f"Pod {facts.key}", job=job)
        except ConfigError as exc:
            raise Waits(f"waiting: {exc}", job_key) from None
        return spec, (job.name if spec is not None and spec.name == job.name else None)

    def _native(self, facts: PodFacts) -> tuple[GroupSpec | None, str | None]:
        """The PodGroup's group, when it is a gang; a Job's pods in it are the Job's group
        (evicted by suspending the Job)."""
        key = f"{facts.namespace}/{facts.pod_group}"
        pod_group = self.pod_groups.get(key)
        if pod_group is None:
            if not facts.gated:
                return None, None  # it runs already: nothing to wait for
            raise Waits(
                f"waiting: its PodGroup {key} does not exist yet (the pods of a PodGroup "
                "with a gang policy are admitted as one group, once it exists)",
                PODGROUP + key,
            )
        spec = pod_group.spec
        if spec is None or facts.owner_job is None:
            return spec, None
        self._job_groups[f"{facts.namespace}/{facts.owner_job}"] = key
        return spec, facts.owner_job
