"""What the admission webhooks answer, as pure functions of the engine's view and a request.

No Kopf, no network: `handlers` turns Kopf's arguments into these calls and
their results into an admission response. Every quota decision is the
engine's (`quotree.rules`, `Engine.resolve`); this module only reads the
Kubernetes objects and says which engine call applies.
"""

from __future__ import annotations

import time
from collections import ChainMap
from collections.abc import Callable, Collection, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from quotree import (
    ADMISSION_GATE,
    QUOTA_LABEL,
    STANDING_LABEL,
    ConfigError,
    Engine,
    MemberConfig,
    Resolution,
    Verdict,
    check_apply_forest,
    check_delete,
    parse_member,
)
from quotree.models import IN_USE_FINALIZER, MANAGED_LABEL, quota_label
from quotree_webhooks.pod_groups import GroupLookup, review_group

__all__ = [
    "LABEL_PREFIX",
    "PodMutation",
    "RecentlyAllowed",
    "Resolver",
    "cohort_children",
    "describe_pod",
    "member_identity",
    "review_member",
    "review_namespace",
    "review_pod_create",
    "review_pod_update",
]

#: Labels under this prefix belong to quotree once a pod exists.
LABEL_PREFIX = "quotree.io/"


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    labels = _mapping(_mapping(obj.get("metadata")).get("labels"))
    return {str(k): str(v) for k, v in labels.items()}


def _finalizers(obj: Mapping[str, Any] | None) -> list[str]:
    finalizers = _mapping(_mapping(obj).get("metadata")).get("finalizers") or ()
    return [str(f) for f in finalizers] if isinstance(finalizers, list) else []


def describe_pod(obj: Mapping[str, Any], namespace: str | None = None) -> str:
    """`Pod ns/name` (or `ns/prefix*` for a generateName pod that has no name yet)."""
    metadata = _mapping(obj.get("metadata"))
    ns = namespace or metadata.get("namespace") or "?"
    name = metadata.get("name") or (
        f"{metadata['generateName']}*" if metadata.get("generateName") else "(no name)"
    )
    return f"Pod {ns}/{name}"


