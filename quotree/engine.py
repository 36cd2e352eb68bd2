"""Pods against the quota tree: resolution, admission, in-quota preemption, reclaim, labels.

`Engine` is the one place where quota decisions are taken. The operator feeds
it what the cluster holds (quotas, cohorts, nodes, pods) and carries out
what `decide()` returns; the simulator does the same with no cluster and no
delay; the webhooks ask it how a pod resolves to a quota. It does no I/O
and reads no clock: time comes in as an argument.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from quotree.models import QUOTA_LABEL, NodeConfig, PodFacts
from quotree.quantity import add_amounts, format_quantity, is_unlimited
from quotree.tree import Problem, QuotaTree, TreeNode

__all__ = [
    "DEFAULT_SYSTEM_NAMESPACES",
    "Decisions",
    "Engine",
    "Eviction",
    "NodeReport",
    "PodRecord",
    "PodState",
    "Resolution",
]

DEFAULT_SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})

IN_QUOTA = "in-quota"
OVER_QUOTA = "over-quota"


class PodState(StrEnum):
    PENDING = "pending"
    ADMITTED = "admitted"
    PREEMPTED = "preempted"
    RECLAIMED = "reclaimed"
    UNMANAGED = "unmanaged"


@dataclass(slots=True)
class PodRecord:
    """The engine's view of one non-terminal pod."""

    facts: PodFacts
    quota: str | None
    state: PodState
    arrival: int
    admitted_seq: int = 0
    evicting: bool = False
    capacity: str | None = None
    reason: str = ""
    victims: frozenset[str] = frozenset()  # pods being evicted so that this one fits
    reason_key: object = None  # the numbers behind `reason`: it is formatted only when they change
    preemptible: bool = True

    def __post_init__(self) -> None:
        self.preemptible = self.facts.preemptible

    @property
    def key(self) -> str:
        return self.facts.key

    @property
    def request(self) -> dict[str, int]:
        return self.facts.request

    def order(self) -> tuple[int, float, str]:
        """Importance order: higher priority first, then older, then by name."""
        return (-self.facts.priority, self.facts.created, self.facts.name)


@dataclass(frozen=True, slots=True)
class Resolution:
    """Which quota a pod is charged to: a quota name, none (unmanaged), or an error."""

    quota: str | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Eviction:
    pod: str
    quota: str
    kind: Literal["Preempted", "Reclaimed"]
    reason: str


@dataclass(slots=True)
class Decisions:
    """What the cluster should be made to look like after one `decide()`."""

    admitted: list[tuple[str, str]] = field(default_factory=list)  # (pod, message)
    evictions: list[Eviction] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # pod -> in-quota / over-quota
    pending: dict[str, str] = field(default_factory=dict)  # pod -> why it waits (when it changed)

    def __bool__(self) -> bool:
        return bool(self.admitted or self.evictions or self.labels or self.pending)


@dataclass(frozen=True, slots=True)
class NodeReport:
    """status of a Cohort or ElasticQuota, in base units."""

    request: dict[str, int]
    runtime: dict[str, int]
    used: dict[str, int]
    admitted_pods: int
    pending_pods: int
    problem: Problem | None


def _least_important_first(record: PodRecord) -> tuple[int, float, str]:
    """Victim order for reclaim and preemption: lowest priority, then newest."""
    return (record.facts.priority, -record.facts.created, record.facts.name)


def _namespaces(config: NodeConfig | None) -> set[str]:
    """The namespaces whose pods `config` may take (none for a Cohort)."""
    if config is None or not config.is_leaf:
        return set()
    return {ns for ns in (config.namespace, *config.namespaces) if ns}


