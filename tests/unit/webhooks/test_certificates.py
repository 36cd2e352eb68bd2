"""The webhook server's certificates (quotree_webhooks/tls.py, server.serving_hosts):
made once, kept while valid, renewed when a third of their life is left, when the names
change, or when the CA changed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography import x509

from quotree_webhooks import tls
from quotree_webhooks.server import serving_hosts
from quotree_webhooks.settings import WebhookSettings

NOW = dt.datetime(2026, 11, 22, 7, 0, tzinfo=dt.UTC)
HOSTS = ["127.0.0.1", "localhost"]


def names(path: Path) -> set[str]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(n.value) for n in sans}


def test_made_once_then_kept_while_valid(tmp_path: Path) -> None:
    first = tls.ensure_pki(tmp_path, HOSTS, now=NOW)
    assert first.renewed
    cert, ca = first.cert.read_bytes(), first.ca_cert.read_bytes()
    again = tls.ensure_pki(tmp_path, HOSTS, now=NOW + dt.timedelta(days=1))
    assert not again.renewed
    assert (again.cert.read_bytes(), again.ca_cert.read_bytes()) == (cert, ca)
    assert names(again.cert) == set(HOSTS)
    assert oct(first.key.stat().st_mode & 0o777) == "0o600"


def test_serving_certificate_renewed_when_a_third_of_its_life_is_left(tmp_path: Path) -> None:
    tls.ensure_pki(tmp_path, HOSTS, now=NOW)
    ca = (tmp_path / "ca.crt").read_bytes()
    cert = (tmp_path / "tls.crt").read_bytes()
    # 90 days of validity (plus 5 minutes back-dated): renewal starts 30 days before the end
    early = tls.ensure_pki(tmp_path, HOSTS, now=NOW + dt.timedelta(days=59))
    assert not early.renewed
    due = tls.ensure_pki(tmp_path, HOSTS, now=NOW + dt.timedelta(days=61))
    assert due.renewed
    assert due.cert.read_bytes() != cert
    assert due.ca_cert.read_bytes() == ca  # the CA (10 years) stays: no new caBundle needed
    renewed = x509.load_pem_x509_certificate(due.cert.read_bytes())
    issuer = x509.load_pem_x509_certificate(ca)
    renewed.verify_directly_issued_by(issuer)
    assert renewed.not_valid_after_utc > NOW + dt.timedelta(days=150)


def test_renewed_when_the_names_change(tmp_path: Path) -> None:
    tls.ensure_pki(tmp_path, HOSTS, now=NOW)
    moved = tls.ensure_pki(tmp_path, ["quotree-webhooks.quotree-system.svc"], now=NOW)
    assert moved.renewed
    assert names(moved.cert) == {"quotree-webhooks.quotree-system.svc"}


def test_a_new_ca_reissues_the_serving_certificate(tmp_path: Path) -> None:
    tls.ensure_pki(tmp_path, HOSTS, now=NOW)
    (tmp_path / "ca.key").unlink()  # lost: a new CA must be made
    pki = tls.ensure_pki(tmp_path, HOSTS, now=NOW)
    assert pki.renewed
    cert = x509.load_pem_x509_certificate(pki.cert.read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()))


def test_serving_hosts_for_a_service_and_for_a_local_listener(tmp_path: Path) -> None:
    service = WebhookSettings(
        never_gated=frozenset(),
        host="0.0.0.0",
        port=9443,
        cert_dir=tmp_path,
        service="quotree-system/quotree-webhooks",
    )
    assert serving_hosts(service) == [
        "quotree-webhooks.quotree-system.svc",
        "quotree-webhooks.quotree-system.svc.cluster.local",
        "quotree-webhooks.quotree-system",
        "quotree-webhooks",
    ]
    local = WebhookSettings(never_gated=frozenset(), host="0.0.0.0", port=9443, cert_dir=tmp_path)
    assert serving_hosts(local) == ["127.0.0.1", "127.0.0.1", "localhost"]
