"""Failover between two operator processes: the standby is warm, the gap in admissions short.

Replica A leads; replica B starts beside it, loads the cluster and watches, and stays
standby. Pods arrive one by one, gated, in a quota with room for all of them. A gets
SIGKILL a third of the way in. B cannot lead before A's Lease runs out (its renewTime
plus its duration); from then on it acts with the engine it kept current, without a
start-up of its own:

- the longest gap between two admissions is at most the Lease's duration plus 5 s;
- B's first admission (of a pod created after the kill) comes at most 5 s after the Lease's
  deadline, and none of those pods is admitted before it;
- every pod is admitted, once (one Admitted event each).
"""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections import Counter
from types import ModuleType
from typing import Any

from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, start_operator

NAMESPACE = "quotree-system"
LEASE = "quotree-operator"
LEASE_DURATION = 15  # leader.py's default
SLACK = 5.0
PODS = 90
RATE = 3.0  # pods created per second
ENV = {"QUOTREE_WEBHOOKS": "0", "QUOTREE_RECLAIM_DELAY": "3"}


def _lease(cluster: ModuleType) -> dict[str, Any]:
    spec: dict[str, Any] = cluster.kubectl_json("-n", NAMESPACE, "get", "lease", LEASE)["spec"]
    return spec


def _wall(text: str) -> float:
    moment = dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.replace(tzinfo=dt.UTC).timestamp()


class Admissions(threading.Thread):
    """Notes, by polling, when each pod of `ns` is first seen without the gate."""

    def __init__(self, ns: str) -> None:
        super().__init__(daemon=True)
        self.ns = ns
        self.at: dict[str, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                items = k.pods(self.ns)
            except Exception:  # a failed poll is just skipped
                continue
            now = time.time()
            for p in items:
                name = p["metadata"]["name"]
                if name not in self.at and k.live(p) and not k.gated(p):
                    self.at[name] = now
            time.sleep(0.2)


def test_the_standby_takes_over_with_a_warm_engine(cluster: ModuleType) -> None:
    s = k.suffix()
    ns, top = f"failover-{s}", f"failover-{s}"
    pods = [k.pod(f"p{i:03d}", ns, {"cpu": "10m"}) for i in range(PODS)]
    started: list[OperatorProcess] = []
    admissions = Admissions(ns)
    try:
        k.apply(k.namespace(ns), k.cohort(top, min={"cpu": "2"}))
        k.apply(k.quota(f"q-{s}", ns, parent=top, min={"cpu": "2"}))
        a = start_operator({**ENV, "QUOTREE_IDENTITY": f"failover-a-{s}"}, log_name="failover-a")
        started.append(a)
        b = start_operator(
            {**ENV, "QUOTREE_IDENTITY": f"failover-b-{s}"},
            log_name="failover-b",
            ready="quota objects (",  # loaded: it lists and watches from here on
        )
        started.append(b)
        admissions.start()
        created: dict[str, float] = {}
        begin = time.time()
        killed_at = renewed = 0.0
        for i, body in enumerate(pods):
            time.sleep(max(0.0, begin + i / RATE - time.time()))
            k.create(body)
            created[body["metadata"]["name"]] = time.time()
            if i == PODS // 3:
                assert "acquired the leader lease" not in b.log_text(), "B led beside A"
                a.kill()
                killed_at = time.time()
                # A's last renewal (a killed process renews no more; B waits for its end).
                lease = _lease(cluster)
                assert lease["holderIdentity"] == f"failover-a-{s}"
                renewed = _wall(lease["renewTime"])
        cluster.wait_until(lambda: len(admissions.at) == PODS, 90, "every pod admitted")
        admissions.done.set()
        b.wait_for_log("acquired the leader lease", 1)
        assert _lease(cluster)["holderIdentity"] == f"failover-b-{s}"

        times = sorted(admissions.at.values())
        gap = max(later - earlier for earlier, later in itertools.pairwise(times))
        deadline = renewed + LEASE_DURATION
        # Pods created after the kill can only be admitted by B.
        late = [name for name, at in created.items() if at > killed_at]
        first_after = min(admissions.at[name] for name in late)
        report = (
            f"longest gap {gap:.1f}s; B's first admission {first_after - killed_at:.1f}s after the"
            f" kill, {first_after - deadline:+.1f}s from the Lease's deadline"
        )
        print(f"failover: {report}")  # shown with pytest -s
        assert gap <= LEASE_DURATION + SLACK, report
        assert first_after - deadline <= SLACK, report
        # None of them was admitted before the Lease ran out.
        assert all(admissions.at[name] >= deadline - 1 for name in late), report
        announced = Counter(e["involvedObject"]["name"] for e in k.events(ns, "Admitted"))
        assert max(announced.values()) == 1
        assert b.alive, b.log_tail()
    finally:
        admissions.done.set()
        for proc in started:
            proc.stop()
        for kind, name in (("namespace", ns), ("cohort", top)):
            cluster.kubectl("delete", kind, name, "--wait=false", "--ignore-not-found", check=False)
