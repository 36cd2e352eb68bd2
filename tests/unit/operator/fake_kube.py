"""One in-memory stand-in for the Kubernetes API, for the operator's and webhooks' unit tests.

`FakeKube` implements `quotree_operator.api.KubeAPI` (the operator's calls) and
`quotree_webhooks.settings.WebhookApi` (the webhooks'); mypy checks both at the bottom of
this module (`make typecheck`). It holds what a test gives it (pods, leases, secrets,
objects to list) and answers as the API server does where tests rely on it: a pod that is
not there is a 404, a gate list that changed since the caller saw it is a 422 (the
admission patch's test op), a stale resourceVersion or an Event name written twice is a
409. Every write is recorded. `fail_next` scripts the errors of the next calls of one
kind; while `down` is set, every call raises it. A test that needs more (a write applied
and its answer lost) subclasses it. The engine and the operator's inputs stay real.
"""

from __future__ import annotations

import copy
import itertools
from collections import defaultdict
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, NamedTuple

from quotree import ADMISSION_GATE
from quotree.models import STANDING_LABEL
from quotree_operator.api import KubeAPI
from quotree_operator.bodies import job_suspension
from quotree_operator.kube_errors import KubeError
from quotree_operator.pod_entries import PodEntry, pod_entry
from quotree_webhooks.settings import WebhookApi


class PodEvent(NamedTuple):
    namespace: str
    name: str
    uid: str | None
    reason: str
    message: str
    warning: bool
    event_name: str


class ObjectEvent(NamedTuple):
    kind: str
    namespace: str | None
    name: str
    uid: str | None
    reason: str
    message: str


class QuotaPatch(NamedTuple):
    kind: str
    namespace: str | None
    name: str
    status: Mapping[str, Any] | None
    annotations: Mapping[str, str] | None


