"""The webhook process's own cost per pod CREATE review, without a cluster (a script, not a test).

Starts the real webhook process (quotree_webhooks.process / worker) with an engine of one
ElasticQuota, and the minimal no-op aiohttp server bench_webhooks.py uses, both with TLS;
sends each the same pod CREATE review, `--requests` times with 32 in flight over kept-alive
connections (or, `--new-connections`, a TLS handshake per request), rounds alternating;
reports requests/s and the server's CPU time per request (from /proc, which moves less
with the machine's load).

Usage: .venv/bin/python bench/bench_webhook_process.py [--requests 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator"), str(REPO / "webhooks")]

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402

from bench.bench_webhooks import MINIMAL_NOOP  # noqa: E402
from quotree import parse_member  # noqa: E402
from quotree.engine import Engine  # noqa: E402
from quotree_webhooks import tls  # noqa: E402
from quotree_webhooks.process import WebhookProcess  # noqa: E402
from quotree_webhooks.settings import WebhookSettings, WebhookState  # noqa: E402
from quotree_webhooks.wire import WorkerConfig  # noqa: E402

IN_FLIGHT = 32
HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def review(i: int) -> bytes:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{i}", "namespace": "team-a", "labels": {"app": "bench"}},
        "spec": {
            "containers": [
                {"name": "c", "image": "example.com/none", "resources": {"requests": {"cpu": "1"}}}
            ]
        },
    }
    request = {"uid": f"u-{i}", "operation": "CREATE", "object": pod}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body).encode()


async def hammer(
    url: str, ca: Path, requests: int, pid: int, *, new_connections: bool = False
) -> tuple[float, float]:
    """(seconds, the server's CPU seconds) for `requests` reviews, after a warm-up."""
    context = ssl.create_default_context(cafile=str(ca))
    connector = aiohttp.TCPConnector(limit=IN_FLIGHT, ssl=context, force_close=new_connections)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=connector) as session:
        counter = iter(range(0))

        async def worker() -> None:
            for i in counter:
                async with session.post(url, data=review(i), headers=headers) as r:
                    assert r.status == 200, r.status
                    await r.read()

        counter = iter(range(4 * IN_FLIGHT))
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))  # open the connections
        counter = iter(range(requests))
        cpu = cpu_seconds(pid)
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        return time.perf_counter() - started, cpu_seconds(pid) - cpu


async def main(requests: int, rounds: int, new_connections: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="quotree-bench-process-"))
    pki = tls.ensure_pki(tmp / "pki", ["127.0.0.1", "localhost"])
    engine = Engine()
    engine.set_config(
        parse_member(
            {"kind": "ElasticQuota", "metadata": {"name": "team-a", "namespace": "team-a"}}
        )
    )
    settings = WebhookSettings(frozenset(), "127.0.0.1", free_port(), tmp)
    upstream = f"\0quotree-bench-{os.getpid()}"
    runner = web.AppRunner(web.Application())
    await runner.setup()
    await web.UnixSite(runner, upstream).start()
    process = WebhookProcess(
        WebhookState(engine, settings),
        WorkerConfig(
            settings.host, settings.port, str(pki.cert), str(pki.key), frozenset(), upstream
        ),
    )
    supervisor = asyncio.create_task(process.run())
    await asyncio.wait_for(process.serving.wait(), 30)
    noop_port = free_port()
    noop_path = tmp / "minimal_noop.py"
    noop_path.write_text(MINIMAL_NOOP.format(cert=pki.cert, key=pki.key, port=noop_port))
    noop = subprocess.Popen([sys.executable, str(noop_path)])
    await asyncio.sleep(2)
    sides = {
        "quotree webhook process": (f"https://127.0.0.1:{settings.port}/pods-mutate", process),
        "minimal no-op": (f"https://127.0.0.1:{noop_port}/noop", None),
    }
    results: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    try:
        for _ in range(rounds):
            for side, (url, proc) in sides.items():
                pid = proc.pid if proc is not None else noop.pid
                assert pid is not None
                seconds, cpu = await hammer(
                    url, pki.ca_cert, requests, pid, new_connections=new_connections
                )
                results[side].append((requests / seconds, cpu / requests * 1e3))
    finally:
        noop.terminate()
        noop.wait()
        supervisor.cancel()
        await asyncio.gather(supervisor, return_exceptions=True)
        await runner.cleanup()
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    how = "a new TLS connection per request" if new_connections else "kept-alive connections"
    print(f"- {requests} pod CREATE reviews per side and round, {IN_FLIGHT} in flight, {how},")
    print(f"  {rounds} rounds alternating; load average {load}:\n")
    print("| server | requests/s per round | median | server CPU ms per request (median) |")
    print("| --- | --- | --- | --- |")
    for side, rows in results.items():
        rates = ", ".join(f"{r:.0f}" for r, _ in rows)
        rate = statistics.median(r for r, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        print(f"| {side} | {rates} | {rate:.0f} | {cpu:.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--new-connections", action="store_true", help="one TLS handshake per request"
    )
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.rounds, args.new_connections))