def member_identity(obj: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """(kind, name, namespace) of a Cohort or ElasticQuota object, for messages."""
    metadata = _mapping(obj.get("metadata"))
    return (
        str(obj.get("kind") or "object"),
        str(metadata.get("name") or ""),
        metadata.get("namespace"),
    )


def _same_object(config: MemberConfig | None, parsed: MemberConfig) -> bool:
    return (
        config is not None
        and config.kind == parsed.kind
        and config.name == parsed.name
        and config.namespace == parsed.namespace
    )


class RecentlyAllowed:
    """Cohorts and ElasticQuotas this webhook let through that the tree may not show yet.

    The API server stores an object only after every webhook allowed it, and the
    operator learns of it through its watch a moment later. Objects applied back to
    back (one `kubectl apply` of a folder) would each be judged without the others,
    so two objects with one name, or siblings whose mins add up to too much, could
    both get in. Allowed creates and updates are remembered here until the operator's
    view shows them, or for `ttl` seconds (one that another webhook refused never
    appears).
    """

    def __init__(self, ttl: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._pending: dict[str, tuple[MemberConfig, float]] = {}

    def remember(self, config: MemberConfig) -> None:
        self._pending[config.name] = (config, self.clock() + self.ttl)

    def view(self, configs: Mapping[str, MemberConfig]) -> Mapping[str, MemberConfig]:
        """The tree as the rules should see it: `configs` and what is still on its way."""
        if not self._pending:
            return configs
        now = self.clock()
        for name, (config, expires) in list(self._pending.items()):
            if expires < now or configs.get(name) == config:
                del self._pending[name]
        if not self._pending:
            return configs
        on_the_way = {name: config for name, (config, _) in self._pending.items()}
        # Only read: ChainMap's type asks for a mutable mapping, the tree's view is not.
        return ChainMap(on_the_way, cast("MutableMapping[str, MemberConfig]", configs))

    def view_forest(
        self, forest: Mapping[str, Mapping[str, MemberConfig]]
    ) -> dict[str, Mapping[str, MemberConfig]]:
        """`view` for each tree (docs/reference/objects.md, "Several trees"): what is on its way
        joins its tree."""
        out = dict(forest)
        if not self._pending:
            return out
        now = self.clock()
        for name, (config, expires) in list(self._pending.items()):
            if expires < now or forest.get(config.tree, {}).get(name) == config:
                del self._pending[name]
        trees: dict[str, dict[str, MemberConfig]] = {}
        for name, (config, _) in self._pending.items():
            trees.setdefault(config.tree, {})[name] = config
        for tree, on_the_way in trees.items():
            base = cast("MutableMapping[str, MemberConfig]", out.get(tree, {}))
            out[tree] = ChainMap(on_the_way, base)
        return out


def _forest(
    engine: Engine, recent: RecentlyAllowed | None
) -> Mapping[str, Mapping[str, MemberConfig]]:
    forest = engine.tree_configs()
    return forest if recent is None else recent.view_forest(forest)


def _deleted(
    forest: Mapping[str, Mapping[str, MemberConfig]], old: Mapping[str, Any] | None
) -> tuple[Mapping[str, MemberConfig], MemberConfig] | None:
    """The tree that holds the object being deleted, and the object; None when nothing
    can hang on it (never accepted into the tree, or not the object the tree holds under
    its name)."""
    if old is None:
        return None
    try:
        parsed = parse_member(old)
    except ConfigError:
        return None  # never accepted into the tree: nothing depends on it
    # The tree that holds the name (the object's own, unless it moved a moment ago).
    configs = next((c for c in forest.values() if parsed.name in c), forest.get(parsed.tree, {}))
    if not _same_object(configs.get(parsed.name), parsed):
        return None
    return configs, parsed


def cohort_children(
    engine: Engine, old: Mapping[str, Any] | None, recent: RecentlyAllowed | None = None
) -> list[MemberConfig]:
    """The children the tree shows for a Cohort being deleted (none for an ElasticQuota):
    the webhook asks the API which of them are being deleted or gone already."""
    target = _deleted(_forest(engine, recent), old)
    if target is None or target[1].is_leaf:
        return []
    configs, parsed = target
    return [configs[c] for c in configs if configs[c].parent == parsed.name]


def review_member(
    engine: Engine,
    operation: str,
    new: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None,
    *,
    namespace_deleting: bool = False,
    recent: RecentlyAllowed | None = None,
    dry_run: bool = False,
    leaving: Collection[str] = (),
) -> Verdict:
    """The answer to a CREATE, UPDATE or DELETE of a Cohort or ElasticQuota (rules 1 to 8).

    `engine` is the operator's current view; it is only read. Metadata-only
    updates (finalizers, the operator's annotations) and updates of an
    object being deleted are always allowed, so that a broken tree can never
    block its own repair or removal. `leaving`: the children of a Cohort being deleted
    that the API shows being deleted or gone (`cohort_children` names whom to ask). A
    Cohort deleted while it has children is accepted, with a warning, when the operator's
    in-use finalizer holds it (it stays until they are gone: `_held`), refused when not.
    """
    forest = _forest(engine, recent)
    if operation == "DELETE":
        target = _deleted(forest, old)
        if target is None:
            return Verdict(True)  # nothing hangs on it
        configs, parsed = target
        admitted = engine.admitted_count(parsed.name) if parsed.is_leaf else 0
        return check_delete(
            configs,
            parsed,
            admitted_pods=admitted,
            namespace_deleting=namespace_deleting,
            leaving=leaving,
            in_use_finalizer=_held(engine, old, parsed, leaving),
        )
    if new is None:
        return Verdict(True)
    if operation == "UPDATE" and old is not None:
        if _mapping(new.get("metadata")).get("deletionTimestamp"):
            return Verdict(True)
        if new.get("spec") == old.get("spec"):
            return Verdict(True)
    try:
        parsed = parse_member(new)
    except ConfigError as exc:
        return Verdict.deny(str(exc))
    verdict = check_apply_forest(forest, parsed, flavors=engine.flavors)
    if verdict.allowed and recent is not None and not dry_run:
        recent.remember(parsed)
    return verdict


def _held(
    engine: Engine, old: Mapping[str, Any] | None, cohort: MemberConfig, leaving: Collection[str]
) -> bool:
    """Whether the in-use finalizer keeps `cohort` for as long as it has children: it
    carries it, and the operator's own view (the engine, without this webhook's memory of
    what it let through) shows it a child that is not leaving. The operator removes the
    finalizer once its view shows none, so a child only this webhook knows of yet (created
    a moment ago) would not keep the Cohort: such a deletion is refused, as without it."""
    if IN_USE_FINALIZER not in _finalizers(old):
        return False
    own = _deleted(engine.tree_configs(), old)
    if own is None:
        return False
    configs = own[0]
    return any(c.parent == cohort.name and c.name not in leaving for c in configs.values())


class Resolver(Protocol):
    """What the pod CREATE review asks: `Engine.resolve`, or the webhook process's copy of
    the engine's `Coverage` (the same function on the same data; worker.py)."""

    def resolve(self, namespace: str, labels: Mapping[str, str]) -> Resolution: ...


@dataclass(frozen=True, slots=True)
class PodMutation:
    """What to do with a pod on CREATE: deny it, or set labels and add the gate."""

    denied: str | None = None
    #: label -> value to set, or None to remove it
    labels: dict[str, str | None] = field(default_factory=dict)
    #: the full list of scheduling gates to write (None: leave them alone)
    gates: list[dict[str, Any]] | None = None
    #: annotation -> value to set (a Job's pod group size; the reservation of a pod
    #: admitted at creation)
    annotations: dict[str, str] = field(default_factory=dict)
    #: nodeSelector entries to add (the flavor of a pod admitted at creation)
    node_selector: dict[str, str] = field(default_factory=dict)

    @property
    def changes(self) -> bool:
        return (
            bool(self.labels)
            or self.gates is not None
            or bool(self.annotations)
            or bool(self.node_selector)
        )


def review_pod_create(
    engine: Resolver,
    pod: Mapping[str, Any],
    namespace: str,
    never_gated: Collection[str] = (),
    groups: GroupLookup | None = None,
) -> PodMutation:
    """Which quota a new pod is charged to (docs/webhooks.md), as label and gate changes,
    and with `groups`, its pod group (pod_groups.review_group).

    Pods in the `never_gated` namespaces (the set `quotree.resolution.never_gated` makes)
    are left alone; so are pods no quota covers (unless there is a default quota), and
    the engine's own never-gated namespaces, which `Engine.resolve` charges to no quota.
    """
    if namespace in never_gated:
        return PodMutation()
    labels = _labels(pod)
    resolution = engine.resolve(namespace, labels)
    if resolution.error is not None:
        return PodMutation(denied=f"{describe_pod(pod, namespace)}: {resolution.error}")
    if resolution.quota is None:
        return PodMutation()
    changes: dict[str, str | None] = {}
    for tree, quota in resolution.charges:  # one label per tree that charges the pod
        key = quota_label(tree)
        if labels.get(key) != quota:
            changes[key] = quota
    if STANDING_LABEL in labels:
        changes[STANDING_LABEL] = None  # the operator's to set, once the pod is admitted
    annotations: dict[str, str] = {}
    if groups is not None:
        group = review_group(groups, pod, namespace, resolution.quota, describe_pod(pod, namespace))
        if group.denied is not None:
            return PodMutation(denied=group.denied)
        changes.update(group.labels)
        annotations = group.annotations
    spec = _mapping(pod.get("spec"))
    raw_gates = spec.get("schedulingGates")
    existing = [dict(g) for g in raw_gates if isinstance(g, Mapping)] if raw_gates else []
    gates: list[dict[str, Any]] | None = None
    # A pod bound to a cluster node at creation cannot carry gates (the API refuses them);
    # the operator counts it as admitted.
    if not spec.get("nodeName") and not any(g.get("name") == ADMISSION_GATE for g in existing):
        gates = [*existing, {"name": ADMISSION_GATE}]
    return PodMutation(labels=changes, gates=gates, annotations=annotations)


def _gated(obj: Mapping[str, Any]) -> bool:
    gates = _mapping(obj.get("spec")).get("schedulingGates") or ()
    return any(isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE for g in gates)


def review_pod_update(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    username: str,
    trusted: Iterable[str],
) -> str | None:
    """Why an UPDATE of a pod is refused, or None: only quotree may change what is quotree's.

    quotree's are the `quotree.io/*` labels and the `quotree.io/admission`
    gate; `trusted` are the user names of the operator.
    """
    if username in set(trusted):
        return None
    label = describe_pod(new)
    before, after = _labels(old), _labels(new)
    for key in sorted(k for k in {*before, *after} if k.startswith(LABEL_PREFIX)):
        if before.get(key) != after.get(key):
            was = f"'{before[key]}'" if key in before else "unset"
            now = f"'{after[key]}'" if key in after else "unset"
            hint = (
                "; to charge the pod to another quota, delete it and create it with the new label"
                if key == QUOTA_LABEL or key.startswith(QUOTA_LABEL + ".")
                else ""
            )
            return (
                f"{label}: label {key} belongs to quotree once the pod exists and only the "
                f"quotree operator may change it (was {was}, now {now}; you are {username}){hint}"
            )
    if _gated(old) and not _gated(new):
        return (
            f"{label}: only the quotree operator may remove the scheduling gate "
            f"{ADMISSION_GATE} (you are {username}); it is removed when the quota admits the pod"
        )
    return None


def review_namespace(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    username: str,
    trusted: Iterable[str],
) -> str | None:
    """Why a CREATE/UPDATE of a namespace is refused, or None: only quotree sets `managed`.

    The pod webhooks select namespaces by the `quotree.io/managed` label; removing it would take the
    namespace's pods out of quota (docs/reference/pods.md, "System and managed namespaces")."""
    if username in set(trusted):
        return None
    before = _labels(old or {}).get(MANAGED_LABEL)
    after = _labels(new).get(MANAGED_LABEL)
    if before == after:
        return None
    name = _mapping(new.get("metadata")).get("name") or "?"
    was = f"'{before}'" if before is not None else "unset"
    now = f"'{after}'" if after is not None else "unset"
    return (
        f"Namespace {name}: label {MANAGED_LABEL} belongs to quotree and only the quotree "
        f"operator may set or remove it (was {was}, now {now}; you are {username}); it "
        "follows the ElasticQuotas that cover the namespace"
    )
