"""The webhooks' own settings and the state their handlers share, typed.

The webhooks do not read the operator's configuration: the entry point (quotree_main)
builds a `WebhookSettings` from it, and a `WebhookState` that it keeps on Kopf's memo
(`memo.quotree.webhooks`). The Kubernetes calls the webhooks need are described by
`WebhookApi`; the entry point hands over the operator's calls for them, made through
the one connection both shells share (quotree_operator/webhook_api.py), a package this
one never imports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from quotree import Engine
from quotree.group_book import GroupBook
from quotree_webhooks.admit_at_create import Admit
from quotree_webhooks.decisions import RecentlyAllowed

__all__ = ["WebhookApi", "WebhookSettings", "WebhookState", "state_from_memo"]


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """Where the webhooks listen, how the API server reaches them, whom they leave alone."""

    #: Namespaces whose pods quotree never touches: Kubernetes' own, the operator's, the
    #: configured ones (the engine's `quotree.resolution.never_gated` makes the set).
    never_gated: frozenset[str]
    #: Where the HTTPS server listens.
    host: str
    port: int
    #: Folder for the webhook CA and serving certificate.
    cert_dir: Path
    #: In a cluster: the Service that fronts the webhooks ("ns/name"); None: the API
    #: server calls https://host:port directly (local runs).
    service: str | None = None
    #: The Secret ("ns/name", in the operator's namespace) all replicas share the CA and
    #: serving certificate through (cert_secret.py); None: each keeps its own in `cert_dir`.
    cert_secret: str | None = None
    #: The certificate in `cert_dir` is someone else's (cert-manager): never written.
    cert_provided: bool = False


class WebhookApi(Protocol):
    """The Kubernetes calls the webhooks make (quotree_operator.webhook_api.WebhookCalls)."""

    async def whoami(self) -> str: ...

    async def namespace_deleting(self, name: str) -> bool: ...

    async def member_leaving(self, kind: str, namespace: str | None, name: str) -> bool: ...

    async def apply_webhook_configurations(
        self, mutating: dict[str, Any], validating: dict[str, Any]
    ) -> None: ...

    async def read_job(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def write_secret(self, namespace: str, body: dict[str, Any], create: bool) -> bool: ...


@dataclass(slots=True)
class WebhookState:
    """What every admission request reads: the operator's engine and what the server learnt."""

    #: The operator's live engine (only read here).
    engine: Engine
    settings: WebhookSettings
    #: None without an API (unit tests): rule 7 then trusts the requester's identity.
    api: WebhookApi | None = None
    #: The operator's user names (learnt by the server at start): they may change
    #: quotree's pod labels and gate.
    trusted_users: frozenset[str] = frozenset()
    #: Shared by every request (Kopf hands each handler a shallow copy of memo).
    recently_allowed: RecentlyAllowed = field(default_factory=RecentlyAllowed)
    #: Told of every answer: (webhook, seconds, error); the entry point sets the metrics'.
    on_answer: Callable[[str, float, bool], None] | None = None
    #: The Jobs and pod-group declarations the operator keeps (only read here, and copied
    #: to the webhook process).
    groups: GroupBook = field(default_factory=GroupBook)
    #: The leader's admission at creation (admit_at_create.py), and whether it admits now
    #: (the webhook process passes the pod CREATE reviews on to it while it does).
    admit: Admit | None = None
    admitting: Callable[[], bool] | None = None
    #: Where the replica that admits at creation answers ("host:port"; None: unknown or
    #: this one): the webhook process passes it the pod CREATE reviews.
    leader_address: Callable[[], str | None] | None = None


def state_from_memo(memo: object) -> WebhookState | None:
    """The `WebhookState` the entry point keeps at `memo.quotree.webhooks`, if any yet."""
    state = getattr(getattr(memo, "quotree", None), "webhooks", None)
    return state if isinstance(state, WebhookState) else None
