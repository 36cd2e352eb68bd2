"""Start-up failures are one clear line, and the health endpoint is closed until start-up works.

The real operator process (`kopf run --liveness=... -m quotree_main`) is started with
credentials that cannot work: no kubeconfig, an API server that does not answer, a token
the API server refuses, a ServiceAccount without RBAC; and without the CRDs (deleted for
that test, installed again after it). Each time the log shows one line
that says what is missing and how to fix it (no traceback), the process keeps trying, and
the health endpoint the Deployment's probes use does not answer. Giving the
ServiceAccount its RBAC, or installing the CRDs, heals: start-up succeeds and the endpoint
answers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.doc_outputs import check_live
from tests.e2e import cluster as cluster_mod

KOPF = Path(sys.executable).with_name("kopf")
PROBE_PORT = 18471
FAILED = re.compile(r"Activity 'start' failed temporarily: (quotree cannot start: .*)$", re.M)


class Started:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def probe(self) -> int | None:
        """The health endpoint's HTTP status, or None when nothing answers."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{PROBE_PORT}/healthz", timeout=2
            ) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return None


@pytest.fixture
def start(cluster: ModuleType, tmp_path: Path) -> Iterator[object]:
    started: list[Started] = []

    def run(kubeconfig: str, name: str) -> Started:
        env = dict(os.environ)
        env.update(
            {
                "KUBECONFIG": kubeconfig,
                "QUOTREE_WEBHOOKS": "0",
                "QUOTREE_IDENTITY": f"e2e-startup-{name}",
            }
        )
        log = cluster.LOG_DIR / f"operator-startup-{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    str(KOPF),
                    "run",
                    "--all-namespaces",
                    "--standalone",
                    f"--liveness=http://127.0.0.1:{PROBE_PORT}/healthz",
                    "-m",
                    "quotree_main",
                ],
                cwd=tmp_path,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        started.append(Started(proc, log))
        return started[-1]

    yield run
    for one in started:
        if one.proc.poll() is None:
            one.proc.terminate()
            try:
                one.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                one.proc.kill()
                one.proc.wait()


def _kubeconfig(tmp_path: Path, name: str, *, server: str | None = None, token: str) -> str:
    admin = yaml.safe_load(cluster_mod.KUBECONFIG.read_text())
    cluster = dict(admin["clusters"][0]["cluster"])
    if server:
        cluster["server"] = server
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / f"{name}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _one_clear_line(started: Started, expected: str) -> None:
    def seen() -> bool:
        assert started.proc.poll() is None, "the operator exited\n" + started.text()
        return bool(FAILED.search(started.text()))

    cluster_mod.wait_until(seen, 30, "the start-up failure line")
    text = started.text()
    lines = FAILED.findall(text)
    assert expected in lines[0], lines[0]
    assert "Traceback" not in text, text
    assert started.probe() is None, "the health endpoint answers although start-up failed"


def test_no_kubeconfig(start: object) -> None:
    started = start("/nonexistent/kubeconfig", "nokubeconfig")  # type: ignore[operator]
    _one_clear_line(started, "no usable Kubernetes credentials (kubeconfig /nonexistent/")


def test_api_server_does_not_answer(start: object, tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, "unreachable", server="https://127.0.0.1:1", token="x")
    started = start(path, "unreachable")  # type: ignore[operator]
    _one_clear_line(started, "the API server does not answer")


def test_refused_token(start: object, tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, "badtoken", token="not-a-token")
    started = start(path, "badtoken")  # type: ignore[operator]
    _one_clear_line(started, "the API server refused the credentials")


def test_rbac_denied_then_granted_heals(
    start: object, tmp_path: Path, namespace: str, cluster: ModuleType
) -> None:
    root = cluster.REPO_ROOT
    cluster.kubectl("apply", "-k", str(root / "manifests" / "access"))
    cluster.kubectl("-n", namespace, "create", "serviceaccount", "bare")
    token = cluster.kubectl("-n", namespace, "create", "token", "bare").stdout.strip()
    started = start(_kubeconfig(tmp_path, "norbac", token=token), "norbac")  # type: ignore[operator]
    _one_clear_line(started, "RBAC denies a call it needs")
    assert "kubectl apply -k manifests/access" in FAILED.findall(started.text())[0]
    # Give it the operator's permissions: the next attempt starts, the probe answers.
    subject = f"--serviceaccount={namespace}:bare"
    binding = f"e2e-startup-{namespace}"
    try:
        cluster.kubectl("create", "clusterrolebinding", binding, "--clusterrole=quotree", subject)
        cluster.kubectl(
            "-n", "quotree-system", "create", "rolebinding", binding, "--role=quotree", subject
        )
        cluster.wait_until(lambda: started.probe() == 200, 60, "the health endpoint")
        assert "Activity 'start' succeeded" in started.text()
    finally:
        cluster.kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found", check=False)
        cluster.kubectl(
            "-n",
            "quotree-system",
            "delete",
            "rolebinding",
            binding,
            "--ignore-not-found",
            check=False,
        )


def test_missing_crds_then_installed_heals(start: object, cluster: ModuleType) -> None:
    crds = str(cluster.REPO_ROOT / "crds" / "quotree.yaml")
    cluster.kubectl("delete", "-f", crds, "--wait=true", timeout=120)
    try:
        started = start(str(cluster.KUBECONFIG), "nocrds")  # type: ignore[operator]
        _one_clear_line(started, "the quotree CRDs are not installed")
        line = FAILED.findall(started.text())[0]
        assert "kubectl apply -f crds/" in line
        # docs/operator.md shows this line as the example of a start-up failure. The kinds
        # are listed concurrently, so which one's 404 is quoted varies.
        check_live(
            "kopf run --all-namespaces --standalone -m quotree_main",
            f"Activity 'start' failed temporarily: {line}",
            lambda text: re.sub(r"\(list \w+: 404", "(list <kind>: 404", text),
        )
    finally:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", crds)
        cluster.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/cohorts.quotree.io",
            "crd/elasticquotas.quotree.io",
            "crd/resourceflavors.quotree.io",
            timeout=90,
        )
    cluster.wait_until(lambda: started.probe() == 200, 60, "the health endpoint")
