"""hack/pki.py: the local control plane's certificates, made by the webhooks' builder."""

from __future__ import annotations

import importlib.util
import ipaddress
from pathlib import Path
from types import ModuleType

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "pki.py"


def _pki_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("local_pki", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cert(pki: Path, name: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate((pki / f"{name}.crt").read_bytes())


def test_every_certificate_is_signed_by_the_ca_for_its_use(tmp_path: Path) -> None:
    script = _pki_script()
    pki, run = tmp_path / "pki", tmp_path / "run"
    made = script.ensure(pki, run, "https://127.0.0.1:26443", force=False)
    assert made[0] == "ca"
    assert "sa" in made
    ca = _cert(pki, "ca")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    apiserver = _cert(pki, "apiserver")
    sans = apiserver.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("10.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    for name in ("apiserver", "webhook", *script.CLIENTS):
        cert = _cert(pki, name)
        cert.verify_directly_issued_by(ca)
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        serving = name in ("apiserver", "webhook")
        wanted = ExtendedKeyUsageOID.SERVER_AUTH if serving else ExtendedKeyUsageOID.CLIENT_AUTH
        assert list(usage) == [wanted], name
    admin = _cert(pki, "admin").subject
    assert [a.value for a in admin.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters"
    ]
    assert (run / "kubeconfig").exists()


def test_a_second_run_keeps_what_is_still_valid(tmp_path: Path) -> None:
    script = _pki_script()
    pki, run = tmp_path / "pki", tmp_path / "run"
    script.ensure(pki, run, "https://127.0.0.1:26443", force=False)
    before = {p.name: p.read_bytes() for p in pki.iterdir()}
    assert script.ensure(pki, run, "https://127.0.0.1:26443", force=False) == []
    assert {p.name: p.read_bytes() for p in pki.iterdir()} == before
