"""A certificate provided by someone else (cert-manager; QUOTREE_CERT_PROVIDED) is left alone."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

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
