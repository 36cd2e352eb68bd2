"""Replicas share one webhook certificate through a Secret (cert_secret.sync_from_secret)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from quotree_webhooks import cert_secret, tls
from tests.unit.operator.fake_kube import FakeKube

HOSTS = ["quotree-webhooks.quotree-system.svc"]
NS, NAME = "quotree-system", "quotree-webhook-tls"


class SecretStore(FakeKube):
    """The API, for one Secret; `between` is called between a replica's read and its write
    (another replica acting then)."""

    def __init__(self) -> None:
        super().__init__()
        self.between: Any = None

    @property
    def writes(self) -> int:
        return self.secret_writes

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        assert (namespace, name) == (NS, NAME)
        found = await super().read_secret(namespace, name)
        if self.between is not None:
            between, self.between = self.between, None
            await between()
        return found

    async def write_secret(self, namespace: str, body: Mapping[str, Any], create: bool) -> bool:
        assert namespace == NS
        return await super().write_secret(namespace, body, create)


def _sync(store: SecretStore, folder: Path) -> tls.Pki:
    return asyncio.run(cert_secret.sync_from_secret(store, NS, NAME, folder, HOSTS))


def test_first_replica_makes_the_secret_the_second_serves_the_same(tmp_path: Path) -> None:
    store = SecretStore()
    a = _sync(store, tmp_path / "a")
    b = _sync(store, tmp_path / "b")
    assert store.writes == 1
    for name in ("ca.crt", "tls.crt", "tls.key"):
        assert (a.cert.parent / name).read_bytes() == (b.cert.parent / name).read_bytes()


def test_two_replicas_starting_together_end_with_one_certificate(tmp_path: Path) -> None:
    store = SecretStore()

    async def other_replica_first() -> None:
        await cert_secret.sync_from_secret(store, NS, NAME, tmp_path / "b", HOSTS)

    # Replica a reads "no Secret"; before it writes, replica b makes and writes one.
    store.between = other_replica_first
    a = _sync(store, tmp_path / "a")
    assert store.writes == 1
    assert a.ca_cert.read_bytes() == (tmp_path / "b" / "ca.crt").read_bytes()
    assert a.cert.read_bytes() == (tmp_path / "b" / "tls.crt").read_bytes()


def test_a_renewal_is_written_back_and_reaches_the_other_replica(tmp_path: Path) -> None:
    store = SecretStore()
    _sync(store, tmp_path / "a")
    _sync(store, tmp_path / "b")
    old = (tmp_path / "b" / "tls.crt").read_bytes()
    # Replica a's hourly check when the certificate is due: renewed, written back.
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=tls.SERVING_DAYS - 1)
    asyncio.run(cert_secret.sync_from_secret(store, NS, NAME, tmp_path / "a", HOSTS, now=later))
    assert store.writes == 2
    assert (tmp_path / "a" / "tls.crt").read_bytes() != old
    # Replica b's next check takes it from the Secret (same CA: no caBundle change).
    _sync(store, tmp_path / "b")
    assert (tmp_path / "b" / "tls.crt").read_bytes() == (tmp_path / "a" / "tls.crt").read_bytes()
    assert (tmp_path / "b" / "ca.crt").read_bytes() == (tmp_path / "a" / "ca.crt").read_bytes()
