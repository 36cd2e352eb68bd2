"""Reading the live cluster through `kubectl get -o json` (no API client of our own).

Running kubectl keeps the plugin honest to the user's setup: the same kubeconfig, context,
credentials and exec plugins as every other `kubectl` command. The objects come back as
the API serves them, which is the input the engine's YAML path (`quotree simulate`)
already reads.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from quotree.models import ADMISSION_GATE

__all__ = ["ClusterState", "Kubectl", "PluginError", "live_documents"]

#: Seconds one kubectl call may take.
TIMEOUT = 60.0
COHORTS = "cohorts.quotree.io"
QUOTAS = "elasticquotas.quotree.io"
FLAVORS = "resourceflavors.quotree.io"
#: Kubernetes' own PodGroups (alpha: a cluster may not serve them).
POD_GROUPS = "podgroups.scheduling.k8s.io"
JOBS = "jobs.batch"


class PluginError(Exception):
    """Something the user must fix: one line, printed without a traceback."""


@dataclass
class Kubectl:
    """Runs kubectl (`QUOTREE_KUBECTL` or `kubectl` on PATH) with the user's global flags."""

    flags: Sequence[str] = ()
    binary: str = field(default_factory=lambda: os.environ.get("QUOTREE_KUBECTL") or "kubectl")

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [self.binary, *self.flags, *args]
        try:
            return subprocess.run(
                command,
                stdin=subprocess.DEVNULL,  # never wait for a password prompt
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
        except FileNotFoundError:
            raise PluginError(f"cannot run {self.binary}: not found on PATH") from None
        except subprocess.TimeoutExpired:
            raise PluginError(
                f"kubectl {' '.join(args)}: no answer from the cluster in {TIMEOUT:.0f} s"
            ) from None

    def context_namespace(self) -> str:
        """The namespace of the kubeconfig's current context (of `--context` when given), as
        kubectl uses it when `-n` is absent: `default` when the context names none (or there
        is no current context: the next `get` then says what is wrong)."""
        done = self._run(
            "config", "view", "--minify", "-o", "jsonpath={.contexts[0].context.namespace}"
        )
        namespace = done.stdout.strip() if done.returncode == 0 else ""
        return namespace or "default"

    def get_json(self, *args: str) -> dict[str, Any]:
        done = self._run("get", *args, "-o", "json")
        if done.returncode != 0:
            lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
            # kubectl repeats connection errors once per retry; its last line says it best.
            message = lines[-1] if lines else f"exit code {done.returncode}"
            message = message.removeprefix("error: ").removeprefix("Error from server ")
            if message == "EOF":  # kubectl wanted to prompt for a user name or password
                message = "the kubeconfig has no credentials for this cluster"
            raise PluginError(f"kubectl get {' '.join(args)}: {message}")
        try:
            out = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise PluginError(f"kubectl get {' '.join(args)}: the answer is not JSON") from None
        if not isinstance(out, dict):
            raise PluginError(f"kubectl get {' '.join(args)}: unexpected answer")
        return out


@dataclass
class ClusterState:
    """The objects quotree reads: Nodes, Cohorts, ElasticQuotas, Pods, ResourceFlavors and
    Jobs (a Job's pods form a pod group) and Kubernetes' PodGroups, as the API serves them."""

    nodes: list[dict[str, Any]]
    cohorts: list[dict[str, Any]]
    quotas: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    flavors: list[dict[str, Any]] = field(default_factory=list)
    pod_groups: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, kubectl: Kubectl) -> ClusterState:
        """One `kubectl get` for all six kinds (a consistent-enough snapshot, one round trip)."""
        kinds = f"nodes,{FLAVORS},{COHORTS},{QUOTAS},pods,{JOBS}"
        items = kubectl.get_json(kinds, "--all-namespaces").get("items") or []
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for item in items:
            if isinstance(item, dict):
                by_kind.setdefault(str(item.get("kind")), []).append(item)
        return cls(
            nodes=by_kind.get("Node", []),
            cohorts=by_kind.get("Cohort", []),
            quotas=by_kind.get("ElasticQuota", []),
            pods=by_kind.get("Pod", []),
            flavors=by_kind.get("ResourceFlavor", []),
            pod_groups=_pod_groups(kubectl) if _names_a_pod_group(by_kind.get("Pod", [])) else [],
            jobs=by_kind.get("Job", []),
        )


def _names_a_pod_group(pods: list[dict[str, Any]]) -> bool:
    return any((p.get("spec") or {}).get("schedulingGroup") for p in pods)


def _pod_groups(kubectl: Kubectl) -> list[dict[str, Any]]:
    """The PodGroups, asked for only when a pod names one; none where they cannot be read
    (the pods that name one then read as waiting for it)."""
    try:
        items = kubectl.get_json(POD_GROUPS, "--all-namespaces").get("items") or []
    except PluginError:
        return []
    return [item for item in items if isinstance(item, dict)]


def _gated(pod: Mapping[str, Any]) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or ()
    return any(gate.get("name") == ADMISSION_GATE for gate in gates)


def live_documents(state: ClusterState) -> list[tuple[str, dict[str, Any]]]:
    """The cluster as `quotree simulate` input (`simulate_documents`).

    Order: ResourceFlavors, nodes, Cohorts, ElasticQuotas, the pods that already hold
    resources, then the waiting (gated) pods, each by creation time: the simulation replays
    arrivals in order, and a waiting pod must not take the place of one that already runs.
    A pod whose gate is already gone was admitted even when it is not bound to a node yet:
    it is given as running, so the simulation does not admit it a second time.
    """
    docs: list[tuple[str, dict[str, Any]]] = []
    for kind, objects in (
        ("ResourceFlavor", state.flavors),
        ("Node", state.nodes),
        ("Cohort", state.cohorts),
    ):
        docs.extend((f"cluster {kind} {o['metadata']['name']}", o) for o in objects)
    for kind, objects in (("ElasticQuota", state.quotas), ("PodGroup", state.pod_groups)):
        docs.extend(
            (f"cluster {kind} {o['metadata'].get('namespace')}/{o['metadata']['name']}", o)
            for o in objects
        )
    pods = sorted(
        state.pods,
        key=lambda p: (
            _gated(p),
            p["metadata"].get("creationTimestamp") or "",
            p["metadata"]["name"],
        ),
    )
    for body in pods:
        spec = body.get("spec") or {}
        pod = body
        if not _gated(body) and not spec.get("nodeName"):
            pod = {**body, "spec": {**spec, "nodeName": "(admitted, not bound yet)"}}
        origin = f"cluster Pod {pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
        docs.append((origin, pod))
    return docs
