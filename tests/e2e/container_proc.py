"""Run the built image (``make image``) as the Deployment would, for e2e tests.

The local control plane has no kubelet, so a "pod" of the operator is a podman container
on the host network (it reaches the API server on 127.0.0.1) with the Deployment's
security settings (UID 65532, read-only root filesystem, no capabilities, a tmpfs /tmp),
authenticated as the Deployment's ServiceAccount ``quotree-system/quotree`` with a token
from the TokenRequest API (hack/sa-kubeconfig.sh, which also applies manifests/access:
namespace, ServiceAccount, RBAC). Nothing of the admin's credentials goes in.

API:

- ``IMAGE``: the image ``make image`` builds (``QUOTREE_IMAGE`` overrides).
- ``sa_kubeconfig(directory)``: writes and returns a token kubeconfig for the ServiceAccount.
- ``start_container(kubeconfig, env, log_name, ready=READY_LINE, cert_dir=None)``: starts
  one container; returns a ``ContainerOperator`` (same interface as
  ``operator_proc.OperatorProcess``: ``alive``, ``stop()``, ``kill()`` (SIGKILL to the
  container, as a crash would be), ``log_tail()``, ``log_text()``, ``wait_for_log()``).
  ``cert_dir`` (a host folder) is mounted as the webhook certificate folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

from tests.e2e import cluster
from tests.e2e.operator_proc import READY_LINE, OperatorProcess

IMAGE = os.environ.get("QUOTREE_IMAGE", "localhost/quotree:dev")
SERVICE_ACCOUNT = "system:serviceaccount:quotree-system:quotree"
CONTAINER_UID = 65532
KUBECONFIG_IN_CONTAINER = "/etc/quotree/kubeconfig"
CERT_DIR_IN_CONTAINER = "/var/run/quotree/pki"
# What podman needs on this machine (docs/deploy.md, "Containers on this machine"),
# then the Deployment's securityContext.
PODMAN_RUN = [
    "podman",
    "run",
    "--rm",
    "--runtime",
    "runc",
    "--network",
    "host",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
    "--user",
    f"{CONTAINER_UID}:{CONTAINER_UID}",
    "--read-only",
    "--tmpfs",
    "/tmp",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--stop-signal",
    "SIGTERM",
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["KUBECONFIG"] = str(cluster.KUBECONFIG)
    env["PATH"] = f"{cluster.KUBECTL.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def image_exists() -> bool:
    if shutil.which("podman") is None:
        return False
    return subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode == 0


def sa_kubeconfig(directory: Path) -> Path:
    """A kubeconfig with a fresh ServiceAccount token (readable by the container's user)."""
    path = directory / "quotree-sa.kubeconfig"
    subprocess.run(
        [str(cluster.HACK_DIR / "sa-kubeconfig.sh"), str(path), "2h"],
        env=_env(),
        check=True,
        capture_output=True,
        timeout=60,
    )
    path.chmod(0o644)
    return path


_started: list[str] = []  # containers this test session started (the first clears stale ones)


class ContainerOperator(OperatorProcess):
    """One operator container; ``proc`` is the attached ``podman run``."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path, name: str) -> None:
        super().__init__(proc, log_path)
        self.name = name
        self.cert_dir: Path | None = None

    def kill(self) -> None:
        """SIGKILL to the operator in the container: no cleanup, as a crash would be."""
        if self.alive:
            subprocess.run(
                ["podman", "kill", "--signal", "KILL", self.name],
                check=False,
                capture_output=True,
                timeout=30,
            )
        self.proc.wait(timeout=30)

    def stop(self, grace: float = 15) -> None:
        """SIGTERM (what the kubelet sends), then SIGKILL after `grace` seconds."""
        if self.alive:
            subprocess.run(
                ["podman", "stop", "--time", str(int(grace)), self.name],
                check=False,
                capture_output=True,
                timeout=grace + 30,
            )
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def remove_stale_containers() -> None:
    """Remove operator containers a killed test run left (e2e runs hold a machine-wide lock)."""
    found = subprocess.run(
        ["podman", "ps", "-a", "-q", "--filter", "name=^quotree-e2e-"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    ids = found.stdout.split()
    if ids:
        subprocess.run(["podman", "rm", "-f", *ids], capture_output=True, check=False, timeout=60)


def start_container(
    kubeconfig: Path,
    env: dict[str, str] | None = None,
    log_name: str = "operator-container",
    ready: str | None = READY_LINE,
    cert_dir: Path | None = None,
    timeout: float = 90,
) -> ContainerOperator:
    """Start the image as the ServiceAccount; see the module docstring."""
    name = f"quotree-e2e-{log_name}-{uuid.uuid4().hex[:6]}"
    if not _started:
        remove_stale_containers()
        _started.append(name)
    args = [*PODMAN_RUN, "--name", name, "-v", f"{kubeconfig}:{KUBECONFIG_IN_CONTAINER}:ro"]
    full_env = {"KUBECONFIG": KUBECONFIG_IN_CONTAINER, "QUOTREE_IDENTITY": name, **(env or {})}
    if cert_dir is not None:
        cert_dir.mkdir(parents=True, exist_ok=True)
        os.chown(cert_dir, CONTAINER_UID, CONTAINER_UID)
        args += ["-v", f"{cert_dir}:{CERT_DIR_IN_CONTAINER}"]
        full_env["QUOTREE_CERT_DIR"] = CERT_DIR_IN_CONTAINER
    for key, value in full_env.items():
        args += ["-e", f"{key}={value}"]
    cluster.LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = cluster.LOG_DIR / f"{log_name}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*args, IMAGE], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    operator = ContainerOperator(proc, log_path, name)
    operator.cert_dir = cert_dir
    if ready:
        try:
            operator.wait_for_log(ready, timeout)
        except AssertionError:
            operator.kill()
            raise
    return operator
