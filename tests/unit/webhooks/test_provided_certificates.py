"""A certificate provided by someone else (cert-manager; QUOTREE_CERT_PROVIDED) is left alone."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from quotree_operator.config import OperatorConfig
from quotree_webhooks import tls

HOSTS = ["quotree-webhooks.quotree-system.svc", "127.0.0.1"]


def test_provided_certificate_is_served_as_it_is(tmp_path: Path) -> None:
    # What cert-manager's Secret holds: ca.crt, tls.crt, tls.key; no CA key.
    made = tls.ensure_pki(tmp_path, ["other.example"])
    made.ca_key.unlink()
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    # Names that do not match and an expiry that is near would both renew our own.
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=tls.SERVING_DAYS - 1)
    pki = tls.ensure_pki(tmp_path, HOSTS, now=later, provided=True)
    assert not pki.renewed
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files


def test_provided_pair_not_signed_by_the_ca_is_one_clear_error(tmp_path: Path) -> None:
    mine = tls.ensure_pki(tmp_path / "a", HOSTS)
    other = tls.ensure_pki(tmp_path / "b", HOSTS)
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "ca.crt").write_bytes(other.ca_cert.read_bytes())
    (folder / "tls.crt").write_bytes(mine.cert.read_bytes())
    (folder / "tls.key").write_bytes(mine.key.read_bytes())
    with pytest.raises(ValueError, match=r"mixed: a provided webhook certificate needs ca\.crt"):
        tls.ensure_pki(folder, HOSTS, provided=True)
    assert not (folder / "ca.key").exists()


def test_provided_is_read_from_the_environment() -> None:
    assert OperatorConfig.from_env({"QUOTREE_CERT_PROVIDED": "1"}).cert_provided
    assert not OperatorConfig.from_env({}).cert_provided
    assert OperatorConfig.from_env({"QUOTREE_CERT_SECRET": "s"}).cert_secret == "s"


def test_provided_rsa_certificate_is_accepted(tmp_path: Path) -> None:
    # cert-manager's Certificates have RSA keys unless told otherwise.
    now = dt.datetime.now(dt.UTC)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = tls.build_ca("cert-manager-ca", ca_key, now, 365)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = tls.build_cert(ca, ca_key, key, common_name=HOSTS[0], now=now, days=90, hosts=HOSTS)
    (tmp_path / "ca.crt").write_bytes(tls.cert_pem(ca))
    (tmp_path / "tls.crt").write_bytes(tls.cert_pem(cert))
    (tmp_path / "tls.key").write_bytes(tls.key_pem(key))
    pki = tls.ensure_pki(tmp_path, HOSTS, provided=True)
    assert not pki.renewed
    assert pki.cert.read_bytes() == tls.cert_pem(cert)
