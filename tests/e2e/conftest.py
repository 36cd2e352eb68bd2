"""e2e fixtures: a real local control plane (see tests/e2e/cluster.py, docs/control-plane.md).

- Every test under tests/e2e is marked ``e2e``.
- ``cluster`` (session): starts the control plane unless it runs (building it on a fresh
  machine; a start begins with empty etcd data, a running one is reused as it is), applies
  every YAML in ``crds/`` and waits for the CRDs to be Established, sets
  ``KUBECONFIG`` in ``os.environ``; yields the ``tests.e2e.cluster`` module. At the end it
  fails the session if the tests left quotree objects behind (Cohorts, ElasticQuotas,
  ResourceFlavors, quotree's webhook configurations, that were not there when it began),
  after waiting a while for deletions in flight. If this session started the control
  plane, it stops it at the end, unless ``QUOTREE_KEEP_CLUSTER=1``.
- ``namespace`` (function): a fresh namespace (its default ServiceAccount exists), deleted
  afterwards without waiting; yields its name.
- every e2e module (autouse): starts without quotree webhook configurations and deletes,
  when it ends, those configurations and the Cohorts it created.
- Tests marked ``cluster_restart`` (they stop and start the control plane) run after all
  other tests of the session.
- A failing e2e test's report shows the tail of each component's log.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.e2e import cluster as cluster_mod
from tests.e2e.kube_helpers import without_in_use

E2E_DIR = Path(__file__).resolve().parent
CRDS_DIR = cluster_mod.REPO_ROOT / "crds"
LOG_TAIL_LINES = 40


def _is_e2e(item: pytest.Item) -> bool:
    return E2E_DIR in Path(str(item.path)).resolve().parents


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cluster_restart: stops and starts the local control plane; runs after other tests",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_e2e(item):
            item.add_marker(pytest.mark.e2e)
    # Tests that restart the control plane go last (stable order otherwise).
    items.sort(key=lambda item: item.get_closest_marker("cluster_restart") is not None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and _is_e2e(item):
        report.sections.append(
            (
                f"control plane logs (last {LOG_TAIL_LINES} lines each)",
                cluster_mod.log_tails(LOG_TAIL_LINES),
            )
        )
    return report


def _apply_crds() -> None:
    files = sorted(p for p in CRDS_DIR.glob("*") if p.suffix in {".yaml", ".yml"} and p.is_file())
    if not files:
        return
    args: list[str] = []
    for path in files:
        args += ["-f", str(path)]
    out = cluster_mod.kubectl("apply", "--server-side", "--force-conflicts", *args, "-o", "name")
    crds = [
        line.strip()
        for line in out.stdout.splitlines()
        if line.startswith("customresourcedefinition")
    ]
    if crds:
        cluster_mod.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", *crds, timeout=90
        )


#: What a test must not leave behind: quotree's objects (see `_quotree_objects`).
QUOTREE_KINDS = (
    "cohorts.quotree.io",
    "elasticquotas.quotree.io",
    "resourceflavors.quotree.io",
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
)
#: How long the session waits for deletions still in flight before it calls them leftovers.
LEFTOVER_WAIT = 180.0


def _quotree_objects() -> set[str]:
    """Every quotree object in the cluster, as "kind namespace/name" ("kind name")."""
    found: set[str] = set()
    for kind in QUOTREE_KINDS:
        for item in cluster_mod.kubectl_json("get", kind, "-A")["items"]:
            meta = item["metadata"]
            if kind.endswith("webhookconfigurations") and not meta["name"].endswith("quotree.io"):
                continue
            where = f"{meta['namespace']}/" if meta.get("namespace") else ""
            found.add(f"{kind} {where}{meta['name']}")
    return found


def check_nothing_left(before: set[str], wait: float = LEFTOVER_WAIT) -> None:
    """Fail, naming them, if quotree objects not in `before` are still there after `wait`."""
    left: set[str] = set()

    def gone() -> bool:
        nonlocal left
        left = _quotree_objects() - before
        return not left

    try:
        cluster_mod.wait_until(gone, wait, "the tests' quotree objects deleted", interval=2)
    except AssertionError:
        listing = "\n  ".join(sorted(left))
        raise AssertionError(
            f"the e2e tests left {len(left)} quotree object(s) behind:\n  {listing}"
        ) from None


@pytest.fixture(scope="session")
def cluster() -> Iterator[ModuleType]:
    """The running local control plane; yields the ``tests.e2e.cluster`` module."""
    started = cluster_mod.ensure_cluster()
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(cluster_mod.KUBECONFIG)
    try:
        _apply_crds()
        before = _quotree_objects()
        yield cluster_mod
        check_nothing_left(before)
    finally:
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
        if started and os.environ.get("QUOTREE_KEEP_CLUSTER") != "1":
            cluster_mod.cluster_down()


#: An installed operator's configurations and a local one's (quotree_webhooks.configurations).
WEBHOOK_CONFIGURATIONS = ("quotree.io", "local.quotree.io")


def _delete_webhook_configurations() -> None:
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        cluster_mod.kubectl(
            "delete", kind, *WEBHOOK_CONFIGURATIONS, "--ignore-not-found", check=False
        )


def _cohorts() -> set[str]:
    out = cluster_mod.kubectl("get", "cohorts.quotree.io", "-o", "name", check=False)
    return set(out.stdout.split()) if out.returncode == 0 else set()


@pytest.fixture(scope="module", autouse=True)
def _module_hygiene(cluster: ModuleType) -> Iterator[None]:
    """Modules share one cluster: each starts clean and leaves nothing that acts or holds.

    Before: no quotree webhook configurations (one left by a crashed run points at a dead
    server and refuses every pod). After the module (its operators are stopped by then,
    autouse fixtures are torn down last): the webhook configurations and the Cohorts the
    module created are deleted (namespaces go with the tests that made them), without the
    operator's in-use finalizer, which no stopped operator would take off.
    """
    _delete_webhook_configurations()
    before = _cohorts()
    yield
    _delete_webhook_configurations()
    made = sorted(_cohorts() - before)
    if made:
        for cohort in made:
            without_in_use(cohort)
        cluster_mod.kubectl("delete", *made, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture
def namespace(cluster: ModuleType, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own (default ServiceAccount ready); deleted afterwards."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")
    name = f"e2e-{base[:40].rstrip('-')}-{uuid.uuid4().hex[:6]}"
    cluster_mod.kubectl("create", "namespace", name)
    cluster_mod.wait_until(
        lambda: (
            cluster_mod.kubectl(
                "-n", name, "get", "serviceaccount", "default", check=False
            ).returncode
            == 0
        ),
        timeout=60,
        what=f"the default ServiceAccount in namespace {name}",
    )
    try:
        yield name
    finally:
        cluster_mod.kubectl("delete", "namespace", name, "--wait=false", check=False)
