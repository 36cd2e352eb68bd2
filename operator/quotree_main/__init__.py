"""The process's entry point: `kopf run --all-namespaces -m quotree_main`.

It sits above both shells and is the only place that knows both: it reads the operator's
configuration, builds the webhooks' own settings from it, creates the one Kubernetes client
(quotree_operator/client.py) they share, and registers the Kopf handlers. Nothing else
happens here: the operator's work is in quotree_operator.controller, the webhooks' in
quotree_webhooks.

Everything the handlers share is one typed object on Kopf's memo, `memo.quotree`
(`Process`). Handlers are `async` on purpose: Kopf runs sync handlers in threads, and the
engine is not thread-safe. `@kopf.on.event` stores nothing on the objects (no progress
annotations). Pods, Cohorts and ElasticQuotas are not watched through Kopf
(quotree_operator/podwatch.py says why).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from dataclasses import dataclass, field
from typing import Any

import kopf
from aiohttp import web

from quotree.models import GROUP, VERSION
from quotree_main import startup
from quotree_operator.client import Kube
from quotree_operator.config import OperatorConfig
from quotree_operator.controller import Controller, tune_after_first_decisions
from quotree_operator.kube_errors import KubeError
from quotree_operator.leader import LeaderLease
from quotree_operator.lease_api import LeaseCalls
from quotree_operator.metrics import METRICS
from quotree_operator.page import start as start_metrics
from quotree_operator.page import tree_json
from quotree_operator.webhook_api import WebhookCalls
from quotree_webhooks import server as webhook_server
from quotree_webhooks.settings import WebhookSettings, WebhookState

__all__ = ["Process", "webhook_settings"]

logger = logging.getLogger("quotree.operator")

# The webhook handlers register with Kopf when imported; with QUOTREE_WEBHOOKS=0 they are
# not imported at all (Kopf refuses admission handlers without a server).
if OperatorConfig.from_env().webhooks:
    import quotree_webhooks.handlers  # noqa: F401


@dataclass
class Process:
    """What the handlers share, kept on Kopf's memo as `memo.quotree`."""

    config: OperatorConfig
    kube: Kube
    controller: Controller
    #: None when the webhooks are off (QUOTREE_WEBHOOKS=0).
    webhooks: WebhookState | None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    #: The metrics port's server (None when it is off or its port was taken).
    metrics_server: web.AppRunner | None = None


def webhook_settings(config: OperatorConfig) -> WebhookSettings:
    """The webhooks' settings, from the operator's configuration (environment variables)."""
    return WebhookSettings(
        never_gated=config.never_gated,
        host=config.webhook_host,
        port=config.webhook_port,
        cert_dir=config.cert_dir,
        service=config.webhook_service,
        cert_secret=f"{config.namespace}/{config.cert_secret}" if config.cert_secret else None,
        cert_provided=config.cert_provided,
    )


