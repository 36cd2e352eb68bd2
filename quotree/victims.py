"""Eviction candidates with pod groups taken whole: a group's admitted core pods all go, or
none.

Why a module of its own: in-quota preemption (`eviction.preemption_victims`) and reclaim
(`reclaim.reclaim_choice`) choose among admitted pods, but docs/reference/pods.md ("Pod groups")
says they take whole groups, and an elastic group's pods that joined above its `min` one by one
are the first taken back within their priority. Choosing pods and widening to their
groups afterwards would evict pods nobody checked (the pays rule, "then fits"). So before
choosing, each group's admitted core pods are replaced by one candidate that stands for
them all (their requests summed: the rule and the fit are judged on the whole group),
and a group is left out when any of its core pods may not go (not preemptible, already
chosen or being evicted). After choosing, `expand` turns the candidates back into pods.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from quotree.pods import PodRecord, PodState
from quotree.quantity import add_amounts

if TYPE_CHECKING:
    from quotree.group_ledger import GroupLedger

__all__ = ["Candidates"]


class Candidates:
    """One choice's candidates (`whole`): lone pods, pods that joined a group above its
    min (`joined`), and one record per group standing for its core pods (`members`)."""

    def __init__(self, book: GroupLedger | None) -> None:
        self._book = book
        self.members: dict[str, list[PodRecord]] = {}
        self.joined: set[str] = set()

    def whole(self, pods: Iterable[PodRecord], may_go: set[str] | None = None) -> list[PodRecord]:
        """`pods` with each group's core replaced by one record for the group; a group is
        left out unless every admitted core pod is among `pods` (`may_go`: the keys of
        those that may go, when some of `pods` may not)."""
        pods = list(pods)
        book = self._book
        if book is None or not any(p.group for p in pods):
            return pods if may_go is None else [p for p in pods if p.key in may_go]
        allowed = may_go if may_go is not None else {p.key for p in pods}
        out: list[PodRecord] = []
        seen: set[str] = set()
        for record in pods:
            group = book.groups.get(record.group) if record.group else None
            if group is None:
                if record.key in allowed:
                    out.append(record)
                continue
            if record.key not in group.core:
                if record.key in allowed:
                    self.joined.add(record.key)  # alone, and first within its priority
                    out.append(record)
                continue
            if group.key in seen:
                continue
            seen.add(group.key)
            core = [
                m
                for m in book.members(group)
                if m.key in group.core and m.state is PodState.ADMITTED
            ]
            if core and all(m.key in allowed for m in core):
                stand = _standing(core)
                self.members[stand.key] = core
                out.append(stand)
        return out

    def expand(self, chosen: Sequence[PodRecord]) -> list[PodRecord]:
        """The pods the chosen candidates stand for."""
        return [pod for record in chosen for pod in self.members.get(record.key, (record,))]


def _standing(core: list[PodRecord]) -> PodRecord:
    """A record for a group's core pods: the first pod's facts (the group's priority), its
    latest admission, the requests summed in every tree that charges them."""
    first = core[0]
    assert first.quota is not None
    charged: dict[str, int] = {}
    for member in core:
        add_amounts(charged, member.request_in(first.quota))
    others: dict[str, dict[str, int]] = {}
    for quota in first.also:
        summed = others[quota] = {}
        for member in core:
            add_amounts(summed, member.request_in(quota))
    stand = dataclasses.replace(
        first,
        charged=charged,
        charged_in=others or None,
        admitted_seq=max(m.admitted_seq for m in core),
        evicting=any(m.evicting for m in core),
    )
    stand.preemptible = all(m.preemptible for m in core)
    return stand
