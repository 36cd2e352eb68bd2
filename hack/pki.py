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

Existing files are kept while more than a third of their validity (one year) is left, so
the CA (and every caBundle made from it) survives restarts. `--force` makes everything
anew. The certificates are built by quotree_webhooks/tls.py, as the webhooks' own are.

    python hack/pki.py --pki-dir DIR --run-dir DIR --server https://127.0.0.1:26443 [--force]
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import os
import sys
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

# The certificates are built by the webhooks' TLS module (one builder for both); the
# source root goes first so any Python with `cryptography` and PyYAML runs this script.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "webhooks"))
from quotree_webhooks.tls import (
    PrivateKey,
    build_ca,
    build_cert,
    cert_pem,
    key_pem,
    load_pair,
    needs_renewal,
    write_file,
)

VALIDITY_DAYS = 365
LOCAL_IPS = ["127.0.0.1"]

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

# name -> (common name, organizations) of each client certificate
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

CA = tuple[x509.Certificate, PrivateKey]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _valid(pki: Path, name: str) -> bool:
    pair = load_pair(pki / f"{name}.crt", pki / f"{name}.key")
    return pair is not None and not needs_renewal(pair[0], _now())


def make_ca(pki: Path) -> CA:
    key = _new_key()
    cert = build_ca("quotree-local-ca", key, _now(), VALIDITY_DAYS)
    write_file(pki / "ca.key", key_pem(key), secret=True)
    write_file(pki / "ca.crt", cert_pem(cert))
    return cert, key


def make_leaf(
    pki: Path,
    name: str,
    ca: CA,
    *,
    cn: str,
    orgs: list[str] | None = None,
    hosts: list[str] | None = None,
) -> None:
    """A client certificate, or with `hosts` (DNS names and IPs) a serving one."""
    key = _new_key()
    cert = build_cert(
        *ca,
        key,
        common_name=cn,
        now=_now(),
        days=VALIDITY_DAYS,
        organizations=orgs or (),
        hosts=hosts or (),
    )
    write_file(pki / f"{name}.key", key_pem(key), secret=True)
    write_file(pki / f"{name}.crt", cert_pem(cert))


def make_sa_keypair(pki: Path) -> None:
    key = _new_key()
    write_file(pki / "sa.key", key_pem(key), secret=True)
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    write_file(pki / "sa.pub", pub)


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
    ca: CA
    loaded = load_pair(pki / "ca.crt", pki / "ca.key")
    if force or loaded is None or needs_renewal(loaded[0], _now()):
        ca = make_ca(pki)
        made.append("ca")
        force = True  # everything signed by an old CA is useless now
    else:
        ca = loaded

    if force or not _valid(pki, "apiserver"):
        hosts = [*SERVING_DNS_APISERVER, *SERVING_IP_APISERVER]
        make_leaf(pki, "apiserver", ca, cn="kube-apiserver", hosts=hosts)
        made.append("apiserver")
    if force or not _valid(pki, "webhook"):
        make_leaf(pki, "webhook", ca, cn="quotree-webhook", hosts=["localhost", *LOCAL_IPS])
        made.append("webhook")
    for name, (cn, orgs) in CLIENTS.items():
        if force or not _valid(pki, name):
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
