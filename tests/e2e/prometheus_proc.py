"""Run Debian's Prometheus (hack/tools.sh installs it) against operators started by e2e tests.

- ``run_prometheus(work, targets, rule_files=())`` (context manager): Prometheus on a free
  127.0.0.1 port with its data in ``work``, scraping ``targets`` ("host:port") every second
  and evaluating ``rule_files`` every second; yields its URL once it is ready; stops it at
  the end (SIGTERM, then SIGKILL).
- ``promql(url, query)``: an instant query's result list; ``one_value(url, query)``: the
  value of a query that returns exactly one series (None otherwise).
- ``free_port()``, ``http_get(url)``: the small helpers these use.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.e2e import cluster


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body: bytes = response.read()
        return body


@contextmanager
def run_prometheus(
    work: Path, targets: Iterable[str], rule_files: Iterable[Path] = ()
) -> Iterator[str]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed: run hack/tools.sh (make test does)"
    port = free_port()
    rules = ", ".join(f"'{path}'" for path in rule_files)
    scraped = ", ".join(f"'{target}'" for target in targets)
    (work / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: [{rules}]\n"
        "scrape_configs:\n"
        "  - job_name: quotree-operator\n"
        f"    static_configs: [{{targets: [{scraped}]}}]\n"
    )
    log = (work / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            assert proc.poll() is None, (work / "prometheus.log").read_text()[-3000:]
            try:
                return http_get(f"{url}/-/ready").startswith(b"Prometheus")
            except OSError:
                return False

        cluster.wait_until(ready, 60, "Prometheus to be ready")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        log.close()


def promql(url: str, query: str) -> list[dict[str, Any]]:
    answer = json.loads(http_get(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": query})))
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def one_value(url: str, query: str) -> float | None:
    result = promql(url, query)
    if len(result) != 1:
        return None
    return float(result[0]["value"][1])
