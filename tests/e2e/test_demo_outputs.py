"""`make run` and the cluster commands the docs show, run for real and compared with the docs.

`make run` runs as a newcomer runs it (KUBECONFIG unset: `hack/cluster.sh up` finds the
session's control plane up; not inside another make, even under `make test`), with webhook
and metrics ports and a certificate folder of its own. Once the demo has settled, `kubectl
quotree tree`, `kubectl quotree what-if examples/what-if/platform-borrows.yaml` and
`kubectl apply -f examples/what-if/nightly-too-big.yaml` run through the real kubectl
(which finds the plugin in .venv/bin on PATH); then Ctrl-C (SIGINT to make's process
group) ends `make run`, and its whole transcript is compared with docs/operator.md.
tests/doc_outputs.py finds the blocks by their markers; `QUOTREE_UPDATE_DOCS=1` rewrites
them instead of comparing.

What differs from run to run is normalised:
- written to the docs as the defaults: this session's run directory and cache
  (`~/.cache/quotree/run`, `~/.cache/quotree`), the API server's URL (port 26443) and the
  tree page's port (8000);
- on both sides when comparing: a Deployment's pod name (`builders-7c8f576987-4x7l8` reads
  `builders-<pod>`; the hash's length varies, so the spaces after it are collapsed too)
  and kubectl's AGE column (`3s`, `2m5s`).

The demo's tables list every Cohort and ElasticQuota of the cluster and its capacity
less the pods no quota manages: the module first waits until other modules' quota objects
and pods are gone, and deletes the namespace quotree-system, which a newcomer's cluster
does not have either (make run creates it).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.doc_outputs import check_live
from tests.e2e import cluster as cluster_mod
from tests.e2e.kube_helpers import without_in_use

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
DEMO_NAMESPACES = ("demo-vision", "demo-nlp", "demo-ci")
DEMO_COHORTS = ("company", "research", "platform")
SYSTEM_NAMESPACES = {"kube-system", "kube-public", "kube-node-lease", "quotree-system"}
LAST_LINE = ">>> try: "
POD = re.compile(r"\b([a-z][a-z0-9-]*?)-[a-z0-9]{6,10}-[a-z0-9]{5}\b")
AGE = re.compile(r"(?<=\s)(\d+[smhd])+$", re.M)


def shown_as_defaults(text: str) -> str:
    """The session's paths and ports written as a default `make run` shows them."""
    text = text.replace(str(cluster_mod.RUN_DIR), "~/.cache/quotree/run")
    text = text.replace(str(cluster_mod.CACHE_DIR), "~/.cache/quotree")
    text = text.replace(cluster_mod.APISERVER_URL, "https://127.0.0.1:26443")
    return re.sub(r"(the tree page: http://127\.0\.0\.1:)\d+/", r"\g<1>8000/", text)


def normalise(text: str) -> str:
    """Pod hashes and ages, which no two runs share."""
    text = re.sub(r"\bMakefile:\d+:", "Makefile:<line>:", text)  # make's own words on Ctrl-C
    lines = []
    for line in AGE.sub("<age>", text).splitlines():
        named = POD.sub(r"\1-<pod>", line)
        lines.append(re.sub(r" {2,}", "  ", named) if named != line else line)
    return "\n".join(lines)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _kubectl_env() -> dict[str, str]:
    env = dict(os.environ)
    env["KUBECONFIG"] = str(cluster_mod.KUBECONFIG)
    env["PATH"] = f"{cluster_mod.KUBECTL.parent}:{VENV_BIN}:{env.get('PATH', '')}"
    return env


def typed(*args: str) -> str:
    """Run `kubectl ARGS` from the repository root as a user would; stdout and stderr."""
    done = subprocess.run(
        [str(cluster_mod.KUBECTL), *args],
        cwd=REPO,
        env=_kubectl_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=False,
    )
    return shown_as_defaults(done.stdout)


def _others() -> list[str]:
    """Quota objects and pods of other tests still on the cluster."""
    objects = cluster_mod.kubectl_json("get", "cohorts,elasticquotas", "-A")["items"]
    pods = cluster_mod.kubectl_json("get", "pods", "-A")["items"]
    return [f"{o['kind']} {o['metadata']['name']}" for o in objects] + [
        f"pod {p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in pods
        if p["metadata"]["namespace"] not in SYSTEM_NAMESPACES
    ]


def _remove_demo() -> None:
    kubectl = cluster_mod.kubectl
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        # make run's (a local operator's) and an installed operator's
        kubectl("delete", kind, "local.quotree.io", "quotree.io", "--ignore-not-found", check=False)
    kubectl("delete", "namespace", *DEMO_NAMESPACES, "--ignore-not-found", check=False)
    for cohort in DEMO_COHORTS:  # no operator runs now: nothing else takes it off
        without_in_use(cohort)
    kubectl("delete", "cohort", *DEMO_COHORTS, "--ignore-not-found", check=False)


