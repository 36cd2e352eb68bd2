"""crds/quotree.yaml is generated from the engine's spec models and must not drift from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from quotree.flavor_spec import ResourceFlavorSpec
from quotree.models import CohortSpec, ElasticQuotaSpec, PreemptionSpec
from quotree_operator import crds

CRD_FILE = Path(__file__).resolve().parents[2] / "crds" / "quotree.yaml"


def _on_disk() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(CRD_FILE.read_text()) if doc]


def test_file_is_generated_from_the_models() -> None:
    assert CRD_FILE.read_text() == crds.render(), (
        "crds/quotree.yaml is stale: run "
        "`PYTHONPATH=operator .venv/bin/python -m quotree_operator.crds > crds/quotree.yaml`"
    )


def _spec(kind: str) -> dict[str, Any]:
    (doc,) = [d for d in _on_disk() if d["spec"]["names"]["kind"] == kind]
    (version,) = doc["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


@pytest.mark.parametrize(
    ("kind", "model"), [("Cohort", CohortSpec), ("ElasticQuota", ElasticQuotaSpec)]
)
def test_spec_fields_match_the_model(kind: str, model: type) -> None:
    assert set(_spec(kind)["properties"]) == set(model.model_fields)


def test_preemption_enum_matches_the_model() -> None:
    preemption = _spec("ElasticQuota")["properties"]["preemption"]
    field = PreemptionSpec.model_fields["withinQuota"]
    assert preemption["properties"]["withinQuota"]["enum"] == ["LowerPriority", "Never"]
    assert preemption["properties"]["withinQuota"]["default"] == field.default


def test_names_scope_status_and_columns() -> None:
    docs = {
        d["spec"]["names"]["kind"]: d["spec"]
        for d in _on_disk()
        if d["spec"]["names"]["kind"] != "ResourceFlavor"
    }
    assert docs["Cohort"]["scope"] == "Cluster"
    assert docs["Cohort"]["names"]["shortNames"] == ["coh"]
    assert docs["ElasticQuota"]["scope"] == "Namespaced"
    assert docs["ElasticQuota"]["names"]["shortNames"] == ["eq", "eqs"]
    for spec in docs.values():
        (version,) = spec["versions"]
        assert version["name"] == "v1alpha1"
        # No status subresource: status and annotations are one PATCH of the object.
        assert "subresources" not in version
        columns = [c["name"] for c in version["additionalPrinterColumns"]]
        assert columns[:3] == ["Parent", "Tree", "Used/Runtime/Min/Max"]


def test_resource_lists_are_quantities_with_cel_rules() -> None:
    spec = _spec("ElasticQuota")
    for name in ("min", "max", "sharedWeight", "lendingLimit", "borrowingLimit"):
        value = spec["properties"][name]["additionalProperties"]
        assert value["x-kubernetes-int-or-string"] is True
        assert "compareTo" in value["x-kubernetes-validations"][0]["rule"]
    (min_max,) = spec["x-kubernetes-validations"]
    assert "min must not be above max" in min_max["message"]
    # kubectl users read this before any webhook runs: resource and amounts, compared as
    # quantities (the CEL quantity library), e.g. "min cpu 8 is above max 4".
    assert (
        "quantity(string(self.min[r])).compareTo(quantity(string(self.max[r])))"
        in (min_max["rule"])
    )
    assert min_max["messageExpression"].endswith(
        ".map(k, 'min ' + k + ' ' + string(self.min[k]) + ' is above max ' + "
        "string(self.max[k]))[0]"
    )


def test_resource_flavor_crd() -> None:
    (doc,) = [d for d in _on_disk() if d["spec"]["names"]["kind"] == "ResourceFlavor"]
    spec = doc["spec"]
    assert spec["scope"] == "Cluster"
    assert spec["names"]["shortNames"] == ["rf"]
    (version,) = spec["versions"]
    schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(schema["properties"]) == set(ResourceFlavorSpec.model_fields)
    assert schema["properties"]["nodeLabels"]["additionalProperties"]["type"] == "string"
    assert schema["properties"]["gpuMemoryPerGPU"]["x-kubernetes-int-or-string"] is True


@pytest.mark.parametrize("kind", ["Cohort", "ElasticQuota"])
def test_flavors_are_an_ordered_list_keyed_by_name(kind: str) -> None:
    flavors = _spec(kind)["properties"]["flavors"]
    assert flavors["type"] == "array"
    assert flavors["x-kubernetes-list-type"] == "map"
    assert flavors["x-kubernetes-list-map-keys"] == ["name"]
    item = flavors["items"]
    assert item["required"] == ["name"]
    for name in ("min", "max", "sharedWeight", "lendingLimit", "borrowingLimit"):
        assert item["properties"][name]["additionalProperties"]["x-kubernetes-int-or-string"]
