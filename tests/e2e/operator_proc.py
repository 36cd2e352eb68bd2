"""Run the real operator (``kopf run -m quotree_main``) as a process in e2e tests.

API (shared by the operator and webhook e2e tests):

- ``start_operator(env=None, log_name="operator", ready=READY_LINE, timeout=90)`` starts
  ``.venv/bin/kopf run --all-namespaces -m quotree_main`` with ``KUBECONFIG`` of the
  local control plane, logging to ``cluster.LOG_DIR/<log_name>.log``, and waits until the log
  shows ``ready`` (default: the operator took the leader Lease, i.e. it has loaded the cluster
  and acts). ``env`` adds or overrides environment variables (``QUOTREE_*``, see
  operator/quotree_operator/config.py). The operator's namespace is created if missing (the
  Lease lives there).
- ``OperatorProcess.stop()`` (SIGINT, then SIGKILL after a grace period), ``.kill()``
  (SIGKILL at once, for restart tests), ``.log_tail(n)``, ``.log_text()``, ``.alive``.
- ``module_operator(env, log_name)``: a context manager for a module's operator fixture:
  the operator started and its webhook configurations written, then on exit stopped, its
  configurations deleted, and an assertion that it did not die meanwhile.
- ``delete_webhook_configurations()`` deletes what such an operator leaves behind when it
  stops: its Mutating- and ValidatingWebhookConfiguration (a local operator's, named
  ``LOCAL_WEBHOOK_CONFIGURATION``), which would otherwise hold up pods while no operator
  answers. For scripts that start operators outside pytest (the benchmarks); the e2e
  modules' own clean-up is in conftest.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from quotree_webhooks.configurations import LOCAL_CONFIGURATION_NAME
from tests.e2e import cluster

READY_LINE = "acquired the leader lease"
KOPF = Path(sys.executable).with_name("kopf")
DEFAULT_NAMESPACE = "quotree-system"
#: The name of both webhook configurations an operator started here writes (its webhooks
#: are at a URL, not behind a Service).
LOCAL_WEBHOOK_CONFIGURATION = LOCAL_CONFIGURATION_NAME
WEBHOOK_CONFIGURATION_KINDS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")


class OperatorProcess:
    """One running operator; see module docstring."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        tail = self.log_text().splitlines()[-lines:]
        return f"===== {self.log_path} (last {len(tail)} lines) =====\n" + "\n".join(tail)

    def wait_for_log(self, text: str, timeout: float, after: int = 0) -> None:
        """Wait until the log (from character `after`) contains `text`; fail if the process dies."""

        def seen() -> bool:
            if not self.alive:
                raise AssertionError(
                    f"the operator exited ({self.proc.returncode}) before logging {text!r}\n"
                    + self.log_tail()
                )
            return text in self.log_text()[after:]

        try:
            cluster.wait_until(seen, timeout, f"operator log line {text!r}", interval=0.2)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.log_tail()}") from None

    def kill(self) -> None:
        """SIGKILL: no cleanup, as a crash would be."""
        if self.alive:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self, grace: float = 15) -> None:
        """SIGINT (Kopf's graceful stop), then SIGKILL after `grace` seconds."""
        if self.alive:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.kill()


def ensure_namespace(name: str) -> None:
    manifest = f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n"
    cluster.kubectl("apply", "-f", "-", input=manifest)


def start_operator(
    env: dict[str, str] | None = None,
    log_name: str = "operator",
    ready: str | None = READY_LINE,
    timeout: float = 90,
) -> OperatorProcess:
    """Start the operator against the local control plane; see module docstring."""
    full_env = dict(os.environ)
    full_env["KUBECONFIG"] = str(cluster.KUBECONFIG)
    full_env.setdefault("QUOTREE_IDENTITY", "e2e-operator")
    full_env.setdefault("QUOTREE_METRICS_PORT", "0")  # off unless a test asks (fixed ports collide)
    full_env.update(env or {})
    ensure_namespace(full_env.get("QUOTREE_NAMESPACE", DEFAULT_NAMESPACE))
    cluster.LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = cluster.LOG_DIR / f"{log_name}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                str(KOPF),
                "run",
                "--all-namespaces",
                "--standalone",
                "-m",
                "quotree_main",
            ],
            cwd=cluster.REPO_ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    operator = OperatorProcess(proc, log_path)
    if ready:
        try:
            operator.wait_for_log(ready, timeout)
        except AssertionError:
            operator.kill()
            raise
    return operator


def wait_gone(operator: OperatorProcess, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while operator.alive and time.monotonic() < deadline:
        time.sleep(0.1)


def delete_webhook_configurations() -> None:
    """Delete the webhook configurations a local operator wrote (see module docstring)."""
    for kind in WEBHOOK_CONFIGURATION_KINDS:
        cluster.kubectl("delete", kind, LOCAL_WEBHOOK_CONFIGURATION, "--ignore-not-found")


@contextmanager
def module_operator(env: dict[str, str], log_name: str) -> Iterator[OperatorProcess]:
    """An operator for a module's tests (see module docstring)."""
    proc = start_operator(env, log_name=log_name)
    try:
        proc.wait_for_log("configurations quotree.io written", 60)
        yield proc
    finally:
        alive = proc.alive
        proc.stop()
        delete_webhook_configurations()
        assert alive, "the operator died\n" + proc.log_tail()
