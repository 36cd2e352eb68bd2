"""The webhook server's own CA and serving certificate, made with `cryptography`.

Kopf can make a self-signed certificate, but through `certbuilder`/`oscrypto`,
which fail against OpenSSL 3; so quotree keeps a small CA of its own in
`cert_dir` (ca.crt/ca.key, valid for years) and a serving certificate signed
by it (tls.crt/tls.key, valid for `SERVING_DAYS`). `ensure_pki` makes what is
missing and renews the serving certificate when less than `RENEW_BEFORE` of
its life is left, when its names no longer match, or when the CA changed.
The API server trusts the CA through the webhook configurations'
`caBundle`, so a renewed serving certificate needs no reconfiguration; a
renewed CA is written to the configurations by `server`.

With `provided=True` (QUOTREE_CERT_PROVIDED) the folder holds a certificate
someone else makes and renews (cert-manager's Secret: `ca.crt`, `tls.crt`,
`tls.key`): it is checked, served as it is and never written to
(docs/deploy.md).

`build_ca` and `build_cert` are the one place certificates are made: the local control
plane's (hack/pki.py) come from them too.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CA_DAYS",
    "RENEW_BEFORE",
    "SERVING_DAYS",
    "Pki",
    "PrivateKey",
    "build_ca",
    "build_cert",
    "cert_pem",
    "ensure_pki",
    "key_pem",
    "load_pair",
    "needs_renewal",
    "write_file",
]

CA_DAYS = 3650
SERVING_DAYS = 90
#: Renew when less than this share of a certificate's validity is left.
RENEW_BEFORE = 1 / 3
#: Certificates start this long before they are made, for clocks a little behind ours.
BACKDATE = dt.timedelta(minutes=5)

#: The keys certificates are made for: EC here, RSA for the local control plane (hack/pki.py).
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of the CA and the serving certificate, and whether this call renewed anything."""

    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path
    renewed: bool = False


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def write_file(path: Path, data: bytes, *, secret: bool = False) -> None:
    """Write atomically, so a server never reads half a certificate; a secret as 0600."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if secret else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def needs_renewal(cert: x509.Certificate, now: dt.datetime) -> bool:
    """Less than `RENEW_BEFORE` of the certificate's validity is left."""
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    return cert.not_valid_after_utc - now < lifetime * RENEW_BEFORE


def load_pair(cert_path: Path, key_path: Path) -> tuple[x509.Certificate, PrivateKey] | None:
    """The certificate and its key, or None when either is missing or unreadable."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        return None
    return cert, key


def _sans(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _key_usage(*, signs_certificates: bool, rsa_key: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        # RSA key exchange encrypts with the certificate's key; EC keys only sign.
        key_encipherment=rsa_key and not signs_certificates,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def build_ca(common_name: str, key: PrivateKey, now: dt.datetime, days: int) -> x509.Certificate:
    """A self-signed CA certificate that signs leaf certificates only (no intermediates)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            _key_usage(signs_certificates=True, rsa_key=isinstance(key, rsa.RSAPrivateKey)),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def build_cert(
    ca: x509.Certificate,
    ca_key: PrivateKey,
    key: PrivateKey,
    *,
    common_name: str,
    now: dt.datetime,
    days: int,
    organizations: Sequence[str] = (),
    hosts: Sequence[str] = (),
) -> x509.Certificate:
    """A leaf certificate signed by `ca`: a serving one for `hosts` (DNS names or IPs), or,
    without hosts, a client one (Kubernetes reads `organizations` as the user's groups)."""
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            _key_usage(signs_certificates=False, rsa_key=isinstance(key, rsa.RSAPrivateKey)),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName(_sans(hosts)), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _covers(cert: x509.Certificate, hosts: list[str]) -> bool:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return False
    return set(_sans(hosts)) <= set(ext.value)


def _check_provided(pki: Pki) -> None:
    """A provided folder must hold a CA certificate and a serving pair signed by it."""
    serving = load_pair(pki.cert, pki.key)
    try:
        ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    except (OSError, ValueError):
        ca = None
    if serving is None or ca is None or not _signed_by(serving[0], ca):
        raise ValueError(
            f"{pki.cert.parent}: a provided webhook certificate needs ca.crt, and tls.crt "
            "and tls.key signed by it (QUOTREE_CERT_PROVIDED is set)"
        )


def ensure_pki(
    cert_dir: Path,
    hosts: Iterable[str],
    *,
    now: dt.datetime | None = None,
    serving_days: int = SERVING_DAYS,
    provided: bool = False,
) -> Pki:
    """Make or renew the CA and serving certificate in `cert_dir` for `hosts` (DNS names or IPs)."""
    wanted = list(dict.fromkeys(hosts))
    if not wanted:
        raise ValueError("the serving certificate needs at least one host name")
    moment = now or _now()
    pki = Pki(
        cert_dir / "ca.crt",
        cert_dir / "ca.key",
        cert_dir / "tls.crt",
        cert_dir / "tls.key",
    )
    if provided:  # someone else's to make and renew; the folder may be read-only
        _check_provided(pki)
        return pki
    cert_dir.mkdir(parents=True, exist_ok=True)
    renewed = False
    ca_pair = load_pair(pki.ca_cert, pki.ca_key)
    if ca_pair is None or needs_renewal(ca_pair[0], moment):
        new_ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_pair = build_ca("quotree-webhook-ca", new_ca_key, moment, CA_DAYS), new_ca_key
        write_file(pki.ca_key, key_pem(new_ca_key), secret=True)
        write_file(pki.ca_cert, cert_pem(ca_pair[0]))
        renewed = True
    ca, ca_key = ca_pair
    serving = load_pair(pki.cert, pki.key)
    if (
        renewed
        or serving is None
        or needs_renewal(serving[0], moment)
        or not _signed_by(serving[0], ca)
        or not _covers(serving[0], wanted)
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = build_cert(
            ca, ca_key, key, common_name=wanted[0], now=moment, days=serving_days, hosts=wanted
        )
        # Kopf polls the files and reloads both after a change; by then both are written.
        write_file(pki.key, key_pem(key), secret=True)
        write_file(pki.cert, cert_pem(cert))
        renewed = True
    return Pki(pki.ca_cert, pki.ca_key, pki.cert, pki.key, renewed=renewed)
