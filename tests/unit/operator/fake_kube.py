"""What the operator's unit tests share to stand in for the API: a pod body and the admit call.

The fakes script answers (errors, outages) for `quotree_operator.actuator`; the engine and
the operator's inputs stay real. Each test module subclasses `AdmitRecorder` with the
failures it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from quotree import ADMISSION_GATE


def pod(
    name: str = "p", *gates: str, namespace: str = "team", uid: str | None = None
) -> dict[str, Any]:
    """A pending pod asking for 1 cpu with these scheduling gates (default: quotree's)."""
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"u-{name}", "labels": {}},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "schedulingGates": [{"name": g} for g in (gates or (ADMISSION_GATE,))],
        },
        "status": {"phase": "Pending"},
    }


class AdmitRecorder:
    """`KubeClient.admit`'s signature; records each call, then asks `answer_admit`."""

    def __init__(self) -> None:
        self.admits: list[tuple[str, tuple[str, ...], Any]] = []  # (pod, gates, flavor)

    async def admit(
        self,
        namespace: str,
        name: str,
        gates: Sequence[str],
        has_labels: bool,
        capacity: Any,
        *,
        flavor: Any = None,
        has_node_selector: bool = False,
    ) -> None:
        self.admits.append((name, tuple(gates), flavor))
        self.answer_admit(name)

    def answer_admit(self, name: str) -> None:
        """Raise the scripted `KubeError`, or change the fake's pods; nothing by default."""
