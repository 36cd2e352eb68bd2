"""The webhook server: quotree's certificates, Kopf's HTTPS server, our webhook configurations.

The entry point (quotree_main) calls `configure(settings, state)` from its start-up
handler. From then on Kopf runs `QuotreeWebhookServer`, which:

1. learns the operator's own user name through the shared API client
   (`state.api`): the pod UPDATE webhook lets only that user change quotree's
   labels and gate;
2. serves HTTPS with the certificate `tls.ensure_pki` made, and checks every
   hour whether it is due for renewal (Kopf notices the new files and
   restarts its listener with them);
3. each time the listener (re)starts, writes the Mutating- and
   ValidatingWebhookConfiguration `quotree.io` (see `configurations`) with
   the CA bundle and a URL, or a Service when `settings.service` is set.

The configurations are left in place when the operator stops, on purpose:
pod creation in managed namespaces then fails fast (docs/webhooks.md).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp.web
import kopf

from quotree_webhooks import fastpath, tls
from quotree_webhooks.cert_secret import sync_from_secret
from quotree_webhooks.configurations import (
    COHORTS_VALIDATE,
    ELASTICQUOTAS_VALIDATE,
    PODS_MUTATE,
    PODS_VALIDATE,
    build_configurations,
)
from quotree_webhooks.settings import WebhookApi, WebhookSettings, WebhookState

__all__ = ["QuotreeWebhookServer", "configure", "serving_hosts"]

logger = logging.getLogger("quotree.webhooks")

#: How often the serving certificate is checked for renewal, in seconds.
RENEW_CHECK_INTERVAL = 3600.0
#: Service port the API server calls in a cluster deployment.
SERVICE_PORT = 443
#: Our webhooks (paths), the `webhook` label of the metrics; anything else counts as "other".
WEBHOOKS = frozenset({PODS_MUTATE, PODS_VALIDATE, COHORTS_VALIDATE, ELASTICQUOTAS_VALIDATE})


def _is_error(response: aiohttp.web.StreamResponse) -> bool:
    """An answer that is not a decision: a malformed request (400), not ready or failed (5xx).

    Denials are answered with 403 (handlers.DENIED) and are not errors.
    """
    if response.status >= 500:
        return True
    body = getattr(response, "body", None)
    if not isinstance(body, bytes | bytearray):
        return False
    try:
        code = json.loads(body)["response"]["status"]["code"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(code, int) and (code == 400 or code >= 500)


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
    """Kopf's aiohttp server, plus our certificates and webhook configurations."""

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

    async def _serve(  # type: ignore[override]  # Kopf calls it as self._serve(fn, request)
        self, fn: Any, request: aiohttp.web.Request
    ) -> aiohttp.web.Response:
        """`_answer`, timed and reported to `state.on_answer` (the metrics) when set."""
        started = time.perf_counter()
        error = True
        try:
            response = None
            if request.match_info.get("id") == PODS_MUTATE:
                response = await self._answer_pod_create(request)
            if response is None:
                response = await QuotreeWebhookServer._answer(fn, request)
            error = _is_error(response)
            return response
        finally:
            report = self.state.on_answer
            if report is not None:
                path = request.path.strip("/")
                report(path if path in WEBHOOKS else "other", time.perf_counter() - started, error)

    async def _answer_pod_create(self, request: aiohttp.web.Request) -> aiohttp.web.Response | None:
        """The pod CREATE webhook without Kopf's machinery (fastpath.py); None: let Kopf answer."""
        try:
            review = json.loads(await request.read())
        except ValueError:
            return None
        if not isinstance(review, dict):
            return None
        answer = fastpath.mutate_pod_review(self.state, review)
        if answer is None:
            return None
        return aiohttp.web.Response(body=json.dumps(answer), content_type="application/json")

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

    def _client_config(self, from_kopf: dict[str, Any]) -> dict[str, Any]:
        ca_bundle = base64.b64encode(Path(str(self.cafile)).read_bytes()).decode()
        if self.settings.service:
            namespace, _, name = self.settings.service.partition("/")
            service = {"namespace": namespace, "name": name, "port": SERVICE_PORT}
            return {"service": service, "caBundle": ca_bundle}
        return {"url": from_kopf["url"], "caBundle": ca_bundle}

    async def _ensure_pki(self, hosts: list[str]) -> tls.Pki:
        """The certificate files; from the shared Secret when there is one (cert_secret)."""
        if self.settings.cert_secret and not self.settings.cert_provided:
            namespace, _, name = self.settings.cert_secret.partition("/")
            return await sync_from_secret(self.api, namespace, name, self.settings.cert_dir, hosts)
        return await asyncio.to_thread(
            tls.ensure_pki, self.settings.cert_dir, hosts, provided=self.settings.cert_provided
        )

    async def _renew_forever(self) -> None:
        hosts = serving_hosts(self.settings)
        while True:
            await asyncio.sleep(RENEW_CHECK_INTERVAL)
            try:
                pki = await self._ensure_pki(hosts)
            except Exception as exc:
                logger.error("webhooks: cannot renew the serving certificate: %s", exc)
                continue
            if pki.renewed:
                logger.info("webhooks: renewed the serving certificate in %s", pki.cert.parent)

    async def __call__(self, fn: Any) -> AsyncIterator[Any]:
        username = await _retry("asking the API who the operator is", self.api.whoami)
        self.state.trusted_users = frozenset({username})
        logger.info(
            "webhooks: the operator is %s; only it may change quotree's pod labels", username
        )
        if self.settings.cert_secret:
            # Before Kopf's listener reads the files: serve the certificate all replicas share.
            await _retry(
                f"reading the shared certificate (Secret {self.settings.cert_secret})",
                self._ensure_pki,
                serving_hosts(self.settings),
            )
        renewer = asyncio.create_task(self._renew_forever())
        try:
            async for from_kopf in super().__call__(fn):
                client_config = self._client_config(dict(from_kopf))
                mutating, validating = build_configurations(
                    client_config,
                    never_gated=self.settings.never_gated,
                    operator_username=username,
                )
                await _retry(
                    "writing the webhook configurations",
                    self.api.apply_webhook_configurations,
                    mutating,
                    validating,
                )
                where = client_config.get("url") or client_config.get("service")
                logger.info("webhooks: serving at %s; configurations quotree.io written", where)
                yield from_kopf
        finally:
            renewer.cancel()


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
