"""One webhook CA and serving certificate for every replica, kept in a Secret.

The API server trusts one `caBundle` per webhook configuration and calls whichever
replica the Service picks, so all replicas must serve a certificate signed by that CA.
With `QUOTREE_CERT_SECRET` set, the Secret of that name in the operator's namespace holds
`ca.crt`, `ca.key`, `tls.crt` and `tls.key`: a replica copies it into its certificate
folder, lets `tls.ensure_pki` check it (names, expiry) and, only when that made or renewed
something, writes the result back with the Secret's resourceVersion. Two replicas starting
together both find no Secret; the second write is refused (conflict) and that replica
takes the first one's. Without `QUOTREE_CERT_SECRET` (local runs) nothing here is used.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
from pathlib import Path
from typing import Any

from quotree_webhooks import tls
from quotree_webhooks.settings import WebhookApi

__all__ = ["FILES", "sync_from_secret"]

logger = logging.getLogger("quotree.webhooks")

FILES = ("ca.crt", "ca.key", "tls.crt", "tls.key")
_ATTEMPTS = 5


def _write_files(cert_dir: Path, data: dict[str, str]) -> None:
    """Copy the Secret's files into `cert_dir`, each atomically, those that differ only."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    # Keys first: Kopf reloads when a certificate changes, and must find its new key.
    for name in ("ca.key", "tls.key", "ca.crt", "tls.crt"):
        content = base64.b64decode(data[name])
        path = cert_dir / name
        if path.exists() and path.read_bytes() == content:
            continue
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_bytes(content)
        tmp.chmod(0o600 if name.endswith(".key") else 0o644)
        tmp.replace(path)


def _body(namespace: str, name: str, cert_dir: Path, version: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/name": "quotree"},
    }
    if version:
        metadata["resourceVersion"] = version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "data": {f: base64.b64encode((cert_dir / f).read_bytes()).decode() for f in FILES},
    }


async def sync_from_secret(
    api: WebhookApi,
    namespace: str,
    name: str,
    cert_dir: Path,
    hosts: list[str],
    *,
    now: dt.datetime | None = None,
) -> tls.Pki:
    """Make `cert_dir` hold the shared certificate, creating or renewing the Secret if due."""
    for _ in range(_ATTEMPTS):
        secret = await api.read_secret(namespace, name)
        data: dict[str, str] = (secret or {}).get("data") or {}
        complete = all(f in data for f in FILES)
        if complete:
            await asyncio.to_thread(_write_files, cert_dir, data)
        pki = await asyncio.to_thread(tls.ensure_pki, cert_dir, hosts, now=now)
        if complete and not pki.renewed:
            return pki
        version = (secret or {}).get("metadata", {}).get("resourceVersion")
        body = _body(namespace, name, cert_dir, version)
        if not await api.write_secret(namespace, body, create=secret is None):
            continue  # another replica wrote first: take theirs
        logger.info(
            "webhooks: %s the shared certificate in Secret %s/%s",
            "made" if secret is None else "renewed",
            namespace,
            name,
        )
        return pki
    raise RuntimeError(f"Secret {namespace}/{name}: kept changing under {_ATTEMPTS} attempts")