class _Leaf:
    """Pods of one ElasticQuota."""

    __slots__ = ("admitted", "evicting", "np_used", "pending", "pending_keys", "room")

    def __init__(self) -> None:
        # Room (runtime - used, guarantee - non-preemptible used) when the pending pods were
        # last looked at; None: look again. No pending pod can start to fit unless some
        # room grew or a pod arrived, so quotas whose room only shrank are not rescanned.
        self.room: dict[str, tuple[int, int]] | None = None
        self.pending: list[tuple[tuple[int, float, str], str]] = []  # sorted (order, key)
        self.pending_keys: set[str] = set()
        self.admitted: dict[str, PodRecord] = {}
        self.np_used: dict[str, int] = {}
        self.evicting: dict[str, int] = {}


class Engine:
    """Quota decisions for a set of pods; see module docstring."""

    def __init__(
        self,
        *,
        system_namespaces: Iterable[str] = (),
        default_quota: str | None = None,
        reclaim_delay: float = 30.0,
        instant_evictions: bool = False,
    ) -> None:
        self.tree = QuotaTree()
        self.system_namespaces = DEFAULT_SYSTEM_NAMESPACES | frozenset(system_namespaces)
        self.default_quota = default_quota
        self.reclaim_delay = reclaim_delay
        self.instant_evictions = instant_evictions
        self.pods: dict[str, PodRecord] = {}
        self.finished: dict[str, PodRecord] = {}  # preempted / reclaimed (simulator's report)
        self._leaves: dict[str, _Leaf] = {}
        self._covering: dict[str, set[str]] = {}
        self._touched: set[str] = set()
        self._over_since: dict[str, float] = {}
        self._cluster_nodes: dict[str, dict[str, int]] = {}
        self._ns_pods: dict[str, set[str]] = {}  # namespace -> keys of its pods
        self._arrivals = itertools.count()
        self._admissions = itertools.count(1)

    # ------------------------------------------------------------ configuration

    def set_config(self, config: NodeConfig) -> None:
        old = self.tree.config(config.name)
        if old == config:
            return  # e.g. our own status write coming back through the watch
        self.tree.set_config(config)
        if old is not None and old.is_leaf:
            self._uncover(old)
        if config.is_leaf:
            for namespace in (config.namespace, *config.namespaces):
                if namespace:
                    self._covering.setdefault(namespace, set()).add(config.name)
            self._touched.add(config.name)
        self._reresolve(_namespaces(old) | _namespaces(config))

    def remove_config(self, name: str) -> None:
        old = self.tree.config(name)
        self.tree.remove_config(name)
        if old is not None and old.is_leaf:
            self._uncover(old)
        self._reresolve(_namespaces(old))

    def _uncover(self, config: NodeConfig) -> None:
        for namespace in (config.namespace, *config.namespaces):
            names = self._covering.get(namespace or "")
            if names is not None:
                names.discard(config.name)
                if not names:
                    del self._covering[namespace or ""]

    def _reresolve(self, namespaces: set[str]) -> None:
        """After a quota change, pods of the namespaces it covers (or covered) may move."""
        for namespace in namespaces:
            for key in list(self._ns_pods.get(namespace, ())):
                self._reresolve_pod(self.pods[key])

    def _reresolve_pod(self, record: PodRecord) -> None:
        resolution = self.resolve(record.facts.namespace, record.facts.labels)
        if resolution.quota != record.quota:
            facts = record.facts
            self.forget_pod(record.key)
            self.observe_pod(facts)

    def set_cluster_node(self, name: str, allocatable: Mapping[str, int] | None) -> None:
        """A cluster node's allocatable (None: gone, not Ready or unschedulable)."""
        if allocatable is None:
            self._cluster_nodes.pop(name, None)
        else:
            self._cluster_nodes[name] = dict(allocatable)
        total: dict[str, int] = {}
        for amounts in self._cluster_nodes.values():
            for resource, amount in amounts.items():
                total[resource] = total.get(resource, 0) + amount
        self.tree.set_capacity(total)

    # ------------------------------------------------------------ resolution

    def covering(self, namespace: str) -> list[str]:
        """The ElasticQuotas whose namespaces include `namespace`, by name."""
        return sorted(self._covering.get(namespace, ()))

    def resolve(self, namespace: str, labels: Mapping[str, str]) -> Resolution:
        """Which quota a pod of `namespace` with `labels` is charged to (api.md, Pods)."""
        if namespace in self.system_namespaces:
            return Resolution(None)
        candidates = self.covering(namespace)
        wanted = labels.get(QUOTA_LABEL)
        if wanted:
            if wanted in candidates:
                return Resolution(wanted)
            covered = ", ".join(candidates) if candidates else "none"
            return Resolution(
                None,
                f"ElasticQuota {wanted} does not cover namespace {namespace} "
                f"(quotas covering it: {covered})",
            )
        if len(candidates) == 1:
            return Resolution(candidates[0])
        if candidates:
            own = [name for name in candidates if self.tree.configs()[name].namespace == namespace]
            if len(own) == 1:
                return Resolution(own[0])
            return Resolution(
                None,
                f"namespace {namespace} is covered by several ElasticQuotas "
                f"({', '.join(candidates)}); label the pod {QUOTA_LABEL}=<one of them>",
            )
        if self.default_quota:
            return Resolution(self.default_quota)
        return Resolution(None)

    # ------------------------------------------------------------ pods

    def observe_pod(self, facts: PodFacts) -> PodRecord | None:
        """Take in a pod as the cluster shows it (added or changed).

        A gated pod waits; a pod without the gate is admitted (it was let
        through, or it was created before quotree or while the webhook was
        off); a terminal pod is forgotten.
        """
        key = facts.key
        record = self.pods.get(key)
        if facts.terminal:
            self.forget_pod(key)
            return None
        if record is not None:
            if record.state is PodState.PENDING and not facts.gated:
                self._admit(record, "the gate was removed outside quotree")
            if (
                record.state is PodState.UNMANAGED
                and facts.node_name
                and not record.facts.node_name
            ):
                self.tree.add_unmanaged(facts.request)  # bound now: it holds capacity
            record.facts = facts
            record.preemptible = facts.preemptible
            if facts.deleting and record.state is PodState.ADMITTED and not record.evicting:
                # It is going away: its resources are on their way back.
                self._set_evicting(record, True)
            return record
        resolution = self.resolve(facts.namespace, facts.labels)
        quota = resolution.quota
        if quota is None and (resolution.error is None or not facts.gated):
            record = PodRecord(facts, None, PodState.UNMANAGED, next(self._arrivals))
            self.pods[key] = record
            self._ns_pods.setdefault(facts.namespace, set()).add(key)
            if facts.node_name:
                self.tree.add_unmanaged(facts.request)
            return record
        record = PodRecord(facts, quota, PodState.PENDING, next(self._arrivals))
        record.reason = resolution.error or ""
        self.pods[key] = record
        self._ns_pods.setdefault(facts.namespace, set()).add(key)
        if quota is None:
            return record  # gated, but no quota will take it: it waits with the reason
        leaf = self._leaves.setdefault(quota, _Leaf())
        self.tree.add_request(quota, facts.request)
        self._touched.add(quota)
        if facts.gated:
            bisect.insort(leaf.pending, (record.order(), key))
            leaf.pending_keys.add(key)
            leaf.room = None
        else:
            self._admit(record, "running without the gate")
        return record

    def forget_pod(self, key: str, final: PodState | None = None) -> None:
        """The pod is gone (deleted, finished, evicted)."""
        record = self.pods.pop(key, None)
        if record is None:
            return
        self._ns_pods[record.facts.namespace].discard(key)
        if final is not None:
            record.state = final
            self.finished[key] = record
        if record.quota is None:
            if record.state is PodState.UNMANAGED and record.facts.node_name:
                self.tree.add_unmanaged(record.request, -1)
            return
        leaf = self._leaves[record.quota]
        self._touched.add(record.quota)
        self.tree.add_request(record.quota, record.request, -1)
        self._unqueue(leaf, record)
        if key in leaf.admitted:
            if record.evicting:
                add_amounts(leaf.evicting, record.request, -1)
            del leaf.admitted[key]
            self.tree.add_used(record.quota, record.request, -1)
            if not record.preemptible:
                add_amounts(leaf.np_used, record.request, -1)

    def eviction_refused(self, key: str) -> None:
        """The Eviction API said no (a PodDisruptionBudget): the pod stays; try again later."""
        record = self.pods.get(key)
        if record is not None and record.evicting:
            self._set_evicting(record, False)
            if record.quota:
                self._leaves[record.quota].room = None
            if record.quota:
                self._touched.add(record.quota)

    def _set_evicting(self, record: PodRecord, evicting: bool) -> None:
        assert record.quota is not None
        record.evicting = evicting
        add_amounts(self._leaves[record.quota].evicting, record.request, 1 if evicting else -1)

    @staticmethod
    def _unqueue(leaf: _Leaf, record: PodRecord) -> None:
        """Take the pod out of its quota's pending queue, if it is there."""
        key = record.key
        if key in leaf.pending_keys:
            leaf.pending_keys.discard(key)
            index = bisect.bisect_left(leaf.pending, (record.order(), key))
            if index < len(leaf.pending) and leaf.pending[index][1] == key:
                del leaf.pending[index]

    def _admit(self, record: PodRecord, message: str) -> None:
        assert record.quota is not None
        leaf = self._leaves[record.quota]
        key = record.key
        self._unqueue(leaf, record)
        record.state = PodState.ADMITTED
        record.admitted_seq = next(self._admissions)
        record.reason = message
        record.victims = frozenset()
        leaf.admitted[key] = record
        self.tree.add_used(record.quota, record.request)
        if not record.preemptible:
            add_amounts(leaf.np_used, record.request, 1)

    # ------------------------------------------------------------ decisions

    def decide(self, now: float = 0.0) -> Decisions:
        """Admit what fits, preempt within quotas, reclaim lent quota; to a fixed point."""
        out = Decisions()
        while True:
            changed = self.tree.settle()
            touched, self._touched = self._touched, set()
            work = changed | touched | set(self._over_since)
            evicted = False
            for name in sorted(work):
                evicted |= self._decide_leaf(name, now, out, relabel=name in touched)
            if not (evicted and self.instant_evictions):
                return out

    def _decide_leaf(self, name: str, now: float, out: Decisions, *, relabel: bool) -> bool:
        leaf = self._leaves.get(name)
        node = self.tree.node(name)
        if leaf is None:
            self._over_since.pop(name, None)
            return False
        if node is None or not node.is_leaf:
            self._over_since.pop(name, None)
            leaf.room = None  # when it comes back, look at its pods again
            problem = self.tree.problems.get(name)
            why = problem.message if problem else f"ElasticQuota {name} does not exist"
            for _, key in leaf.pending:
                self._set_reason(self.pods[key], f"waiting: {why}", out)
            return False
        evicted = self._reclaim(name, node, leaf, now, out)
        admitted_before = len(leaf.admitted)
        evicted |= self._admit_pending(name, node, leaf, out)
        if relabel or evicted or admitted_before != len(leaf.admitted):
            self._relabel(node, leaf, out)
        return evicted

    def _set_reason(self, record: PodRecord, reason: str, out: Decisions) -> None:
        record.reason_key = None
        if record.reason != reason:
            record.reason = reason
            out.pending[record.key] = reason

    def _set_why(
        self,
        name: str,
        node: TreeNode,
        record: PodRecord,
        short: Mapping[str, int],
        out: Decisions,
        *,
        np: bool = False,
    ) -> None:
        """Why the pod does not fit; the message is built only when its numbers change."""
        key = (
            np,
            tuple(
                (r, short[r], node.used[r], node.runtime[r], node.guarantee[r], node.cap[r])
                for r in short
            ),
        )
        if record.reason_key == key:
            return
        reason = self._why(name, node, record, short, np=np)
        record.reason_key = key
        if record.reason != reason:
            record.reason = reason
            out.pending[record.key] = reason

    def _over(self, node: TreeNode, leaf: _Leaf) -> dict[str, int]:
        """Resources where used (less what is already being evicted) is above runtime."""
        over = {}
        for resource in node.part:
            excess = node.used[resource] - leaf.evicting.get(resource, 0) - node.runtime[resource]
            if excess > 0:
                over[resource] = excess
        return over

    def _reclaim(self, name: str, node: TreeNode, leaf: _Leaf, now: float, out: Decisions) -> bool:
        over = self._over(node, leaf)
        if not over:
            self._over_since.pop(name, None)
            return False
        since = self._over_since.setdefault(name, now)
        if now - since < self.reclaim_delay:
            return False
        candidates = [
            r
            for r in leaf.admitted.values()
            if r.preemptible and not r.evicting and any(r.request.get(res, 0) > 0 for res in over)
        ]
        # Least important first: lowest priority, then newest.
        candidates.sort(key=_least_important_first)
        victims = self._cover(over, candidates, partial=True)
        if not victims:
            return False
        used_now = {r: node.used[r] - leaf.evicting.get(r, 0) for r in node.part}
        detail = ", ".join(
            f"{r} used {format_quantity(used_now[r], r)} > runtime "
            f"{format_quantity(node.runtime[r], r)}"
            for r in sorted(over)
        )
        reason = f"ElasticQuota {name} is above its runtime ({detail}); lent quota is reclaimed"
        for victim in victims:
            self._evict(victim, "Reclaimed", reason, out)
        self._over_since.pop(name, None)
        return True

    @staticmethod
    def _cover(
        need: Mapping[str, int], candidates: list[PodRecord], *, partial: bool = False
    ) -> list[PodRecord]:
        """Take candidates in order until `need` is freed, then give back the ones not needed.

        When even all candidates do not free enough: [] (preemption: evicting would admit
        nobody), or with `partial` every candidate that helps (reclaim: get as close as
        the preemptible pods allow).
        """
        missing = dict(need)
        chosen: list[PodRecord] = []
        for record in candidates:
            if all(amount <= 0 for amount in missing.values()):
                break
            if not any(record.request.get(r, 0) > 0 for r, a in missing.items() if a > 0):
                continue
            chosen.append(record)
            for resource in missing:
                missing[resource] -= record.request.get(resource, 0)
        if any(amount > 0 for amount in missing.values()):
            return chosen if partial else []
        # Keep the most important victims if what remains still frees enough.
        for record in sorted(chosen, key=lambda r: r.order()):
            if all(missing[r] + record.request.get(r, 0) <= 0 for r in missing):
                chosen.remove(record)
                for resource in missing:
                    missing[resource] += record.request.get(resource, 0)
        return chosen

    def _evict(
        self,
        record: PodRecord,
        kind: Literal["Preempted", "Reclaimed"],
        reason: str,
        out: Decisions,
    ) -> None:
        assert record.quota is not None
        out.evictions.append(Eviction(record.key, record.quota, kind, reason))
        if self.instant_evictions:
            record.reason = reason
            final = PodState.PREEMPTED if kind == "Preempted" else PodState.RECLAIMED
            self.forget_pod(record.key, final)
        else:
            self._set_evicting(record, True)

    def _shortfall(self, node: TreeNode, leaf: _Leaf, record: PodRecord) -> dict[str, int]:
        """By how much the pod does not fit, per governed resource (empty: it fits)."""
        short = {}
        request = record.request
        for resource in node.part:
            amount = request.get(resource, 0)
            if not amount:
                continue
            excess = node.used[resource] + amount - node.runtime[resource]
            if excess > 0:
                short[resource] = excess
        return short

    def _np_shortfall(self, node: TreeNode, leaf: _Leaf, record: PodRecord) -> dict[str, int]:
        if record.preemptible:
            return {}
        short = {}
        for resource in node.part:
            amount = record.request.get(resource, 0)
            if not amount:
                continue
            excess = leaf.np_used.get(resource, 0) + amount - node.guarantee[resource]
            if excess > 0:
                short[resource] = excess
        return short

    @staticmethod
    def _room(node: TreeNode, leaf: _Leaf) -> dict[str, tuple[int, int]]:
        return {
            r: (node.runtime[r] - node.used[r], node.guarantee[r] - leaf.np_used.get(r, 0))
            for r in node.part
        }

    def _admit_pending(
        self, name: str, node: TreeNode, leaf: _Leaf, out: Decisions, *, force: bool = False
    ) -> bool:
        if not leaf.pending:
            return False
        room = self._room(node, leaf)
        before = leaf.room
        if (
            not force
            and before is not None
            and before.keys() == room.keys()
            and all(room[r][0] <= before[r][0] and room[r][1] <= before[r][1] for r in room)
        ):
            return False
        evicted = self._scan_pending(name, node, leaf, out)
        leaf.room = self._room(node, leaf)
        return evicted

    def refresh_reasons(self) -> Decisions:
        """Bring every pending pod's reason up to date with the current numbers."""
        out = Decisions()
        for name, leaf in self._leaves.items():
            node = self.tree.node(name)
            if node is not None and node.is_leaf:
                self._admit_pending(name, node, leaf, out, force=True)
        return out

    def _scan_pending(self, name: str, node: TreeNode, leaf: _Leaf, out: Decisions) -> bool:
        evicted = False
        may_preempt = node.config is not None and node.config.preempt_within_quota
        lowest: int | None = None  # lowest priority among the possible victims, when needed
        for _, key in list(leaf.pending):
            record = self.pods.get(key)
            if record is None or record.state is not PodState.PENDING:
                continue
            np_short = self._np_shortfall(node, leaf, record)
            if np_short:
                self._set_why(name, node, record, np_short, out, np=True)
                continue
            short = self._shortfall(node, leaf, record)
            if not short:
                self._admit(record, f"fits in ElasticQuota {name}")
                out.admitted.append((key, self._fit_message(name, node, record)))
                continue
            if record.victims and any(
                v in self.pods and self.pods[v].evicting for v in record.victims
            ):
                self._set_reason(record, self._waiting(record), out)
                continue
            if may_preempt and lowest is None:
                lowest = min(
                    (
                        r.facts.priority
                        for r in leaf.admitted.values()
                        if r.preemptible and not r.evicting
                    ),
                    default=record.facts.priority,
                )
            if may_preempt and lowest is not None and lowest < record.facts.priority:
                victims = self._preemption_victims(node, leaf, record, short)
                if victims:
                    lowest = None  # victims are gone: look again for the next pod
                    reason = (
                        f"preempted by {key} (priority {record.facts.priority}) "
                        f"within ElasticQuota {name}"
                    )
                    for victim in victims:
                        self._evict(victim, "Preempted", reason, out)
                    evicted = True
                    record.victims = frozenset(v.key for v in victims)
                    if self.instant_evictions and not self._shortfall(node, leaf, record):
                        self._admit(record, f"fits in ElasticQuota {name} after preemption")
                        out.admitted.append((key, self._fit_message(name, node, record)))
                    else:
                        self._set_reason(record, self._waiting(record), out)
                    continue
            self._set_why(name, node, record, short, out)
        return evicted

    @staticmethod
    def _waiting(record: PodRecord) -> str:
        return f"waiting for {len(record.victims)} preempted pods to release their resources"

    def _preemption_victims(
        self, node: TreeNode, leaf: _Leaf, record: PodRecord, short: Mapping[str, int]
    ) -> list[PodRecord]:
        # Only lower-priority, preemptible pods of the same quota; lowest priority
        # first, newest first among equals. Pods already being evicted count as freed.
        priority = record.facts.priority
        need = {r: short[r] - leaf.evicting.get(r, 0) for r in short}
        if all(amount <= 0 for amount in need.values()):
            return []
        candidates = [
            r
            for r in leaf.admitted.values()
            if r.preemptible and not r.evicting and r.facts.priority < priority
        ]
        candidates.sort(key=_least_important_first)
        return self._cover(need, candidates)

    def _fit_message(self, name: str, node: TreeNode, record: PodRecord) -> str:
        parts = [
            f"{r} used {format_quantity(node.used[r], r)} of runtime "
            f"{format_quantity(node.runtime[r], r)}"
            for r in sorted(node.part)
            if record.request.get(r, 0)
        ]
        return f"admitted to ElasticQuota {name}" + (f" ({'; '.join(parts)})" if parts else "")

    def _why(
        self,
        name: str,
        node: TreeNode,
        record: PodRecord,
        short: Mapping[str, int],
        np: bool = False,
    ) -> str:
        parts = []
        for resource in sorted(short):
            request = format_quantity(record.request.get(resource, 0), resource)
            if np:
                used = format_quantity(self._leaves[name].np_used.get(resource, 0), resource)
                limit = format_quantity(node.guarantee[resource], resource)
                parts.append(
                    f"{resource}: non-preemptible used {used} + request {request} > min {limit}"
                )
            else:
                used = format_quantity(node.used[resource], resource)
                runtime = format_quantity(node.runtime[resource], resource)
                bound = node.cap[resource]
                limit = "" if is_unlimited(bound) else f", cap {format_quantity(bound, resource)}"
                parts.append(
                    f"{resource}: used {used} + request {request} > runtime {runtime}"
                    f" (min {format_quantity(node.min[resource], resource)}{limit})"
                )
        return f"does not fit in ElasticQuota {name}: " + "; ".join(parts)

    def _relabel(self, node: TreeNode, leaf: _Leaf, out: Decisions) -> None:
        running: dict[str, int] = dict.fromkeys(node.part, 0)
        within = True
        for record in sorted(
            leaf.admitted.values(), key=lambda r: (-r.facts.priority, r.admitted_seq)
        ):
            if within:
                for resource in node.part:
                    running[resource] += record.request.get(resource, 0)
                    if running[resource] > node.min[resource]:
                        within = False
            label = IN_QUOTA if within else OVER_QUOTA
            if record.capacity != label:
                record.capacity = label
                out.labels[record.key] = label

    # ------------------------------------------------------------ views

    def report(self, name: str) -> NodeReport:
        """status for a Cohort or ElasticQuota: request (demand), runtime, used, pod counts."""
        node = self.tree.node(name)
        leaf = self._leaves.get(name)
        admitted = len(leaf.admitted) if leaf else 0
        pending = len(leaf.pending) if leaf else 0
        if node is not None:
            return NodeReport(
                request={r: node.demand[r] for r in sorted(node.part)},
                runtime={r: node.runtime[r] for r in sorted(node.part)},
                used={r: node.used[r] for r in sorted(node.part)},
                admitted_pods=admitted,
                pending_pods=pending,
                problem=None,
            )
        config = self.tree.config(name)
        named = sorted(set(config.min) | set(config.max)) if config else []
        used = self.tree.leaf_used(name)
        return NodeReport(
            request={},
            runtime=dict.fromkeys(named, 0),
            used={r: used.get(r, 0) for r in named},
            admitted_pods=admitted,
            pending_pods=pending,
            problem=self.tree.problems.get(name),
        )

    def admitted_count(self, name: str) -> int:
        """How many admitted, non-terminal pods ElasticQuota `name` holds (rule 7)."""
        leaf = self._leaves.get(name)
        return len(leaf.admitted) if leaf else 0

    def pod_records(self) -> Iterable[PodRecord]:
        return itertools.chain(self.pods.values(), self.finished.values())
