"""`kubectl quotree pending` against the running operator, and the plugin's kubectl habits.

The story: Cohort pend-<s> over ElasticQuotas team-a (max 10 GPUs, so sharedWeight 10) and
team-b (max 20, weight 20), the Cohort's max at 0 GPUs: nothing fits. Six 1-GPU pods wait
in each quota, of two priorities. `kubectl quotree pending -A` lists the twelve; then the
Cohort's max grows by one GPU at a time, and each step admits exactly the next pod listed.

The plugin runs as `kubectl quotree ...` (kubectl finds kubectl-quotree in .venv/bin).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, start_operator

GPU = "nvidia.com/gpu"
PODS_PER_QUOTA = 6


@dataclass
class Story:
    cohort: str
    ns_a: str
    ns_b: str
    operator: OperatorProcess

    @property
    def quotas(self) -> tuple[tuple[str, str], ...]:
        return ((self.ns_a, "team-a"), (self.ns_b, "team-b"))

    def mine(self, namespace: str) -> bool:
        return namespace in (self.ns_a, self.ns_b)


def _admitted(story: Story, at_least: int) -> set[str] | None:
    """The story's admitted pods, once there are `at_least` of them."""
    keys = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for ns in (story.ns_a, story.ns_b)
        for p in k.admitted_pods(ns)
    }
    return keys if len(keys) >= at_least else None


@pytest.fixture(scope="module")
def story(cluster: ModuleType) -> Iterator[Story]:
    s = k.suffix()
    operator = start_operator({"QUOTREE_WEBHOOKS": "0"}, log_name="operator-pending")
    story = Story(f"pend-{s}", f"pend-a-{s}", f"pend-b-{s}", operator)
    try:
        k.priority_classes()
        k.apply(
            k.namespace(story.ns_a),
            k.namespace(story.ns_b),
            k.cohort(story.cohort, max={GPU: "0"}),
        )
        k.apply(
            k.quota("team-a", story.ns_a, parent=story.cohort, max={GPU: "10"}),
            k.quota("team-b", story.ns_b, parent=story.cohort, max={GPU: "20"}),
        )
        for ns, name in story.quotas:
            cluster.wait_until(
                lambda ns=ns, name=name: k.status("elasticquota", name, ns).get("conditions"),
                60,
                f"the operator to write the status of {name}",
            )
        for i in range(PODS_PER_QUOTA):
            priority = k.HIGH if i % 3 == 2 else k.LOW
            k.create(k.pod(f"a-{i}", story.ns_a, {GPU: "1"}, priority_class=priority))
            priority = k.HIGH if i % 2 == 1 else k.LOW
            k.create(k.pod(f"b-{i}", story.ns_b, {GPU: "1"}, priority_class=priority))
        for ns, name in story.quotas:
            cluster.wait_until(
                lambda ns=ns, name=name: (
                    k.status("elasticquota", name, ns).get("pendingPods") == PODS_PER_QUOTA
                ),
                60,
                f"{name}'s status to count its {PODS_PER_QUOTA} waiting pods",
            )
        yield story
    finally:
        alive = operator.alive
        operator.stop()
        for ns in (story.ns_a, story.ns_b):
            cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        cluster.kubectl("delete", "cohort", story.cohort, "--wait=false", check=False)
        assert alive, "the operator died\n" + operator.log_tail()


def test_pending_lists_the_pods_in_the_order_they_are_admitted_as_room_appears(
    cluster: ModuleType, story: Story
) -> None:
    done = k.kubectl_quotree(cluster, "pending", "-A", "-o", "json")
    assert done.returncode == 0, done.stderr
    items = [i for i in json.loads(done.stdout)["items"] if story.mine(i["namespace"])]
    listed = [f"{i['namespace']}/{i['name']}" for i in items]
    assert len(listed) == 2 * PODS_PER_QUOTA
    # Positions: in the quota (priority first), and under the Cohort (the listing's order).
    for place, item in enumerate(items, 1):
        assert item["positions"][story.cohort] == place
        same_quota = [i for i in items if i["quota"] == item["quota"]]
        assert item["positions"][item["quota"]] == same_quota.index(item) + 1
        assert item["priority"] in (10, 1000)
    a_queue = [i["name"] for i in items if i["quota"] == "team-a"]
    assert a_queue == ["a-2", "a-5", "a-0", "a-1", "a-3", "a-4"]  # HIGH, then LOW by name
    # The table says the same.
    table = k.kubectl_quotree(cluster, "pending", "-A")
    assert table.returncode == 0, table.stderr
    rows = [row.split() for row in table.stdout.splitlines()[1:]]
    assert [f"{r[1]}/{r[2]}" for r in rows if story.mine(r[1])] == listed
    # The quotas' status shows their first five, in the same order.
    for ns, name in story.quotas:
        queue = k.status("elasticquota", name, ns)["queue"]
        mine = [i["name"] for i in items if i["quota"] == name]
        assert [(e["position"], e["name"]) for e in queue] == list(enumerate(mine[:5], 1))
    # Room appears one GPU at a time: each step admits the next pod listed.
    admitted: list[str] = []
    for step in range(1, 2 * PODS_PER_QUOTA + 1):
        cluster.kubectl(
            "patch", "cohort", story.cohort, "--type=merge",
            "-p", json.dumps({"spec": {"max": {GPU: str(step)}}}),
        )  # fmt: skip
        now = cluster.wait_until(
            lambda step=step: _admitted(story, at_least=step),
            60,
            f"{step} pods admitted under a Cohort max of {step} GPUs",
        )
        assert len(now) == step, f"max {step} admitted {sorted(now)}"
        admitted += sorted(now - set(admitted))
    assert admitted == listed


def test_kubectl_habits_on_the_live_cluster(
    cluster: ModuleType, story: Story, tmp_path: Path
) -> None:
    """Global flags before the command, the context's namespace, and `why` on a pod that
    can never fit (over team-a's max of 10 GPUs)."""
    k.create(k.pod("huge", story.ns_a, {GPU: "12"}))
    cluster.wait_until(
        lambda: any(e["involvedObject"]["name"] == "huge" for e in k.events(story.ns_a, "Pending")),
        60,
        "the operator to say why huge waits",
    )
    before = k.kubectl_quotree(cluster, "-n", story.ns_a, "why", "huge")
    assert before.returncode == 0, before.stderr
    assert "never:   it can never fit as the tree stands, whatever finishes:" in before.stdout
    assert f"{GPU}: the request 12 is over ElasticQuota team-a's max 10 by 2" in before.stdout
    after = k.kubectl_quotree(cluster, "why", "huge", "--namespace", story.ns_a)
    assert after.stdout == before.stdout
    # Without -n: the namespace of the kubeconfig's current context.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(Path(cluster.KUBECONFIG).read_text())
    cluster.kubectl(
        "--kubeconfig", str(kubeconfig), "config", "set-context", "--current",
        f"--namespace={story.ns_a}",
    )  # fmt: skip
    by_context = k.kubectl_quotree(cluster, "why", "huge", "--kubeconfig", str(kubeconfig))
    assert by_context.returncode == 0, by_context.stderr
    assert by_context.stdout == before.stdout
    waiting = k.kubectl_quotree(cluster, "--kubeconfig", str(kubeconfig), "pending")
    assert waiting.returncode == 0, waiting.stderr
    assert [row.split()[2] for row in waiting.stdout.splitlines()[1:]] == ["huge"]
    default = k.kubectl_quotree(cluster, "why", "huge")  # the test kubeconfig names none
    assert default.returncode == 1
    assert "pod default/huge not found" in default.stderr
