"""What a Cohort's or ElasticQuota's status and annotations should say (pure, no I/O).

The status writer (status_writer.py) compares `desired()` with what it last wrote
(`StatusMemory`) and patches only the difference, so a burst of pod events becomes one
status write per quota object. Everything here is a function of the engine's view and the
memory, so the condition transitions are unit-tested without a cluster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from quotree.engine import Engine, MemberReport
from quotree.quantity import format_quantity, is_unlimited

__all__ = [
    "ANNOTATIONS",
    "QUEUE_LENGTH",
    "Desired",
    "StatusDirty",
    "StatusMemory",
    "conditions",
    "desired",
    "quantities",
    "queue",
    "status_patch",
    "summary",
]

#: The resource lists in status and annotations; `request` (the API's field name) shows the
#: demand, as docs/design/glossary.md defines it.
ANNOTATIONS = ("request", "runtime", "used")


def quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    """Base units -> Kubernetes quantity strings, sorted by resource."""
    return {r: format_quantity(a, r) for r, a in sorted(amounts.items())}


def summary(report: MemberReport, min_: Mapping[str, int], max_: Mapping[str, int]) -> str:
    """One line per tree member for `kubectl get`: `cpu 3/10/5/20, nvidia.com/gpu 1/2/1/-`."""
    resources = sorted(set(report.runtime) | set(min_) | set(max_))
    parts = []
    for r in resources:
        high = max_.get(r)
        cells = (
            format_quantity(report.used.get(r, 0), r),
            format_quantity(report.runtime.get(r, 0), r),
            format_quantity(min_.get(r, 0), r),
            "-" if high is None or is_unlimited(high) else format_quantity(high, r),
        )
        parts.append(f"{r} {'/'.join(cells)}")
    return ", ".join(parts)


def conditions(engine: Engine, name: str, bad_spec: str | None) -> list[dict[str, str]]:
    """Valid (own configuration) and Active (the tree member is part of the live tree).

    `bad_spec` is why the object's spec could not be read at all (then it is not in the
    engine's tree).
    """
    problem = engine.tree_of(name).problems.get(name)
    if bad_spec is None and problem is None:
        return _ALL_GOOD  # one list shared by every healthy object (never changed in place)
    if bad_spec is not None:
        valid = {"status": "False", "reason": "InvalidSpec", "message": bad_spec}
    elif problem is not None and problem.own:
        valid = {"status": "False", "reason": problem.reason, "message": problem.message}
    else:
        valid = {"status": "True", "reason": "Valid", "message": "the configuration is valid"}
    if bad_spec is not None:
        active = {"status": "False", "reason": "InvalidSpec", "message": bad_spec}
    elif problem is not None:
        active = {"status": "False", "reason": problem.reason, "message": problem.message}
    else:
        active = {"status": "True", "reason": "Active", "message": "part of the live quota tree"}
    return [{"type": "Valid", **valid}, {"type": "Active", **active}]


_ALL_GOOD = [
    {"type": "Valid", "status": "True", "reason": "Valid", "message": "the configuration is valid"},
    {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "message": "part of the live quota tree",
    },
]


#: The waiting units an ElasticQuota's status lists (`kubectl quotree pending`: all).
QUEUE_LENGTH = 5


def queue(engine: Engine, name: str) -> list[dict[str, Any]]:
    """The first `QUEUE_LENGTH` waiting units of ElasticQuota `name` in the engine's order
    (their reasons stay in the Pending events: a reason's numbers move more often)."""
    out = []
    for position, unit in enumerate(engine.waiting_in(name, QUEUE_LENGTH), 1):
        namespace, unit_name = unit.key.split("/", 1)
        out.append(
            {
                "position": position,
                "kind": "PodGroup" if unit.group else "Pod",
                "namespace": namespace,
                "name": unit_name,
                "priority": unit.priority,
                "pods": len(unit.pods),
            }
        )
    return out


@dataclass(frozen=True, slots=True)
class Desired:
    """status (without condition timestamps) and the three annotations of one quota object."""

    status: dict[str, Any]
    annotations: dict[str, str] = field(default_factory=dict)


def desired(engine: Engine, name: str, is_quota: bool, bad_spec: str | None = None) -> Desired:
    """What the Cohort or ElasticQuota (`is_quota`) named `name` should show now."""
    engine.refresh()  # the explicit step before reading the trees (cheap when settled)
    report = engine.report(name)
    config = engine.tree_of(name).config(name)
    lists = {
        "request": quantities(report.request),
        "runtime": quantities(report.runtime),
        "used": quantities(report.used),
    }
    status: dict[str, Any] = {
        **lists,
        "summary": summary(report, config.min if config else {}, config.max if config else {}),
        "conditions": conditions(engine, name, bad_spec),
    }
    if is_quota:
        status["admittedPods"] = report.admitted_pods
        status["pendingPods"] = report.pending_pods
        status["admittedGroups"] = report.admitted_groups
        status["pendingGroups"] = report.pending_groups
        status["queue"] = queue(engine, name)
    annotations = {
        f"quotree.io/{key}": json.dumps(value, sort_keys=True, separators=(",", ":"))
        for key, value in lists.items()
    }
    return Desired(status, annotations)


def status_patch(
    new: Desired, old: Desired | None, old_times: Mapping[str, str], now: str
) -> dict[str, Any] | None:
    """The status merge patch turning `old` into `new` (None: nothing to write).

    Resource lists are replaced whole (a merge patch would keep vanished resources), and
    conditions keep their lastTransitionTime unless their status changed.
    """
    if old is not None and old.status == new.status:
        return None
    patch: dict[str, Any] = dict(new.status)
    old_lists = old.status if old is not None else {}
    for key in ANNOTATIONS:
        gone = set(old_lists.get(key) or {}) - set(new.status[key])
        if gone:
            patch[key] = {**new.status[key], **dict.fromkeys(gone)}
    old_conditions = {c["type"]: c for c in (old.status.get("conditions") or [])} if old else {}
    stamped = []
    for condition in new.status["conditions"]:
        previous = old_conditions.get(condition["type"])
        keep = previous is not None and previous.get("status") == condition["status"]
        stamp = old_times.get(condition["type"]) if keep else None
        stamped.append({**condition, "lastTransitionTime": stamp or now})
    patch["conditions"] = stamped
    return patch


@dataclass(slots=True)
class StatusMemory:
    """What the status writer last wrote on each quota object (or found there at start-up).

    Condition timestamps are kept apart (`times`), so that `Desired` values compare equal
    when nothing but the time would change.
    """

    written: dict[str, Desired] = field(default_factory=dict)
    #: name -> condition type -> lastTransitionTime last written
    times: dict[str, dict[str, str]] = field(default_factory=dict)

    def remember_object(self, name: str, body: Mapping[str, Any]) -> None:
        """Start from what the object already shows, so a restart rewrites nothing unchanged."""
        if name in self.written or not body.get("status"):
            return
        status = dict(body.get("status") or {})
        found = status.get("conditions") or []
        self.times[name] = {
            c["type"]: c.get("lastTransitionTime", "") for c in found if "type" in c
        }
        status["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in found
        ]
        annotations = dict((body.get("metadata") or {}).get("annotations") or {})
        self.written[name] = Desired(
            status, {k: v for k, v in annotations.items() if k.startswith("quotree.io/")}
        )

    def forget(self, name: str) -> None:
        self.written.pop(name, None)

    def changes(
        self, name: str, new: Desired, now: str
    ) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
        """(status patch, annotations) to write for `new`; None for what is unchanged."""
        old = self.written.get(name)
        patch = status_patch(new, old, self.times.get(name, {}), now)
        same = old is not None and old.annotations == new.annotations
        return patch, None if same else new.annotations

    def wrote(self, name: str, new: Desired, patch: Mapping[str, Any] | None) -> None:
        """`new` (with `patch`, when there was one) is now on the object."""
        self.written[name] = new
        if patch is not None:
            self.times[name] = {c["type"]: c["lastTransitionTime"] for c in patch["conditions"]}


@dataclass(slots=True)
class StatusDirty:
    """Which quota objects' statuses may have changed since the status writer last looked.

    Filled by the inputs (the tree members a pod event or a decision touched, by name; every
    object after a configuration change or a change of leader) and by the writer itself
    (objects whose write failed, by key); the writer takes it whole each round, so a
    round's work is proportional to what changed, not to the number of quotas.
    Runtime changes come from the engine's trees (`QuotaTree.take_moved`).
    """

    #: Every object may have changed (start-up, a configuration change, a new leader).
    everything: bool = True
    #: Tree member names whose pods changed (the writer adds their ancestors).
    names: set[str] = field(default_factory=set)
    #: Object keys to compare again (their last write failed).
    keys: set[str] = field(default_factory=set)

    def all(self) -> None:
        self.everything = True

    def add(self, name: str | None) -> None:
        if name is not None and not self.everything:
            self.names.add(name)

    def again(self, key: str) -> None:
        self.keys.add(key)

    def take(self) -> tuple[bool, set[str], set[str]]:
        """(everything, names, keys) gathered so far; empty afterwards."""
        out = (self.everything, self.names, self.keys)
        self.everything, self.names, self.keys = False, set(), set()
        return out
