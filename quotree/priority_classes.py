"""A pod's priority from its PriorityClass, as the API server's Priority admission sets it.

- A pod naming a class (`spec.priorityClassName`) gets the class's `value`; a
  class that does not exist is an error naming the pod, and a `spec.priority`
  that differs from the value is refused, as the API server refuses it.
- A pod naming none gets the value of the class with `globalDefault: true`, if
  there is one, else 0. The simulator's own shorthand, a hand-written
  `spec.priority` with no class, is kept as written.
- `system-cluster-critical` and `system-node-critical` exist without being given.
- A class's `preemptionPolicy` is the pod's (the API server copies it into
  `spec.preemptionPolicy`); a pod that writes another is refused, as the API server
  refuses it. A pod naming no class and no global default keeps its own.
- A pod read back from a cluster carries the priority the API server resolved;
  its class's object is not among the cluster objects the plugin reads, so a
  pod with both `priorityClassName` and `spec.priority` whose class is not
  given keeps that priority.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BUILT_IN", "POLICIES", "PriorityClasses", "PriorityError"]

#: The classes every cluster has (their values are fixed by Kubernetes).
BUILT_IN: Mapping[str, int] = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}


#: The preemption policies Kubernetes knows.
POLICIES = ("PreemptLowerPriority", "Never")


class PriorityError(ValueError):
    """A PriorityClass or a pod's class that the API server would refuse: one line."""


@dataclass
class PriorityClasses:
    """The PriorityClasses given so far."""

    values: dict[str, int] = field(default_factory=lambda: dict(BUILT_IN))
    default: str | None = None
    #: Each class's `preemptionPolicy`, when it says one.
    policies: dict[str, str] = field(default_factory=dict)

    def add(self, doc: Mapping[str, Any]) -> None:
        """Add a (shape-checked) PriorityClass object."""
        name = str((doc.get("metadata") or {}).get("name") or "")
        if not name:
            raise PriorityError("PriorityClass: metadata.name is required")
        if name in self.values:
            raise PriorityError(f"PriorityClass {name}: defined twice")
        if doc.get("globalDefault"):
            if self.default is not None:
                raise PriorityError(
                    f"PriorityClass {name}: globalDefault, but PriorityClass {self.default} "
                    "is the global default already"
                )
            self.default = name
        self.values[name] = int(doc["value"])
        policy = doc.get("preemptionPolicy")
        if policy is not None:
            if policy not in POLICIES:
                raise PriorityError(
                    f"PriorityClass {name}: preemptionPolicy must be one of "
                    f"{', '.join(POLICIES)}, not {policy!r}"
                )
            self.policies[name] = policy

    def preemption_policy(self, pod: Mapping[str, Any], pod_name: str) -> str | None:
        """The pod's `preemptionPolicy`: its class's, else its own (None: not said)."""
        spec = pod.get("spec") or {}
        given = spec.get("preemptionPolicy")
        class_name = spec.get("priorityClassName") or self.default
        policy = self.policies.get(class_name) if class_name else None
        if policy is None:
            return given if isinstance(given, str) else None
        if given is not None and given != policy:
            raise PriorityError(
                f"Pod {pod_name}: spec.preemptionPolicy {given} differs from the "
                f"preemptionPolicy {policy} of PriorityClass {class_name}"
            )
        return policy

    def resolve(self, pod: Mapping[str, Any], pod_name: str) -> int | None:
        """The pod's priority (None: keep `spec.priority` as written)."""
        spec = pod.get("spec") or {}
        given = spec.get("priority")
        class_name = spec.get("priorityClassName")
        if not class_name:
            if given is not None or self.default is None:
                return None
            return self.values[self.default]
        value = self.values.get(class_name)
        if value is None:
            if given is not None:
                return None  # resolved by a cluster's API server already
            raise PriorityError(f"Pod {pod_name}: no PriorityClass {class_name!r}")
        if given is not None and given != value:
            raise PriorityError(
                f"Pod {pod_name}: spec.priority {given} differs from the value {value} of "
                f"PriorityClass {class_name}"
            )
        return value