class MakeRun:
    """`make run` in the background, its output collected line by line."""

    def __init__(self, env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.settled = threading.Event()
        self.proc = subprocess.Popen(
            ["make", "--no-print-directory", "-o", ".venv/.installed", "run"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith(LAST_LINE):
                self.settled.set()

    def transcript(self) -> str:
        return "\n".join(self.lines)

    def ctrl_c(self) -> int:
        """SIGINT to the process group, as Ctrl-C in a terminal; make's exit code."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait(timeout=30)
        self.reader.join(timeout=30)
        return code


@pytest.fixture(scope="module")
def demo(cluster: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeRun]:
    _remove_demo()
    # The session's CRDs were applied server-side (conftest); on a newcomer's cluster they
    # come from an earlier `make run`'s kubectl apply, which a second one finds as it left them.
    cluster.kubectl("apply", "-f", str(REPO / "crds"))
    # Nor has it the operator's namespace yet (other modules' operators made it their way).
    cluster.kubectl("delete", "namespace", "quotree-system", "--ignore-not-found", timeout=180)
    cluster.wait_until(
        lambda: not _others(),
        180,
        "no Cohort, ElasticQuota or pod of other tests left (they change the demo's tables)",
        interval=2,
    )
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)  # as on a newcomer's shell: make run finds the control plane
    # Nor inside another make (`make test`): a nested make calls itself make[1] on Ctrl-C.
    for variable in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"):
        env.pop(variable, None)
    env.update(
        {
            "QUOTREE_WEBHOOK_PORT": str(free_port()),
            "QUOTREE_METRICS_PORT": str(free_port()),
            "QUOTREE_CERT_DIR": str(tmp_path_factory.mktemp("webhook-pki")),
        }
    )
    run = MakeRun(env)
    try:
        if not run.settled.wait(timeout=300):
            run.ctrl_c()
            pytest.fail("make run did not reach its last line in 300 s:\n" + run.transcript())
        yield run
    finally:
        run.ctrl_c()
        _remove_demo()
        cluster.wait_until(
            lambda: (
                not cluster.kubectl(
                    "get", "namespace", *DEMO_NAMESPACES, "--ignore-not-found", "-o", "name"
                ).stdout.strip()
            ),
            120,
            "the demo's namespaces to be gone",
        )


def test_kubectl_quotree_tree_shows_the_demo(demo: MakeRun) -> None:
    check_live("kubectl quotree tree", typed("quotree", "tree"), normalise)


def test_what_if_platform_borrows(demo: MakeRun) -> None:
    command = "kubectl quotree what-if examples/what-if/platform-borrows.yaml"
    output = typed("quotree", "what-if", "examples/what-if/platform-borrows.yaml")
    check_live(command, output, normalise)


def test_a_quota_over_its_cohorts_min_is_refused_in_one_line(demo: MakeRun) -> None:
    command = "kubectl apply -f examples/what-if/nightly-too-big.yaml"
    output = typed("apply", "-f", "examples/what-if/nightly-too-big.yaml")
    assert len(output.strip().splitlines()) == 1, output
    check_live(command, output, normalise)
    listed = cluster_mod.kubectl("get", "eq", "-n", "demo-ci", "-o", "name").stdout.split()
    assert listed == ["elasticquota.quotree.io/ci"], "the refused quota was created"


def test_make_run_transcript_until_ctrl_c(demo: MakeRun) -> None:
    """Ctrl-C signals the whole process group, and the operator may stop before
    hack/run.sh has run its trap: that order is forced here, the operator's SIGINT alone
    and the script's never (it made this test fail now and then, with no ">>> stopping
    the operator" and make's exit status 0)."""
    operator = subprocess.run(
        ["pgrep", "-g", str(demo.proc.pid), "-f", "kopf run"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert len(operator) == 1, operator
    os.kill(int(operator[0]), signal.SIGINT)
    cluster_mod.wait_until(
        lambda: (
            not Path(f"/proc/{operator[0]}").exists()
            or Path(f"/proc/{operator[0]}/stat").read_text().split(") ")[1].startswith("Z")
        ),
        60,
        "the operator stopped on its SIGINT",
    )
    assert demo.proc.wait(timeout=60) == 2  # make's own status for a failed recipe
    demo.ctrl_c()  # the process has ended: only its output is gathered
    transcript = demo.transcript()
    assert ">>> stopping the operator" in transcript, transcript
    check_live("make run", shown_as_defaults(transcript), normalise)
