"""The webhook server: quotree's certificates, the webhook process, our webhook configurations.

The entry point (quotree_main) calls `configure(settings, state, api)` from its start-up
handler. From then on Kopf runs `QuotreeWebhookServer`, which:

1. learns the operator's own user name through the shared API client
   (`state.api`): the pod UPDATE webhook lets only that user change quotree's
   labels and gate;
2. listens on a Unix socket of its own (abstract, private to the pod's network
   namespace) with Kopf's admission machinery behind it: the handlers in handlers.py;
3. starts the webhook process (process.py, worker.py), which serves HTTPS at
   `settings.host:port` with the certificate `tls.ensure_pki` made, answers the pod
   CREATE reviews itself and passes every other review to that socket;
4. once the webhook process listens, writes the Mutating- and
   ValidatingWebhookConfiguration (see `configurations`) with the CA bundle and a
   Service when `settings.service` is set (named `quotree.io`), else a URL (named
   `local.quotree.io`);
5. checks every minute whether the certificate files changed (renewed here every hour
   when due, or by cert-manager), then tells the webhook process to load them and writes
   the configurations again (a renewed CA changes their caBundle).

The configurations are left in place when the operator stops, on purpose:
pod creation in managed namespaces then fails fast (docs/webhooks.md).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp.web
import kopf

from quotree_webhooks import tls
from quotree_webhooks.cert_secret import sync_from_secret
from quotree_webhooks.configurations import build_configurations
from quotree_webhooks.process import WebhookProcess
from quotree_webhooks.settings import WebhookApi, WebhookSettings, WebhookState
from quotree_webhooks.wire import WorkerConfig

__all__ = ["QuotreeWebhookServer", "configure", "serving_hosts"]

logger = logging.getLogger("quotree.webhooks")

#: How often the serving certificate is checked for renewal, in seconds.
RENEW_CHECK_INTERVAL = 3600.0
#: How often the certificate files are checked for changes (renewed here or by cert-manager).
FILE_CHECK_INTERVAL = 60.0
#: Service port the API server calls in a cluster deployment.
SERVICE_PORT = 443


def serving_hosts(settings: WebhookSettings) -> list[str]:
    """Names the serving certificate must carry."""
    if settings.service:
        namespace, _, name = settings.service.partition("/")
        return [
            f"{name}.{namespace}.svc",
            f"{name}.{namespace}.svc.cluster.local",
            f"{name}.{namespace}",
            name,
        ]
    host = settings.host
    try:
        if ipaddress.ip_address(host).is_unspecified:
            host = "127.0.0.1"
    except ValueError:
        pass
    return [host, "127.0.0.1", "localhost"]


async def _retry(what: str, call: Any, *args: Any) -> Any:
    """Call `call(*args)` until it succeeds; the webhooks are useless until it does."""
    delay = 1.0
    while True:
        try:
            return await call(*args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.error(
                "webhooks: %s failed (%s: %s); retrying in %.0fs",
                what,
                type(exc).__name__,
                exc,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)


class QuotreeWebhookServer(kopf.WebhookServer):
    """Kopf's admission server, served through the webhook process; see module docstring."""

    def __init__(self, *, state: WebhookState, api: WebhookApi, pki: tls.Pki) -> None:
        settings = state.settings
        super().__init__(
            addr=settings.host,
            port=settings.port,
            certfile=str(pki.cert),
            pkeyfile=str(pki.key),
            cafile=str(pki.ca_cert),
        )
        self.state = state
        self.settings = settings
        self.api = api
        self.pki = pki
        #: The running webhook process's supervisor (None until the server starts).
        self.process: WebhookProcess | None = None

    @staticmethod
    async def _answer(fn: Any, request: aiohttp.web.Request) -> aiohttp.web.Response:
        """Kopf's request handling, but a request Kopf cannot read still gets an answer.

        Kopf answers HTTP 400/500 when a review's object is not shaped like a
        Kubernetes object (e.g. `metadata` is not a map); the API server would
        show that as a failed webhook call. We answer a denial that says why.
        """
        try:
            response: aiohttp.web.Response = await kopf.WebhookServer._serve(fn, request)
        except Exception as exc:
            try:
                review = json.loads(await request.text())
                uid = str(review["request"]["uid"])
            except Exception:
                raise aiohttp.web.HTTPBadRequest(reason="not an AdmissionReview") from None
            logger.warning("webhooks: malformed admission request %s: %s", uid, exc)
            return aiohttp.web.json_response(
                {
                    "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
                    "kind": "AdmissionReview",
                    "response": {
                        "uid": uid,
                        "allowed": False,
                        "status": {
                            "code": 400,
                            "message": "quotree: the object in this admission request is "
                            "not a well-formed Kubernetes object",
                        },
                    },
                }
            )
        return response

    def _client_config(self) -> dict[str, Any]:
        ca_bundle = base64.b64encode(Path(str(self.cafile)).read_bytes()).decode()
        if self.settings.service:
            namespace, _, name = self.settings.service.partition("/")
            service = {"namespace": namespace, "name": name, "port": SERVICE_PORT}
            return {"service": service, "caBundle": ca_bundle}
        host = self._get_accessible_addr(self.settings.host)
        url = self._build_url("https", host, self.settings.port, "")
        return {"url": url, "caBundle": ca_bundle}

    async def _ensure_pki(self, hosts: list[str]) -> tls.Pki:
        """The certificate files; from the shared Secret when there is one (cert_secret)."""
        if self.settings.cert_secret and not self.settings.cert_provided:
            namespace, _, name = self.settings.cert_secret.partition("/")
            return await sync_from_secret(self.api, namespace, name, self.settings.cert_dir, hosts)
        return await asyncio.to_thread(
            tls.ensure_pki, self.settings.cert_dir, hosts, provided=self.settings.cert_provided
        )

    async def _write_configurations(self, username: str) -> None:
        client_config = self._client_config()
        mutating, validating = build_configurations(
            client_config, never_gated=self.settings.never_gated, operator_username=username
        )
        await _retry(
            "writing the webhook configurations",
            self.api.apply_webhook_configurations,
            mutating,
            validating,
        )
        where = client_config.get("url") or client_config.get("service")
        # "configurations quotree.io written" either way: tests and benchmarks wait for it.
        name = mutating["metadata"]["name"]
        logger.info(
            "webhooks: serving at %s; configurations quotree.io written (named %s)", where, name
        )

    def _file_stamps(self) -> tuple[tuple[int, int], ...]:
        stamps = []
        for path in (self.pki.cert, self.pki.key, self.pki.ca_cert):
            try:
                stat = path.stat()
                stamps.append((stat.st_mtime_ns, stat.st_size))
            except OSError:
                stamps.append((0, 0))
        return tuple(stamps)

    async def _renew_forever(self, process: WebhookProcess, username: str) -> None:
        hosts = serving_hosts(self.settings)
        stamps = self._file_stamps()
        next_renewal = time.monotonic() + RENEW_CHECK_INTERVAL
        while True:
            await asyncio.sleep(FILE_CHECK_INTERVAL)
            if time.monotonic() >= next_renewal:
                next_renewal = time.monotonic() + RENEW_CHECK_INTERVAL
                try:
                    pki = await self._ensure_pki(hosts)
                except Exception as exc:
                    logger.error("webhooks: cannot renew the serving certificate: %s", exc)
                else:
                    if pki.renewed:
                        logger.info(
                            "webhooks: renewed the serving certificate in %s", pki.cert.parent
                        )
            now = self._file_stamps()
            if now != stamps:
                stamps = now
                await process.reload_certificates()
                await self._write_configurations(username)

    async def __call__(self, fn: Any) -> AsyncIterator[Any]:
        username = await _retry("asking the API who the operator is", self.api.whoami)
        self.state.trusted_users = frozenset({username})
        logger.info(
            "webhooks: the operator is %s; only it may change quotree's pod labels", username
        )
        if self.settings.cert_secret:
            # Before the webhook process reads the files: the certificate all replicas share.
            await _retry(
                f"reading the shared certificate (Secret {self.settings.cert_secret})",
                self._ensure_pki,
                serving_hosts(self.settings),
            )

        async def serve(request: aiohttp.web.Request) -> aiohttp.web.Response:
            return await QuotreeWebhookServer._answer(fn, request)

        # The reviews the webhook process passes on; it counts them in the metrics.
        upstream = f"\0quotree-webhooks-{os.getpid()}-{secrets.token_hex(6)}"
        app = aiohttp.web.Application()
        app.add_routes([aiohttp.web.post("/{id:.*}", serve)])
        runner = aiohttp.web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        tasks: list[asyncio.Task[None]] = []
        try:
            await aiohttp.web.UnixSite(runner, upstream).start()
            process = WebhookProcess(
                self.state,
                WorkerConfig(
                    host=self.settings.host,
                    port=self.settings.port,
                    certfile=str(self.pki.cert),
                    keyfile=str(self.pki.key),
                    never_gated=self.settings.never_gated,
                    upstream=upstream,
                    cafile=str(self.pki.ca_cert),
                    log_level=logging.getLevelName(
                        logging.getLogger("quotree").getEffectiveLevel()
                    ),
                ),
            )
            self.process = process
            tasks.append(asyncio.create_task(process.run(), name="quotree-webhook-process"))
            await process.serving.wait()
            await self._write_configurations(username)
            tasks.append(asyncio.create_task(self._renew_forever(process, username)))
            yield self._client_config()
            await asyncio.Event().wait()  # serve until Kopf stops the server
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await runner.cleanup()


def configure(settings: kopf.OperatorSettings, state: WebhookState, api: WebhookApi) -> None:
    """Make or renew the certificates and give Kopf our server (called at operator start-up).

    `api` is also kept in `state.api`, for the handlers (rule 7's namespace check).
    """
    pki = tls.ensure_pki(
        state.settings.cert_dir,
        serving_hosts(state.settings),
        provided=state.settings.cert_provided,
    )
    if pki.renewed:
        logger.info("webhooks: wrote a new serving certificate to %s", pki.cert.parent)
    state.api = api
    # One access-log line per admission request is one more write per pod created; the
    # metrics count the requests (quotree_webhook_duration_seconds).
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    settings.admission.server = QuotreeWebhookServer(state=state, api=api, pki=pki)
    # We write the configurations ourselves (see `configurations`); Kopf must not.
    settings.admission.managed = None
