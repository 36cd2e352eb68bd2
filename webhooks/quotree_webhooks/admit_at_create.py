"""Admission at creation, the webhook's side: a pod that fits when it is created is
admitted at once; the others wait behind the gate.

Why a module of its own: the pod CREATE review (fastpath.mutate_pod) decides the pod's
labels and gate as always (decisions.review_pod_create); when the answer would gate the
pod and the request is not a dry run, the replica that decides is asked whether the pod
fits now (`Admit`, the operator's `create_admitter.CreateAdmitter`, which reserves its
room in the engine before the answer goes out). If so the answer writes, instead of the
gate, what the operator's gate removal would have written (`quotree.io/capacity`, the
flavor's label and nodeSelector) and the reservation's token, by which the operator knows
the pod when its watch shows it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from quotree.create_admission import RESERVATION_ANNOTATION, CreateAdmission
from quotree.models import FLAVOR_LABEL, STANDING_LABEL
from quotree_webhooks.decisions import PodMutation

__all__ = ["Admit", "admitted", "as_created"]

#: The replica's admission at creation: the pod as it would be created (gated) in, its
#: admission (its room reserved) or None (it is created gated) out.
Admit = Callable[[Mapping[str, Any]], CreateAdmission | None]


def as_created(pod: Mapping[str, Any], mutation: PodMutation) -> dict[str, Any]:
    """The pod as `mutation` would have it created (labels set, gates written); a copy of
    the two maps it changes, nothing else."""
    metadata = dict(pod.get("metadata") or {})
    labels = dict(metadata.get("labels") or {})
    for key, value in mutation.labels.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    metadata["labels"] = labels
    spec = dict(pod.get("spec") or {})
    if mutation.gates is not None:
        spec["schedulingGates"] = mutation.gates
    return {**pod, "metadata": metadata, "spec": spec}


def admitted(mutation: PodMutation, admission: CreateAdmission) -> PodMutation:
    """`mutation` for a pod admitted at creation: no gate; its standing, its flavor and
    the reservation's token written instead."""
    labels = {**mutation.labels, STANDING_LABEL: admission.standing}
    if admission.flavor is not None:
        labels[FLAVOR_LABEL] = admission.flavor
    return dataclasses.replace(
        mutation,
        labels=labels,
        gates=None,
        annotations={**mutation.annotations, RESERVATION_ANNOTATION: admission.token},
        node_selector=dict(admission.node_labels),
    )
