"""Which documents of a manifest set the simulator reads, converts or skips.

`quotree simulate` takes whatever a manifest set holds (`helm template`, a GitOps
folder): the kinds it reads (`quotree.schemas.KINDS`, each of its own API group) are
checked and read; the quota objects of Kueue, capacity scheduling and Koordinator are
converted (`quotree.importer`); every other kind is skipped, and the skipped kinds are
named once in a note. A document must still be a Kubernetes object as kubectl sees one:
without `apiVersion`, `kind` or `metadata.name` it is refused with one line, and a kind
the simulator reads written in another version of its own group is refused too (a
`quotree.io/v1beta1` ElasticQuota is a mistake, not another product's object).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from enum import Enum
from typing import Any

from quotree.importer import importable
from quotree.manifests import InputError
from quotree.models import GROUP, VERSION
from quotree.native_groups import POD_GROUP_API
from quotree.schemas import KINDS, check_document, describe

__all__ = ["API_VERSIONS", "Handling", "Skipped", "classify"]

API_VERSION = f"{GROUP}/{VERSION}"

#: The apiVersion of each kind the simulator reads.
API_VERSIONS = {
    "Cohort": API_VERSION,
    "ElasticQuota": API_VERSION,
    "ResourceFlavor": API_VERSION,
    "Namespace": "v1",
    "Node": "v1",
    "Pod": "v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "PodGroup": POD_GROUP_API,
    "Workload": POD_GROUP_API,
}


class Handling(Enum):
    """What becomes of a document."""

    READ = "read"  # a kind the simulator reads, its shape checked
    CONVERT = "convert"  # another quota system's object (quotree.importer)
    SKIP = "skip"  # a kind the simulator has no use for


def _group(api_version: str) -> str:
    """The API group of an apiVersion ('' for the core group's `v1`)."""
    return api_version.rpartition("/")[0]


def _refuse(origin: str, doc: Mapping[str, Any], problem: str) -> InputError:
    return InputError(f"{origin}: {describe(doc)}: {problem}")


def classify(origin: str, doc: Mapping[str, Any]) -> Handling:
    """How the simulator takes `doc`; InputError (one line) for what kubectl would refuse
    or a kind it reads whose shape is wrong."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise _refuse(origin, doc, "apiVersion not set (every object needs one, as for kubectl)")
    if not isinstance(kind, str) or not kind:
        raise _refuse(origin, doc, "kind not set (every object needs one, as for kubectl)")
    metadata = doc.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    # metadata that is not an object at all: the shape check below says so.
    if (metadata is None or isinstance(metadata, Mapping)) and (
        not isinstance(name, str) or not name
    ):
        raise _refuse(origin, doc, "metadata.name not set (every object needs one, as for kubectl)")
    want = API_VERSIONS.get(kind)
    if want is None or _group(api_version) != _group(want):
        return Handling.CONVERT if importable(doc) else Handling.SKIP
    if api_version != want:
        raise _refuse(origin, doc, f"apiVersion must be {want}, not {api_version!r:.40}")
    problems = check_document(doc)
    if problems:
        raise _refuse(origin, doc, "; ".join(problems))
    return Handling.READ


class Skipped:
    """The documents skipped, by kind, for the one note that names them."""

    def __init__(self) -> None:
        self._kinds: Counter[str] = Counter()

    def add(self, doc: Mapping[str, Any]) -> None:
        kind, api_version = str(doc.get("kind")), str(doc.get("apiVersion"))
        # A kind the simulator reads, of another group (a Volcano Job), says which it is.
        self._kinds[f"{kind} ({api_version})" if kind in KINDS else kind] += 1

    def note(self) -> str | None:
        """One line naming what was skipped, or None when nothing was."""
        if not self._kinds:
            return None
        count = sum(self._kinds.values())
        kinds = ", ".join(
            f"{kind} x{n}" if n > 1 else kind for kind, n in sorted(self._kinds.items())
        )
        objects = "object" if count == 1 else "objects"
        return f"skipped {count} {objects} of kinds the simulator does not read: {kinds}"
