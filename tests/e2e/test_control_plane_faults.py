"""The operator survives its control plane failing mid-burst.

Each test creates a burst of 300 pods (10 quotas under one Cohort; 20 of each quota's 30
fit) and, once about a third of them exist, breaks something real: kube-apiserver SIGKILLed
and started again 5 s later, etcd SIGKILLed and started again 5 s later, or every
connection of the operator (its pod watch included) reset by a TCP proxy between it and
the API server, which then refuses it for 5 s (longer than the writes retry). Afterwards
(tests/e2e/burst.py): every pod is admitted exactly once (one Admitted event each, the ones
the API could not take while it was away included) or waits with a Pending event; at no
sample (every 0.3 s, as long as the API answers) does a quota's admitted usage exceed its
runtime; and the statuses equal `quotree simulate` of the same objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.e2e import cluster as cluster_mod
from tests.e2e.burst import Burst, Sampler
from tests.e2e.operator_proc import OperatorProcess, start_operator
from tests.e2e.tcp_proxy import TcpProxy

ENV = {"QUOTREE_RECLAIM_DELAY": "3", "QUOTREE_WEBHOOKS": "0"}
DOWN_FOR = 5.0  # seconds a killed component stays down


def _restart(name: str) -> Callable[[], None]:
    def fault() -> None:
        argv = cluster_mod.kill_component(name)
        time.sleep(DOWN_FOR)
        cluster_mod.start_component(name, argv)
        cluster_mod.wait_until(cluster_mod.api_ready, 90, f"the API server ready after {name}")

    return fault


def _run_burst(
    name: str, fault: Callable[[], None], env: dict[str, str] | None = None
) -> OperatorProcess:
    burst = Burst(name, quotas=10, pods_per_quota=30)
    operator = start_operator({**ENV, **(env or {})}, log_name=f"operator-{name}")
    sampler = Sampler(burst.ns)
    try:
        burst.create_objects()
        sampler.start()
        burst.create_pods(after_chunks=2, then=fault)
        try:
            cluster_mod.wait_until(burst.settled, 150, "every quota admitted exactly what fits")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{operator.log_tail(40)}") from None
        sampler.stop()
        burst.check(sampler)
        assert operator.alive, operator.log_tail()
        return operator
    finally:
        sampler.stop()
        alive = operator.alive
        operator.stop()
        burst.cleanup()
        assert alive, "the operator died\n" + operator.log_tail()


@pytest.mark.cluster_restart
def test_kube_apiserver_killed_mid_burst_and_restarted(cluster: ModuleType) -> None:
    operator = _run_burst("apikill", _restart("kube-apiserver"))
    log = operator.log_text()
    assert "pod watch:" in log, "the operator's pod watch never noticed the outage"


@pytest.mark.cluster_restart
def test_etcd_killed_mid_burst_and_restarted(cluster: ModuleType) -> None:
    _run_burst("etcdkill", _restart("etcd"))


def test_operator_connections_cut_mid_burst(cluster: ModuleType) -> None:
    proxy = TcpProxy(cluster_mod.PORTS["kube-apiserver"]).start()
    kubeconfig = proxy.kubeconfig(Path(cluster_mod.RUN_DIR) / "operator-via-proxy.kubeconfig")
    cut: list[int] = []
    try:
        operator = _run_burst(
            "netcut",
            lambda: cut.append(proxy.cut(refuse_for=5.0)),
            env={"KUBECONFIG": str(kubeconfig)},
        )
    finally:
        proxy.stop()
    assert cut, "the proxy was never cut"
    assert cut[0] >= 1, "no connection of the operator was open to cut"
    assert "pod watch:" in operator.log_text(), "the pod watch was not cut"
