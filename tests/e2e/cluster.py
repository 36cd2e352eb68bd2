"""The local control plane, seen from Python (tests, `make run` helpers).

The control plane is real: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok (fake nodes) run as processes on 127.0.0.1, started by ``hack/cluster.sh`` (see
docs/control-plane.md). Nothing here mocks the API server.

API (keep it small, other tests import it):

- paths: ``KUBECONFIG``, ``CA_CERT``, ``CA_KEY``, ``WEBHOOK_CERT``, ``WEBHOOK_KEY``, ``LOG_DIR``,
  ``KUBECTL`` (our own kubectl of ``KUBE_VERSION``), ``RUN_DIR``, ``PKI_DIR``;
- settings: ``KUBE_VERSION``, ``APISERVER_URL``, ``PORTS``, ``NODES`` and ``NODE_*`` (capacity of
  each fake node);
- ``ensure_cluster()``: start the control plane (with empty etcd data) unless it is running;
  True if it started it;
- ``is_running()``, ``cluster_up()``, ``cluster_down()``;
- ``kubectl(*args, input=None, check=True)``: run our kubectl against the cluster;
- ``kubectl_json(*args)``: same, with ``-o json``, parsed;
- ``ca_bundle()``: the CA as base64 for a webhook ``caBundle``;
- ``wait_until(predicate, timeout, what)``: poll until the predicate returns a truthy value;
- ``log_tails(lines)``: the last lines of every component's log, for failure reports;
- ``kill_component(name)``: SIGKILL one component (as a crash would), returning its command
  line; ``start_component(name, argv)`` starts it again the way hack/cluster.sh does (own
  session, same log, pid file), so ``cluster_down()`` stops it as usual.

Every path and port follows the same environment overrides as hack/lib.sh
(``QUOTREE_CACHE``, ``QUOTREE_RUN``, ``QUOTREE_APISERVER_PORT``, ``QUOTREE_NODES``, ...).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parents[2]
HACK_DIR = REPO_ROOT / "hack"
CLUSTER_SH = HACK_DIR / "cluster.sh"


def _read_versions() -> dict[str, str]:
    versions: dict[str, str] = {}
    for raw in (HACK_DIR / "versions.env").read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip()
    return versions


_VERSIONS = _read_versions()
KUBE_VERSION = _VERSIONS["KUBE_VERSION"]
ETCD_VERSION = _VERSIONS["ETCD_VERSION"]
KWOK_VERSION = _VERSIONS["KWOK_VERSION"]
HELM_VERSION = _VERSIONS["HELM_VERSION"]

CACHE_DIR = Path(os.environ.get("QUOTREE_CACHE", Path.home() / ".cache" / "quotree"))
RUN_DIR = Path(os.environ.get("QUOTREE_RUN", CACHE_DIR / "run"))
PKI_DIR = RUN_DIR / "pki"
LOG_DIR = RUN_DIR / "logs"
PID_DIR = RUN_DIR / "pids"
KUBECONFIG = RUN_DIR / "kubeconfig"
CA_CERT = PKI_DIR / "ca.crt"
CA_KEY = PKI_DIR / "ca.key"
WEBHOOK_CERT = PKI_DIR / "webhook.crt"  # serving cert for 127.0.0.1 / localhost
WEBHOOK_KEY = PKI_DIR / "webhook.key"
KUBECTL = CACHE_DIR / f"kubectl-{KUBE_VERSION}" / "kubectl"
HELM = CACHE_DIR / f"helm-{HELM_VERSION}" / "helm"  # built with the control plane

PORTS: dict[str, int] = {
    "etcd": int(os.environ.get("QUOTREE_ETCD_PORT", "23790")),
    "etcd-peer": int(os.environ.get("QUOTREE_ETCD_PEER_PORT", "23800")),
    "kube-apiserver": int(os.environ.get("QUOTREE_APISERVER_PORT", "26443")),
    "kube-controller-manager": int(os.environ.get("QUOTREE_KCM_PORT", "26257")),
    "kube-scheduler": int(os.environ.get("QUOTREE_SCHEDULER_PORT", "26259")),
    "kwok": int(os.environ.get("QUOTREE_KWOK_PORT", "26080")),
}
APISERVER_URL = f"https://127.0.0.1:{PORTS['kube-apiserver']}"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

NODES = int(os.environ.get("QUOTREE_NODES", "4"))
NODE_CPU = os.environ.get("QUOTREE_NODE_CPU", "32")
NODE_MEMORY = os.environ.get("QUOTREE_NODE_MEMORY", "128Gi")
NODE_GPU = os.environ.get("QUOTREE_NODE_GPU", "8")
NODE_PODS = os.environ.get("QUOTREE_NODE_PODS", "110")
NODE_LABEL = "quotree.dev/fake-node=true"  # every fake node has this label

# A fresh machine builds the binaries first: allow for it (CI has 90 minutes).
BUILD_AND_START_TIMEOUT = 75 * 60

T = TypeVar("T")


class KubectlError(subprocess.CalledProcessError):
    """A failed kubectl run; str() includes what kubectl printed."""

    def __str__(self) -> str:
        return (
            f"{super().__str__()}\n--- stdout ---\n{self.stdout or ''}"
            f"\n--- stderr ---\n{self.stderr or ''}"
        )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["KUBECONFIG"] = str(KUBECONFIG)
    env["PATH"] = f"{KUBECTL.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def kubectl(
    *args: str,
    input: str | None = None,  # noqa: A002  (the name subprocess.run uses)
    check: bool = True,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run our kubectl (``KUBECTL``) with ``KUBECONFIG``; return the completed process.

    ``input`` is passed on stdin (e.g. ``kubectl("apply", "-f", "-", input=yaml_text)``).
    With ``check=True`` a non-zero exit raises :class:`KubectlError` showing stdout/stderr.
    """
    proc = subprocess.run(
        [str(KUBECTL), *args],
        input=input,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise KubectlError(proc.returncode, proc.args, proc.stdout, proc.stderr)
    return proc


def kubectl_json(*args: str) -> Any:
    """``kubectl <args> -o json``, parsed."""
    return json.loads(kubectl(*args, "-o", "json").stdout)


def ca_bundle() -> str:
    """The cluster CA, base64-encoded, as a webhook ``clientConfig.caBundle`` wants it."""
    return base64.b64encode(CA_CERT.read_bytes()).decode()


def wait_until(
    predicate: Callable[[], T | None], timeout: float, what: str, interval: float = 0.5
) -> T:
    """Call ``predicate`` until it returns something truthy and return that.

    Raises AssertionError naming ``what`` (and the last exception, if any) after ``timeout``s.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except (subprocess.SubprocessError, OSError, ValueError, KeyError) as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what}{detail}")
        time.sleep(interval)


def _cluster_sh(
    *command: str, capture: bool = False, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(CLUSTER_SH), *command],
        capture_output=capture,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO_ROOT,
    )


def is_running() -> bool:
    """True if every component runs (by its pid file) and the apiserver's /readyz is ok."""
    return _cluster_sh("status", capture=True, timeout=60).returncode == 0


def cluster_up(fresh: bool = False) -> None:
    """``hack/cluster.sh up``: build if needed, start, wait for readiness (no-op if running).

    ``fresh=True``: if it has to start the control plane, it starts with empty etcd data.
    """
    args = ("up", "--fresh") if fresh else ("up",)
    proc = _cluster_sh(*args, timeout=BUILD_AND_START_TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"hack/cluster.sh up failed (exit {proc.returncode})\n{log_tails()}")


def cluster_down() -> None:
    """``hack/cluster.sh down``: stop every process cluster_up started."""
    proc = _cluster_sh("down", timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"hack/cluster.sh down failed (exit {proc.returncode})")


def ensure_cluster(fresh: bool = True) -> bool:
    """Start the control plane unless it is already running; return True if it started it.

    A running control plane is reused as it is. One that has to be started begins with empty
    etcd data (``fresh=True``), so leftovers of earlier sessions cannot leak into this one;
    certificates are kept.
    """
    if is_running():
        return False
    cluster_up(fresh=fresh)
    return True


def log_tails(lines: int = 40, width: int = 400) -> str:
    """The last ``lines`` lines of each component's log file, one titled block each.

    Lines longer than ``width`` characters (kwok logs JSON) are cut.
    """
    blocks = []
    for name in COMPONENTS:
        path = LOG_DIR / f"{name}.log"
        if not path.exists():
            blocks.append(f"===== {path}: (no log) =====")
            continue
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            tail = f.read().decode(errors="replace").splitlines()[-lines:]
        tail = [line if len(line) <= width else line[:width] + " …" for line in tail]
        blocks.append(f"===== {path} (last {len(tail)} lines) =====\n" + "\n".join(tail))
    return "\n".join(blocks)


def kill_component(name: str) -> list[str]:
    """SIGKILL the running component `name` (from its pid file); returns its command line."""
    pid = int((PID_DIR / f"{name}.pid").read_text())
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        try:  # not our child (hack/cluster.sh started it): init reaps it
            if Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z"):
                break
        except OSError:
            break
        time.sleep(0.05)
    return [arg.decode() for arg in argv]


def start_component(name: str, argv: list[str]) -> int:
    """Start a component again with `argv` (see `kill_component`); returns its pid."""
    with (LOG_DIR / f"{name}.log").open("ab") as log:
        proc = subprocess.Popen(  # its own session: it outlives the test, as cluster.sh's do
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (PID_DIR / f"{name}.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def api_ready() -> bool:
    """The API server answers /readyz (so etcd answers it too)."""
    return kubectl("get", "--raw", "/readyz", check=False, timeout=10).returncode == 0
