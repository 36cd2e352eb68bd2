"""Kopf entry point: `kopf run --all-namespaces -m quotree_operator.main`.

The handlers (Nodes, Cohorts, ElasticQuotas; Pods come from `Shell.watch_pods`, a plain
watch) only translate watch events into engine inputs (`Shell.observe_*`); the decision
loop and the status writer (shell.py) turn the engine's decisions into API writes.
Handlers are `async` on purpose: Kopf runs sync handlers in threads, and the engine is not
thread-safe. `@kopf.on.event` stores nothing on the objects (no progress annotations).

Kopf's memo carries `memo.engine` (the live quotree.Engine), `memo.config`
(OperatorConfig), `memo.kube`, `memo.shell` and, with webhooks on,
`memo.recently_allowed`; the webhooks read engine, config and recently_allowed.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import Any

import kopf

from quotree.models import GROUP, VERSION
from quotree_operator.client import Kube
from quotree_operator.config import OperatorConfig
from quotree_operator.leader import LeaderLease
from quotree_operator.metrics import METRICS
from quotree_operator.metrics import start as start_metrics
from quotree_operator.page import tree_json
from quotree_operator.shell import Shell

logger = logging.getLogger("quotree.operator")

_background: list[asyncio.Task[None]] = []

# The webhooks (issue 5) register their Kopf admission handlers at import; with
# QUOTREE_WEBHOOKS=0 they are not imported at all (Kopf refuses handlers without a server).
_webhook_server: Any = None
if OperatorConfig.from_env().webhooks:
    importlib.import_module("quotree_webhooks.handlers")
    _webhook_server = importlib.import_module("quotree_webhooks.server")


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
    if config.webhooks and _webhook_server is not None:
        _webhook_server.configure(settings, config)

    kube = await Kube.connect(pool=config.concurrency + 8)
    shell = Shell(config, kube, concurrency=config.concurrency)
    # Rebuild the engine from the API before Kopf's watches start (startup handlers run
    # first), so every later watch event is newer than what was loaded. Pods are not
    # watched by Kopf (~4 ms of CPU per event in its per-object machinery): Shell.watch_pods
    # streams them with a plain watch from the resourceVersion of load()'s pod list.
    await shell.load()
    memo.config = config
    memo.kube = kube
    memo.shell = shell
    memo.engine = shell.engine
    if config.webhooks and _webhook_server is not None:
        # Shared by every admission request (Kopf may hand handlers a copy of memo).
        from quotree_webhooks.decisions import RecentlyAllowed  # noqa: PLC0415 (optional part)

        memo.recently_allowed = RecentlyAllowed()

    def leadership(leading: bool) -> None:
        shell.leading = leading
        METRICS.set_leader(leading)
        shell.changed()

    METRICS.watch(shell.engine)
    memo.metrics_runner = await start_metrics(
        config.metrics_host,
        config.metrics_port,
        lambda: tree_json(
            shell.engine,
            bad_configs=shell.bad_configs,
            leading=shell.leading,
            identity=config.identity,
        ),
    )

    lease = LeaderLease(kube, config.namespace, config.identity, leadership)
    _background.extend(
        asyncio.create_task(coro, name=name)
        for name, coro in (
            ("quotree-pods", shell.watch_pods()),
            ("quotree-decisions", shell.decision_loop()),
            ("quotree-status", shell.status_loop()),
            ("quotree-lease", lease.run()),
        )
    )
    logger.info(
        "quotree operator started (identity %s, reclaim delay %ss)",
        config.identity,
        config.reclaim_delay,
    )


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    for task in _background:
        task.cancel()
    await asyncio.gather(*_background, return_exceptions=True)
    _background.clear()
    kube = getattr(memo, "kube", None)
    if kube is not None:
        await kube.close()
    runner = getattr(memo, "metrics_runner", None)
    if runner is not None:
        await runner.cleanup()


def _deleted(event: kopf.RawEvent) -> bool:
    return event.get("type") == "DELETED"


@kopf.on.event("", "v1", "nodes")
async def node_event(event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
    memo.shell.observe_node(body, _deleted(event))


@kopf.on.event(GROUP, VERSION, "cohorts")
async def cohort_event(event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
    memo.shell.observe_quota_object(body, _deleted(event))


@kopf.on.event(GROUP, VERSION, "elasticquotas")
async def quota_event(event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
    memo.shell.observe_quota_object(body, _deleted(event))