class FakeKube:
    """See module docstring. Objects are kept by "namespace/name"."""

    def __init__(self) -> None:
        #: What `list_*` serves, by the `what` the operator asks for ("pods", "Cohort", ...).
        self.listed: dict[str, list[dict[str, Any]]] = defaultdict(list)
        #: What one `watch_events` call yields, by `what` (then the watch ends).
        self.watched: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.pods: dict[str, dict[str, Any]] = {}
        self.leases: dict[str, dict[str, Any]] = {}
        self.secrets: dict[str, dict[str, Any]] = {}
        #: Namespaces that have a deletionTimestamp.
        self.deleting: set[str] = set()
        #: Cohorts and ElasticQuotas (by name) being deleted or gone from the API.
        self.leaving: set[str] = set()
        #: Raised by every call while set (the API server is unreachable or failing).
        self.down: KubeError | None = None
        self._scripted: dict[str, list[KubeError]] = defaultdict(list)
        self._versions = itertools.count(1)
        self._event_names: set[str] = set()
        # What was asked for, in order.
        self.admits: list[tuple[str, tuple[str, ...], Any]] = []  # (pod, gates sent, flavor)
        self.reads = 0  # read_pod calls
        self.pod_labels: list[tuple[str, str]] = []  # (namespace/name, standing)
        self.namespace_labels: list[tuple[str, str, str | None]] = []  # (namespace, label, value)
        self.evictions: list[str] = []  # namespace/name
        self.job_suspends: list[tuple[str, bool]] = []  # (namespace/name, suspend)
        #: Jobs by "namespace/name" (`suspend_job` sets their spec.suspend; 404 if absent).
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pod_events: list[PodEvent] = []
        self.quota_events: list[tuple[str, str, str]] = []  # (namespace/name, reason, message)
        self.object_events: list[ObjectEvent] = []
        self.patches: list[QuotaPatch] = []
        #: Cohorts' and ElasticQuotas' finalizers, by name, as the API holds them
        #: (`patch_finalizers` tests and sets them: 422 when they are not as the caller saw).
        self.finalizers: dict[str, tuple[str, ...]] = {}
        self.finalizer_writes: list[tuple[str, tuple[str, ...]]] = []  # (name, after)
        self.secret_writes = 0
        self.webhook_configurations: list[tuple[dict[str, Any], dict[str, Any]]] = []

    # ------------------------------------------------------------ scripting

    def fail_next(self, call: str, *errors: KubeError) -> None:
        """The next calls of `call` (a method name) raise these errors, one each, in order."""
        self._scripted[call].extend(errors)

    def put_pod(self, body: dict[str, Any]) -> None:
        """Store a pod as the API would serve it (the same dict: the test may change it)."""
        metadata = body["metadata"]
        self.pods[f"{metadata['namespace']}/{metadata['name']}"] = body

    def _answer(self, call: str) -> None:
        """Raise what the test scripted for this call, if anything."""
        if self._scripted[call]:
            raise self._scripted[call].pop(0)
        if self.down is not None:
            raise self.down

    def next_version(self) -> str:
        """A new resourceVersion (one counter for every object, as etcd's)."""
        return str(next(self._versions))

    # ------------------------------------------------------------ listing and watching

    async def list_all(self, what: str) -> list[dict[str, Any]]:
        items, _ = await self.list_with_version(what)
        return items

    async def list_with_version(self, what: str) -> tuple[list[dict[str, Any]], str]:
        self._answer("list")
        return list(self.listed[what]), self.next_version()

    async def list_pages(self, what: str) -> AsyncGenerator[tuple[list[dict[str, Any]], str], None]:
        yield await self.list_with_version(what)

    async def list_pod_entries(self) -> AsyncGenerator[tuple[list[PodEntry], str], None]:
        # Read here, as a paged list is: the helper process has tests of its own.
        async for page, version in self.list_pages("pods"):
            yield [pod_entry(body) for body in page], version

    async def watch_events(self, what: str, version: str) -> AsyncGenerator[dict[str, Any], None]:
        self._answer("watch")
        for event in self.watched[what]:
            yield event

    # ------------------------------------------------------------ pods and namespaces

    async def admit(
        self,
        namespace: str,
        name: str,
        gates: Sequence[str],
        has_labels: bool,
        standing: str | None,
        *,
        flavor: tuple[str, Mapping[str, str]] | None = None,
        has_node_selector: bool = False,
    ) -> None:
        self.admits.append((name, tuple(gates), flavor))
        self._answer("admit")
        body = self.pods.get(f"{namespace}/{name}")
        if body is None:
            raise KubeError(404, f"Pod {namespace}/{name}: remove gate: 404 not found")
        spec = body["spec"]
        current = tuple(g["name"] for g in spec.get("schedulingGates") or ())
        if current != tuple(gates):
            raise KubeError(422, f"Pod {namespace}/{name}: remove gate: 422 test failed")
        spec["schedulingGates"] = [{"name": g} for g in current if g != ADMISSION_GATE]
        if standing is not None:
            body["metadata"].setdefault("labels", {})[STANDING_LABEL] = standing

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        self.reads += 1
        self._answer("read_pod")
        body = self.pods.get(f"{namespace}/{name}")
        if body is None:
            raise KubeError(404, f"Pod {namespace}/{name}: read: 404 not found")
        return body

    async def label_pod(self, namespace: str, name: str, standing: str) -> None:
        self._answer("label_pod")
        self.pod_labels.append((f"{namespace}/{name}", standing))

    async def label_namespace(self, name: str, label: str, value: str | None) -> None:
        self._answer("label_namespace")
        self.namespace_labels.append((name, label, value))

    async def evict(self, namespace: str, name: str) -> None:
        self._answer("evict")
        self.evictions.append(f"{namespace}/{name}")
        self.pods.pop(f"{namespace}/{name}", None)

    async def suspend_job(
        self, namespace: str, name: str, suspend: bool, why: str | None = None
    ) -> None:
        self._answer("suspend_job")
        body = self.jobs.get(f"{namespace}/{name}")
        if body is None:
            raise KubeError(404, f"Job {namespace}/{name}: suspend: 404 not found")
        patch = job_suspension(suspend, why)
        body.setdefault("spec", {})["suspend"] = suspend
        notes = body.setdefault("metadata", {}).setdefault("annotations", {})
        for key, value in patch["metadata"]["annotations"].items():
            if value is None:
                notes.pop(key, None)
            else:
                notes[key] = value
        self.job_suspends.append((f"{namespace}/{name}", suspend))

    async def pod_event(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None,
        reason: str,
        message: str,
        warning: bool = False,
        event_name: str | None = None,
    ) -> None:
        self._answer("pod_event")
        event_name = event_name or f"{name}.{self.next_version()}"
        if f"{namespace}/{event_name}" in self._event_names:
            raise KubeError(409, f"Pod {namespace}/{name}: event {reason}: 409 already exists")
        self._event_names.add(f"{namespace}/{event_name}")
        self.pod_events.append(PodEvent(namespace, name, uid, reason, message, warning, event_name))

    async def quota_event(self, namespace: str, name: str, *, reason: str, message: str) -> None:
        self._answer("quota_event")
        self.quota_events.append((f"{namespace}/{name}", reason, message))

    # ------------------------------------------------------------ quota objects

    async def quota_object_event(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        uid: str | None,
        reason: str,
        message: str,
        event_name: str | None = None,
    ) -> None:
        self._answer("quota_object_event")
        self.object_events.append(ObjectEvent(kind, namespace, name, uid, reason, message))

    async def patch_quota_object(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any] | None,
        annotations: Mapping[str, str] | None,
    ) -> None:
        self._answer("patch_quota_object")
        self.patches.append(QuotaPatch(kind, namespace, name, status, annotations))

    async def patch_finalizers(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        before: Sequence[str],
        after: Sequence[str],
    ) -> None:
        self._answer("patch_finalizers")
        if self.finalizers.get(name, ()) != tuple(before):
            raise KubeError(422, f"{kind} {name}: finalizers: 422 the request is invalid")
        self.finalizers[name] = tuple(after)
        self.finalizer_writes.append((name, tuple(after)))

    # ------------------------------------------------------------ leases and secrets

    async def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._answer("read_lease")
        found = self.leases.get(f"{namespace}/{name}")
        return None if found is None else copy.deepcopy(found)

    async def write_lease(self, namespace: str, lease: Mapping[str, Any], create: bool) -> None:
        self._answer("write_lease")
        if not self._write(self.leases, namespace, lease, create):
            raise KubeError(409, f"Lease {namespace}/{lease['metadata']['name']}: 409 conflict")

    async def read_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._answer("read_job")
        found = self.jobs.get(f"{namespace}/{name}")
        return None if found is None else copy.deepcopy(found)

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._answer("read_secret")
        found = self.secrets.get(f"{namespace}/{name}")
        return None if found is None else copy.deepcopy(found)

    async def write_secret(self, namespace: str, body: Mapping[str, Any], create: bool) -> bool:
        self._answer("write_secret")
        written = self._write(self.secrets, namespace, body, create)
        self.secret_writes += written
        return written

    def _write(
        self,
        store: dict[str, dict[str, Any]],
        namespace: str,
        body: Mapping[str, Any],
        create: bool,
    ) -> bool:
        """Create, or replace at the resourceVersion sent; False where the API says 409."""
        key = f"{namespace}/{body['metadata']['name']}"
        current = store.get(key)
        if create:
            if current is not None:
                return False  # AlreadyExists
        elif (
            current is None
            or body["metadata"].get("resourceVersion") != (current["metadata"]["resourceVersion"])
        ):
            return False  # Conflict
        stored = copy.deepcopy(dict(body))
        stored["metadata"]["resourceVersion"] = self.next_version()
        store[key] = stored
        return True

    # ------------------------------------------------------------ the webhooks' other calls

    async def whoami(self) -> str:
        self._answer("whoami")
        return "system:serviceaccount:quotree-system:quotree"

    async def namespace_deleting(self, name: str) -> bool:
        self._answer("namespace_deleting")
        return name in self.deleting

    async def member_leaving(self, kind: str, namespace: str | None, name: str) -> bool:
        self._answer("member_leaving")
        return name in self.leaving

    async def apply_webhook_configurations(
        self, mutating: dict[str, Any], validating: dict[str, Any]
    ) -> None:
        self._answer("apply_webhook_configurations")
        self.webhook_configurations.append((mutating, validating))


# mypy (`make typecheck`) checks the fake against both protocols the real client meets.
_OPERATOR_API: KubeAPI = FakeKube()
_WEBHOOK_API: WebhookApi = FakeKube()
