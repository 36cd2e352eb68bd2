"""The operator's settings, from command-line-free environment variables (QUOTREE_*).

One object, read once at start-up by the entry point (quotree_main), which also builds the
webhooks' own `WebhookSettings` from it, so both shells agree on namespaces and ports
without the webhooks importing the operator.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from quotree import resolution

__all__ = ["OperatorConfig"]


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """What can be configured; every field has an environment variable (see README)."""

    #: Namespace the operator runs in; never gated (QUOTREE_NAMESPACE, else the pod's own).
    namespace: str = "quotree-system"
    #: Extra namespaces whose pods are never gated (QUOTREE_SYSTEM_NAMESPACES, comma-separated).
    system_namespaces: tuple[str, ...] = ()
    #: ElasticQuota for pods no quota covers (QUOTREE_DEFAULT_QUOTA); empty: they are unmanaged.
    default_quota: str | None = None
    #: Seconds a pod waits for lent quota before reclaim is tried for it (QUOTREE_RECLAIM_DELAY).
    reclaim_delay: float = 30.0
    #: Seconds a pod group may wait for all its pods before its GroupIncomplete event
    #: (QUOTREE_GROUP_TIMEOUT).
    group_timeout: float = 300.0
    #: Seconds an admitted pod group's pods may stay unscheduled before the group is
    #: evicted and waits again (QUOTREE_SCHEDULING_TIMEOUT).
    scheduling_timeout: float = 300.0
    #: Log level (QUOTREE_LOG_LEVEL).
    log_level: str = "INFO"
    #: Serve the admission webhooks from this process (QUOTREE_WEBHOOKS, "0" to turn off).
    webhooks: bool = True
    #: Where the webhook server listens (QUOTREE_WEBHOOK_HOST / QUOTREE_WEBHOOK_PORT).
    webhook_host: str = "127.0.0.1"
    webhook_port: int = 9443
    #: Folder for the webhook CA and serving certificate (QUOTREE_CERT_DIR).
    cert_dir: Path = field(
        default_factory=lambda: Path.home() / ".cache" / "quotree" / "webhook-pki"
    )
    #: In a cluster: the Service that fronts the webhook (QUOTREE_WEBHOOK_SERVICE, "ns/name");
    #: empty: the API server calls https://webhook_host:webhook_port directly (local runs).
    webhook_service: str | None = None
    #: Secret in `namespace` that shares the webhook CA and certificate between replicas
    #: (QUOTREE_CERT_SECRET); empty: each process keeps its own in `cert_dir` (local runs).
    cert_secret: str | None = None
    #: The certificate in `cert_dir` is made and renewed by someone else, e.g. cert-manager
    #: (QUOTREE_CERT_PROVIDED=1): served as it is, never written.
    cert_provided: bool = False
    #: Who holds the leader Lease (QUOTREE_IDENTITY, else POD_NAME, else the host name).
    identity: str = field(default_factory=socket.gethostname)
    #: Concurrent API writes for admissions, evictions and statuses (QUOTREE_CONCURRENCY).
    concurrency: int = 48
    #: Metrics, the tree page and its JSON (QUOTREE_METRICS_HOST / QUOTREE_METRICS_PORT;
    #: port 0 turns them off; not 8080, Kopf's liveness port in the Deployment). In a
    #: cluster the Deployment sets the host to 0.0.0.0.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 8000
    #: Maintenance mode (QUOTREE_MAINTENANCE=1): admit nothing new, evict nothing, keep
    #: accounting and reporting (docs/design/choices.md, "Maintenance mode").
    maintenance: bool = False
    #: Objects per list request at start-up (QUOTREE_LIST_PAGE_SIZE); 0, the default: one
    #: streamed list per kind from the API server's watch cache (listing.py).
    list_page_size: int = 0
    #: Admit a pod that fits when it is created in the webhook's answer, on the leader
    #: (QUOTREE_ADMIT_AT_CREATE, "0": every pod is gated; create_admitter.py).
    admit_at_create: bool = True
    #: Seconds the room of a pod admitted at creation waits for the pod to show up
    #: (QUOTREE_ADMIT_RESERVATION_SECONDS; docs/webhooks.md says how to choose it).
    admit_reservation_seconds: float = 10.0
    #: This pod's IP (POD_IP, from the downward API): where the other replicas reach its
    #: webhooks; empty: the webhook host (local runs).
    pod_ip: str | None = None
    #: Read the start-up pod list in a helper process (QUOTREE_LIST_READER, "0" to read it
    #: in the operator's own process; pod_reader.py).
    list_reader: bool = True

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> OperatorConfig:
        env = dict(os.environ if environ is None else environ)
        # With slots=True, `cls.field` is a slot descriptor, not the default: use an instance.
        defaults = cls()
        namespace = env.get("QUOTREE_NAMESPACE") or env.get("POD_NAMESPACE") or defaults.namespace
        return cls(
            namespace=namespace,
            system_namespaces=_csv(env.get("QUOTREE_SYSTEM_NAMESPACES", "")),
            default_quota=env.get("QUOTREE_DEFAULT_QUOTA") or None,
            reclaim_delay=float(env.get("QUOTREE_RECLAIM_DELAY", defaults.reclaim_delay)),
            group_timeout=float(env.get("QUOTREE_GROUP_TIMEOUT", defaults.group_timeout)),
            scheduling_timeout=float(
                env.get("QUOTREE_SCHEDULING_TIMEOUT", defaults.scheduling_timeout)
            ),
            log_level=env.get("QUOTREE_LOG_LEVEL", defaults.log_level).upper(),
            webhooks=env.get("QUOTREE_WEBHOOKS", "1") not in ("0", "false", "no"),
            webhook_host=env.get("QUOTREE_WEBHOOK_HOST", defaults.webhook_host),
            webhook_port=int(env.get("QUOTREE_WEBHOOK_PORT", defaults.webhook_port)),
            cert_dir=Path(env["QUOTREE_CERT_DIR"])
            if env.get("QUOTREE_CERT_DIR")
            else Path.home() / ".cache" / "quotree" / "webhook-pki",
            webhook_service=env.get("QUOTREE_WEBHOOK_SERVICE") or None,
            cert_secret=env.get("QUOTREE_CERT_SECRET") or None,
            cert_provided=env.get("QUOTREE_CERT_PROVIDED", "0") not in ("0", "false", "no", ""),
            identity=env.get("QUOTREE_IDENTITY") or env.get("POD_NAME") or socket.gethostname(),
            concurrency=int(env.get("QUOTREE_CONCURRENCY", defaults.concurrency)),
            metrics_host=env.get("QUOTREE_METRICS_HOST", defaults.metrics_host),
            metrics_port=int(env.get("QUOTREE_METRICS_PORT", defaults.metrics_port)),
            maintenance=env.get("QUOTREE_MAINTENANCE", "0") not in ("0", "false", "no", ""),
            list_page_size=int(env.get("QUOTREE_LIST_PAGE_SIZE", defaults.list_page_size)),
            list_reader=env.get("QUOTREE_LIST_READER", "1") not in ("0", "false", "no", ""),
            pod_ip=env.get("POD_IP") or None,
            admit_at_create=env.get("QUOTREE_ADMIT_AT_CREATE", "1") not in ("0", "false", "no", ""),
            admit_reservation_seconds=float(
                env.get("QUOTREE_ADMIT_RESERVATION_SECONDS", defaults.admit_reservation_seconds)
            ),
        )

    @property
    def webhook_address(self) -> str:
        """ "host:port" where the other replicas reach this one's webhooks."""
        host = self.pod_ip or self.webhook_host
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"[{host}]:{self.webhook_port}" if ":" in host else f"{host}:{self.webhook_port}"

    @property
    def never_gated(self) -> frozenset[str]:
        """Namespaces whose pods quotree never touches (the engine's rule, with ours)."""
        return resolution.never_gated(self.namespace, self.system_namespaces)
