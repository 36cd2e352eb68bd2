"""What the operator takes of one Pod body: its facts and the few fields it writes back by.

Why a module of its own: the pod watch reads a body at a time in the operator's process,
while the start-up pod list is read in a helper process (pod_reader.py), and both must
take the same things from a body: what `quotree.pod_facts` reads, and the uid, gates,
labels and node selector the actuator's gate removal checks (inputs.py). This module is
that one reading, and the plain form it crosses between the processes in. It imports
nothing heavier than the engine's pod reading, so that the helper starts quickly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quotree.models import ConfigError
from quotree.podfacts import PodFacts, Wire, facts_from_wire, facts_to_wire, pod_facts

__all__ = ["PodEntry", "entry_from_wire", "entry_to_wire", "pod_entry", "pod_key"]


@dataclass(slots=True)
class PodEntry:
    """One Pod body as the operator takes it in: `facts`, or None and the `problem` that
    makes it unreadable (a bad quantity: one warning line, and the pod is left out)."""

    key: str
    facts: PodFacts | None
    problem: str
    uid: str | None
    gates: tuple[str, ...]
    has_labels: bool
    has_node_selector: bool


def pod_key(body: Mapping[str, Any]) -> str:
    """The pod's "namespace/name", read off its body."""
    metadata = body["metadata"]
    return f"{metadata.get('namespace')}/{metadata['name']}"


def pod_entry(body: Mapping[str, Any]) -> PodEntry:
    """Read a Pod body (as the API serves it)."""
    metadata = body["metadata"]
    key = pod_key(body)
    try:
        facts: PodFacts | None = pod_facts(body)
    except ConfigError as exc:
        return PodEntry(key, None, str(exc), None, (), False, False)
    spec = body.get("spec") or {}
    return PodEntry(
        key,
        facts,
        "",
        metadata.get("uid"),
        tuple(g.get("name", "") for g in spec.get("schedulingGates") or ()),
        metadata.get("labels") is not None,
        spec.get("nodeSelector") is not None,
    )


def entry_to_wire(entry: PodEntry) -> tuple[Any, ...]:
    """The entry as plain values (it pickles at a fraction of the cost of a `PodFacts`)."""
    facts: Wire | None = None if entry.facts is None else facts_to_wire(entry.facts)
    return (
        entry.key,
        facts,
        entry.problem,
        entry.uid,
        entry.gates,
        entry.has_labels,
        entry.has_node_selector,
    )


def entry_from_wire(wire: tuple[Any, ...]) -> PodEntry:
    """`entry_to_wire` undone (strings kept once, as `pod_facts` keeps them)."""
    key, facts, problem, uid, gates, has_labels, has_node_selector = wire
    return PodEntry(
        key,
        None if facts is None else facts_from_wire(facts),
        problem,
        uid,
        gates,
        has_labels,
        has_node_selector,
    )