class EventsOnlyDiffBase(kopf.DiffBaseStorage):
    """No diff-base: quotree has only `@kopf.on.event` handlers, which never read it.

    Kopf's default builds one for every event anyway (a deep copy of the whole body, then
    another to strip its progress fields): at thousands of pod events that was a third of
    the operator's CPU. Nothing is ever stored on the objects either way.
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def _process(memo: kopf.Memo) -> Process:
    process: Process = memo.quotree
    return process


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    config = OperatorConfig.from_env()
    logging.getLogger("quotree").setLevel(config.log_level)
    # One "Handler succeeded" line per pod event drowns the log (and costs CPU) at scale.
    logging.getLogger("kopf.objects").setLevel(
        max(logging.WARNING, logging.getLevelName(config.log_level))
    )
    # One replica acts through the Lease (leader.py); Kopf's peering would freeze them all.
    settings.peering.standalone = True
    settings.scanning.disabled = True  # no CRD watching: fewer permissions, fixed resources
    settings.persistence.diffbase_storage = EventsOnlyDiffBase()
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60

    # A failure here is one line and another attempt (startup.py); Kopf opens its health
    # endpoint only once this handler has succeeded.
    try:
        kube = await Kube.connect(pool=config.concurrency + 8)
    except KubeError as exc:
        raise kopf.TemporaryError(startup.explain(exc), delay=startup.RETRY_DELAY) from None
    kube.page_size = config.list_page_size
    kube.pod_reader = config.list_reader
    controller = Controller(config, kube)
    # Rebuild the engine from the API before Kopf's watches start (start-up handlers run
    # first), so every later watch event is newer than what was loaded; the pod watch
    # starts from the resourceVersion of load()'s pod list.
    # Millions of objects that stay: no collector passes over them while they are made,
    # nor until they are frozen out of its passes after the first decisions.
    gc.disable()
    try:
        await controller.load()
    except KubeError as exc:
        gc.enable()
        await kube.close()
        raise kopf.TemporaryError(startup.explain(exc), delay=startup.RETRY_DELAY) from None
    except BaseException:
        gc.enable()
        raise
    webhooks = None
    if config.webhooks:
        webhooks = WebhookState(
            controller.engine, webhook_settings(config), groups=controller.inputs.book
        )
        webhooks.on_answer = METRICS.webhook
        webhooks.admit = controller.admitter
        webhooks.admitting = controller.admitter.active
        webhook_server.configure(settings, webhooks, WebhookCalls(kube))
    process = Process(config, kube, controller, webhooks)
    memo.quotree = process
    METRICS.watch(controller.engine)
    process.metrics_server = await start_metrics(
        config.metrics_host,
        config.metrics_port,
        lambda: tree_json(
            controller.engine,
            bad_configs=controller.inputs.bad_specs,
            leading=controller.signals.leading,
            identity=config.identity,
        ),
    )

    lease = LeaderLease(
        LeaseCalls(kube),
        config.namespace,
        config.identity,
        lambda leading: controller.set_leading(leading, lease.previous),
        address=config.webhook_address if controller.admitter.enabled else None,
    )
    if webhooks is not None:
        webhooks.leader_address = lambda: lease.leader_address
    process.tasks.extend(
        asyncio.create_task(coro, name=name)
        for name, coro in (
            ("quotree-pods", controller.watch_pods()),
            ("quotree-jobs", controller.watch_jobs()),
            ("quotree-podgroups", controller.watch_pod_groups()),
            ("quotree-cohorts", controller.watch_quota_objects("Cohort")),
            ("quotree-elasticquotas", controller.watch_quota_objects("ElasticQuota")),
            ("quotree-decisions", controller.decision_loop()),
            ("quotree-status", controller.status_writer.run()),
            ("quotree-lease", lease.run()),
            ("quotree-gc", tune_after_first_decisions(controller.signals)),
        )
    )
    logger.info(
        "quotree operator started (identity %s, reclaim delay %ss)",
        config.identity,
        config.reclaim_delay,
    )


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    process: Process | None = getattr(memo, "quotree", None)
    if process is None:
        return
    for task in process.tasks:
        task.cancel()
    await asyncio.gather(*process.tasks, return_exceptions=True)
    process.tasks.clear()
    await process.kube.close()
    if process.metrics_server is not None:
        await process.metrics_server.cleanup()


def _deleted(event: kopf.RawEvent) -> bool:
    return event.get("type") == "DELETED"


@kopf.on.event("", "v1", "nodes")
async def cluster_node_event(
    event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    _process(memo).controller.inputs.observe_cluster_node(body, _deleted(event))


@kopf.on.event("", "v1", "namespaces")
async def namespace_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    controller = _process(memo).controller
    controller.namespaces.observe(body, _deleted(event))
    controller.signals.wake.set()


@kopf.on.event(GROUP, VERSION, "resourceflavors")
async def flavor_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _process(memo).controller.inputs.observe_flavor(body, _deleted(event))
