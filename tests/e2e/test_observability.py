"""Metrics with a real Prometheus, `kubectl quotree` through kubectl, the tree page in Chromium.

One operator (webhooks on, its own ports) serves a small story: Cohort obs-<s> (min cpu 3,
max cpu 4) with ElasticQuota team-a (min 2, max 3) and team-b (min 1). team-a runs three
1-cpu pods and a fourth waits over its max.

- Debian's Prometheus (hack/tools.sh) runs on 127.0.0.1 with a temporary directory and a
  1 s scrape of the operator's metrics port (prometheus_proc.py); PromQL answers are
  compared with the status.
- The plugin runs as `kubectl quotree ...` (kubectl finds kubectl-quotree in .venv/bin).
- Headless Chromium (Debian's /usr/bin/chromium) loads the page; the DOM's numbers are
  compared with the status; a screenshot goes to the test's temporary directory, and to
  docs/img/tree-page.png with QUOTREE_UPDATE_SCREENSHOT=1.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType

import pytest

from quotree.quantity import parse_quantity
from tests.e2e import kube_helpers as k
from tests.e2e.operator_proc import OperatorProcess, start_operator
from tests.e2e.prometheus_proc import free_port, http_get, one_value, promql, run_prometheus

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


class Story:
    """What the module set up: names, the operator and its metrics port."""

    def __init__(self, suffix: str, operator: OperatorProcess, metrics_port: int) -> None:
        self.cohort = f"obs-{suffix}"
        self.ns_a = f"obs-a-{suffix}"
        self.ns_b = f"obs-b-{suffix}"
        self.operator = operator
        self.metrics_port = metrics_port

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"


@pytest.fixture(scope="module")
def story(cluster: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    s = k.suffix()
    metrics_port = free_port()
    env = {
        "QUOTREE_METRICS_PORT": str(metrics_port),
        "QUOTREE_WEBHOOK_PORT": str(free_port()),
        "QUOTREE_CERT_DIR": str(tmp_path_factory.mktemp("webhook-pki")),
        "QUOTREE_IDENTITY": "e2e-observability",
        "QUOTREE_RECLAIM_DELAY": "3",
    }
    operator = start_operator(env, log_name="operator-observability")
    story = Story(s, operator, metrics_port)
    try:
        operator.wait_for_log("configurations quotree.io written", 60)
        k.apply(
            k.namespace(story.ns_a),
            k.namespace(story.ns_b),
            k.cohort(story.cohort, min={"cpu": "3"}, max={"cpu": "4"}),
        )
        k.apply(
            k.quota("team-a", story.ns_a, parent=story.cohort, min={"cpu": "2"}, max={"cpu": "3"}),
            k.quota("team-b", story.ns_b, parent=story.cohort, min={"cpu": "1"}),
        )
        cluster.wait_until(
            lambda: k.status("elasticquota", "team-a", story.ns_a).get("conditions"),
            60,
            "the operator to see team-a (it writes its status)",
        )
        # No gate in the manifests: the mutating webhook adds it (and is timed doing so).
        for i in range(4):
            pod = k.pod(f"a-{i}", story.ns_a, {"cpu": "1"})
            pod["spec"].pop("schedulingGates")
            k.create(pod)
        cluster.wait_until(
            lambda: len(k.admitted_pods(story.ns_a)) == 3, 90, "three pods of team-a admitted"
        )
        cluster.wait_until(
            lambda: (
                k.status("elasticquota", "team-a", story.ns_a).get("used") == {"cpu": "3"}
                and k.status("elasticquota", "team-a", story.ns_a).get("pendingPods") == 1
            ),
            60,
            "team-a's status to show used cpu 3 and one pending pod",
        )
        yield story
    finally:
        alive = operator.alive
        operator.stop()
        for ns in (story.ns_a, story.ns_b):
            cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        assert alive, "the operator died\n" + operator.log_tail()


# ------------------------------------------------------------------ Prometheus


@pytest.fixture(scope="module")
def prometheus(story: Story, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    rules = REPO / "manifests" / "prometheus" / "rules.yaml"
    with run_prometheus(
        tmp_path_factory.mktemp("prometheus"), [f"127.0.0.1:{story.metrics_port}"], [rules]
    ) as url:
        yield url


def test_promql_used_equals_the_status(cluster: ModuleType, story: Story, prometheus: str) -> None:
    used = k.status("elasticquota", "team-a", story.ns_a)["used"]["cpu"]
    expected = parse_quantity(used, "cpu") / 1000
    query = 'quotree_used{node="team-a",resource="cpu"}'
    got = cluster.wait_until(
        lambda: one_value(prometheus, query) == expected, 30, f"{query} == {expected}"
    )
    assert got
    labels = promql(prometheus, query)[0]["metric"]
    assert labels["kind"] == "ElasticQuota"
    assert labels["namespace"] == story.ns_a
    assert labels["parent"] == story.cohort
    runtime = k.status("elasticquota", "team-a", story.ns_a)["runtime"]["cpu"]
    assert one_value(prometheus, 'quotree_runtime{node="team-a",resource="cpu"}') == (
        parse_quantity(runtime, "cpu") / 1000
    )
    assert one_value(prometheus, 'quotree_pods{node="team-a",state="pending"}') == 1
    assert one_value(prometheus, 'quotree_max{node="team-a",resource="cpu"}') == 3
    assert promql(prometheus, 'quotree_max{node="team-b"}') == []  # unlimited: no series


def test_promql_admission_wait_quantile_is_a_number(
    cluster: ModuleType, story: Story, prometheus: str
) -> None:
    query = "histogram_quantile(0.5, sum by (le) (quotree_admission_wait_seconds_bucket))"

    def number() -> float | None:
        value = one_value(prometheus, query)
        return value if value is not None and math.isfinite(value) else None

    value = cluster.wait_until(number, 30, f"{query} to be a number")
    assert value >= 0
    admitted = one_value(prometheus, 'quotree_admissions_total{node="team-a"}')
    assert admitted == 3


def test_promql_leader_webhooks_and_decisions(
    cluster: ModuleType, story: Story, prometheus: str
) -> None:
    assert one_value(prometheus, "quotree_leader") == 1
    mutated = one_value(
        prometheus, 'sum(quotree_webhook_duration_seconds_count{webhook="pods-mutate"})'
    )
    assert mutated is not None
    assert mutated >= 4  # one per pod created (more with retries)
    assert (one_value(prometheus, "quotree_decision_seconds_count") or 0) > 0
    assert one_value(prometheus, 'sum(quotree_webhook_errors_total{webhook="pods-mutate"})') in (
        None,
        0.0,
    )
    # The alert rules load and evaluate against the real series: none fires here.
    rules = json.loads(http_get(f"{prometheus}/api/v1/rules"))["data"]["groups"]
    names = {r["name"] for g in rules for r in g["rules"]}
    assert "QuotreeOperatorDown" in names
    firing = json.loads(http_get(f"{prometheus}/api/v1/alerts"))["data"]["alerts"]
    assert [a for a in firing if a["state"] == "firing"] == []


# ------------------------------------------------------------------ kubectl quotree


def test_kubectl_quotree_tree(cluster: ModuleType, story: Story) -> None:
    done = k.kubectl_quotree(cluster, "tree", "-o", "wide")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    cohort_line = next(line for line in lines if f"{story.cohort} (coh)" in line)
    team_a = next(line for line in lines if "team-a (eq)" in line)
    assert lines.index(team_a) > lines.index(cohort_line)
    status = k.status("elasticquota", "team-a", story.ns_a)
    # RESOURCE MIN MAX REQUEST RUNTIME USED, then the usage bar.
    cells = team_a.split("team-a (eq)")[1].split()
    assert cells[:6] == [
        "cpu",
        "2",
        "3",
        status["request"]["cpu"],
        status["runtime"]["cpu"],
        status["used"]["cpu"],
    ]
    assert cells[6].startswith("[")
    assert f"{story.ns_a}/a-" in done.stdout
    as_json = k.kubectl_quotree(cluster, "tree", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["nodes"]["team-a"]["used"] == status["used"]
    pending = [
        key
        for key, p in report["pods"].items()
        if p["state"] == "pending" and key.startswith(f"{story.ns_a}/")
    ]
    assert len(pending) == 1
    assert report["pods"][pending[0]]["reason"].startswith("does not fit in ElasticQuota team-a")


def test_kubectl_quotree_why(cluster: ModuleType, story: Story) -> None:
    waiting = next(p for p in k.pods(story.ns_a) if k.gated(p))["metadata"]["name"]
    done = k.kubectl_quotree(cluster, "why", waiting, "-n", story.ns_a)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"quota:   ElasticQuota team-a in namespace {story.ns_a}" in out
    assert "operator: does not fit in ElasticQuota team-a: cpu: used 3 + request 1" in out
    assert "engine:  does not fit in ElasticQuota team-a: cpu: used 3 + request 1 > runtime 3" in (
        out
    )
    assert "may never use more than 3" in out  # its max is what holds it back
    admitted = k.admitted_pods(story.ns_a)[0]["metadata"]["name"]
    done = k.kubectl_quotree(cluster, "why", admitted, "-n", story.ns_a)
    assert "state:   admitted" in done.stdout


def test_kubectl_quotree_what_if(cluster: ModuleType, story: Story, tmp_path: Path) -> None:
    proposal = tmp_path / "team-a-max.yaml"
    proposal.write_text(
        "apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
        f"metadata: {{name: team-a, namespace: {story.ns_a}}}\n"
        f"spec: {{parent: {story.cohort}, min: {{cpu: '2'}}, max: {{cpu: '4'}}}}\n"
    )
    before = cluster.kubectl_json("get", "elasticquota", "team-a", "-n", story.ns_a)
    done = k.kubectl_quotree(cluster, "what-if", str(proposal))
    assert done.returncode == 0, done.stderr
    assert "team-a                  cpu                            3  →  4  (changed)" in (
        done.stdout
    )
    assert "would be admitted" in done.stdout
    # Nothing was written.
    after = cluster.kubectl_json("get", "elasticquota", "team-a", "-n", story.ns_a)
    assert after["spec"] == before["spec"]
    assert len(k.admitted_pods(story.ns_a)) == 3
    # A proposal the webhook refuses: its exact message.
    bad = tmp_path / "team-b-min.yaml"
    bad.write_text(
        "apiVersion: quotree.io/v1alpha1\nkind: ElasticQuota\n"
        f"metadata: {{name: team-b, namespace: {story.ns_b}}}\n"
        f"spec: {{parent: {story.cohort}, min: {{cpu: '2'}}}}\n"
    )
    refused = k.kubectl_quotree(cluster, "what-if", str(bad))
    assert refused.returncode == 3, refused.stderr  # refused: a pipeline stops here
    applied = cluster.kubectl("apply", "-f", str(bad), check=False)
    assert applied.returncode != 0
    message = (
        f"ElasticQuota team-b: min cpu 2 would make the children of Cohort {story.cohort} "
        "need 4 in all, over " + f"{story.cohort}'s min of 3"
    )
    assert f"refused: {message}" in refused.stdout
    assert message in applied.stderr  # the webhook's own words


def test_kubectl_quotree_simulate(cluster: ModuleType, story: Story) -> None:
    done = k.kubectl_quotree(cluster, "simulate", "-o", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    status = k.status("elasticquota", "team-a", story.ns_a)
    assert report["nodes"]["team-a"]["used"] == status["used"]
    assert report["nodes"]["team-a"]["runtime"] == status["runtime"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("why", "no-such-pod", "-n", "default"), "pod default/no-such-pod not found"),
        (("what-if", "MALFORMED"), "bad.yaml line "),
        (("what-if", "/no/such/file.yaml"), "/no/such/file.yaml: cannot read"),
    ],
)
def test_kubectl_quotree_bad_input(
    cluster: ModuleType, story: Story, tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    if "MALFORMED" in args:
        bad = tmp_path / "bad.yaml"
        bad.write_text("kind: [unclosed\n")
        args = tuple(str(bad) if a == "MALFORMED" else a for a in args)
    done = k.kubectl_quotree(cluster, *args)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("kubectl quotree: error: ")
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


def test_kubectl_quotree_without_a_cluster(cluster: ModuleType, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: none\n"
        # Port 1 on the loopback: nothing listens there, the connection is refused.
        "clusters: [{name: none, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: none, context: {cluster: none, user: none}}]\n"
        "users: [{name: none, user: {token: not-checked}}]\n"
    )
    done = k.kubectl_quotree(cluster, "tree", env={"KUBECONFIG": str(kubeconfig)})
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert "refused" in done.stderr


# ------------------------------------------------------------------ the page


class _Cells(HTMLParser):
    """Collects `data-node`/`data-resource`/`data-field` cells and `data-pod` rows."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str, str], str] = {}
        self.pods: list[str] = []
        self.loaded = False
        self._open: tuple[str, str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "body" and a.get("data-loaded"):
            self.loaded = True
        if a.get("data-pod"):
            self.pods.append(str(a["data-pod"]))
        if a.get("data-field") and a.get("data-resource"):
            self._open = (str(a["data-node"]), str(a["data-resource"]), str(a["data-field"]))

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self.cells[self._open] = data.strip()
            self._open = None


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert Path(CHROMIUM).exists(), "chromium is not installed: run hack/tools.sh"
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.iterdir()))}"
    return subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_tree_page_in_chromium(cluster: ModuleType, story: Story, tmp_path: Path) -> None:
    url = f"{story.base}/"
    done = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", url)
    assert done.returncode == 0, done.stderr[-2000:]
    page = _Cells()
    page.feed(done.stdout)
    assert page.loaded, "the page did not load /api/tree:\n" + done.stdout[-2000:]
    for name, ns, kind in (
        ("team-a", story.ns_a, "elasticquota"),
        ("team-b", story.ns_b, "elasticquota"),
        (story.cohort, None, "cohort"),
    ):
        status = k.status(kind, name, ns)
        for field in ("used", "runtime"):
            assert page.cells[(name, "cpu", field)] == status[field]["cpu"], (name, field)
    assert page.cells[("team-a", "cpu", "min")] == "2"
    assert page.cells[("team-a", "cpu", "max")] == "3"
    assert page.cells[("team-b", "cpu", "max")] == "-"
    waiting = [p["metadata"]["name"] for p in k.pods(story.ns_a) if k.gated(p)]
    ours = [pod for pod in page.pods if pod.startswith(f"{story.ns_a}/")]  # other tests' too
    assert ours == [f"{story.ns_a}/{name}" for name in waiting]
    # Read-only: the page's server takes no writes.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(
            urllib.request.Request(f"{story.base}/api/tree", data=b"{}", method="POST"), timeout=5
        )
    assert refused.value.code == 405
    shot = tmp_path / "tree-page.png"
    done = chromium(
        tmp_path,
        "--virtual-time-budget=5000",
        "--window-size=1100,760",
        f"--screenshot={shot}",
        url,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.stat().st_size > 10_000
    if os.environ.get("QUOTREE_UPDATE_SCREENSHOT") == "1":
        target = REPO / "docs" / "img" / "tree-page.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, target)
