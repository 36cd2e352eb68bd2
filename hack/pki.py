"""Certificates and kubeconfigs of the local control plane, made with `cryptography`.

Writes into PKI_DIR (default ~/.cache/quotree/run/pki):

- ca.crt / ca.key              the cluster CA (signs everything below)
- apiserver.crt / .key         kube-apiserver serving cert (127.0.0.1, localhost, kubernetes.*)
- admin.crt / .key             client cert CN=quotree-admin, O=system:masters
- controller-manager.crt/.key  client cert CN=system:kube-controller-manager
- scheduler.crt / .key         client cert CN=system:kube-scheduler
- kwok.crt / .key              client cert CN=kwok, O=system:masters
- front-proxy-client.crt/.key  the apiserver's proxy client cert (requestheader authentication)
- sa.key / sa.pub              service-account token signing keypair
- webhook.crt / .key           serving cert for webhooks on 127.0.0.1 / localhost

and kubeconfigs (certificates embedded) next to it: RUN_DIR/kubeconfig (admin) and
RUN_DIR/{controller-manager,scheduler,kwok}.kubeconfig.

Existing, still valid files are kept, so the CA (and every caBundle made from it)
survives restarts. `--force` makes everything anew.

    python hack/pki.py --pki-dir DIR --run-dir DIR --server https://127.0.0.1:26443 [--force]
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import ipaddress
import os
import sys
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=7)
LOCAL_IPS = ["127.0.0.1"]

# name -> (common name, organizations, server SANs (DNS, IP) or None for a client cert)
SERVING_DNS_APISERVER = [
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
]
# 10.0.0.1 is the `kubernetes` Service's ClusterIP (first address of the service range);
# it only appears in the certificate, nothing is ever sent there.
SERVING_IP_APISERVER = [*LOCAL_IPS, "10.0.0.1"]

CLIENTS: dict[str, tuple[str, list[str]]] = {
    "admin": ("quotree-admin", ["system:masters"]),
    "controller-manager": ("system:kube-controller-manager", []),
    "scheduler": ("system:kube-scheduler", []),
    "kwok": ("kwok", ["system:masters"]),
    # The apiserver's client cert towards aggregated API servers / webhooks-by-proxy;
    # also what --requestheader-allowed-names names.
    "front-proxy-client": ("front-proxy-client", []),
}
KUBECONFIGS = {
    "admin": "kubeconfig",
    "controller-manager": "controller-manager.kubeconfig",
    "scheduler": "scheduler.kubeconfig",
    "kwok": "kwok.kubeconfig",
}


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(path: Path, key: rsa.RSAPrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    path.write_bytes(data)
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _load_key(path: Path) -> rsa.RSAPrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


def _valid(cert_path: Path, key_path: Path) -> bool:
    if not (cert_path.exists() and key_path.exists()):
        return False
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    return cert.not_valid_after_utc - _now() > RENEW_BEFORE


def _name(cn: str, orgs: list[str] | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs or []]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def make_ca(pki: Path) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    key = _new_key()
    name = _name("quotree-local-ca")
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_key(pki / "ca.key", key)
    _write_cert(pki / "ca.crt", cert)
    return cert, key


def make_leaf(
    pki: Path,
    name: str,
    ca: tuple[x509.Certificate, rsa.RSAPrivateKey],
    *,
    cn: str,
    orgs: list[str] | None = None,
    dns: list[str] | None = None,
    ips: list[str] | None = None,
) -> None:
    ca_cert, ca_key = ca
    key = _new_key()
    now = _now()
    server = dns is not None or ips is not None
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, orgs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns or []]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips or []]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_key(pki / f"{name}.key", key)
    _write_cert(pki / f"{name}.crt", cert)


def make_sa_keypair(pki: Path) -> None:
    key = _new_key()
    _write_key(pki / "sa.key", key)
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (pki / "sa.pub").write_bytes(pub)


def write_kubeconfig(path: Path, pki: Path, client: str, server: str) -> None:
    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    user = f"quotree-{client}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "quotree-local",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": b64(pki / "ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(pki / f"{client}.crt"),
                    "client-key-data": b64(pki / f"{client}.key"),
                },
            }
        ],
        "contexts": [
            {"name": "quotree-local", "context": {"cluster": "quotree-local", "user": user}}
        ],
        "current-context": "quotree-local",
        "preferences": {},
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.chmod(0o600)
    os.replace(tmp, path)


def ensure(pki: Path, run: Path, server: str, force: bool) -> list[str]:
    """Create whatever is missing or about to expire; return the names made."""
    pki.mkdir(parents=True, exist_ok=True)
    made: list[str] = []
    if force or not _valid(pki / "ca.crt", pki / "ca.key"):
        ca = make_ca(pki)
        made.append("ca")
        force = True  # everything signed by an old CA is useless now
    else:
        ca = (
            x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes()),
            _load_key(pki / "ca.key"),
        )

    if force or not _valid(pki / "apiserver.crt", pki / "apiserver.key"):
        make_leaf(
            pki,
            "apiserver",
            ca,
            cn="kube-apiserver",
            dns=SERVING_DNS_APISERVER,
            ips=SERVING_IP_APISERVER,
        )
        made.append("apiserver")
    if force or not _valid(pki / "webhook.crt", pki / "webhook.key"):
        make_leaf(pki, "webhook", ca, cn="quotree-webhook", dns=["localhost"], ips=LOCAL_IPS)
        made.append("webhook")
    for name, (cn, orgs) in CLIENTS.items():
        if force or not _valid(pki / f"{name}.crt", pki / f"{name}.key"):
            make_leaf(pki, name, ca, cn=cn, orgs=orgs)
            made.append(name)
    if force or not ((pki / "sa.key").exists() and (pki / "sa.pub").exists()):
        make_sa_keypair(pki)
        made.append("sa")
    run.mkdir(parents=True, exist_ok=True)
    for client, filename in KUBECONFIGS.items():
        write_kubeconfig(run / filename, pki, client, server)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pki-dir", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--server", required=True, help="apiserver URL for the kubeconfigs")
    parser.add_argument("--force", action="store_true", help="make everything anew")
    args = parser.parse_args(argv)
    made = ensure(args.pki_dir, args.run_dir, args.server, args.force)
    if made:
        print(f"[quotree-cluster] pki: made {', '.join(made)} in {args.pki_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
