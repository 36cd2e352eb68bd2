"""quotree: the quota engine, shared by the operator, the webhooks and `quotree simulate`.

Pure: no Kubernetes client, no network, no clock. See docs/design/map.md for the map.
"""

from quotree.delete_rules import check_delete
from quotree.engine import Decisions, Engine, Eviction, PodState, Resolution
from quotree.models import (
    ADMISSION_GATE,
    PREEMPTIBLE_LABEL,
    QUOTA_LABEL,
    STANDING_LABEL,
    CohortSpec,
    ConfigError,
    ElasticQuotaSpec,
    MemberConfig,
    parse_member,
)
from quotree.podfacts import PodFacts, pod_facts
from quotree.quantity import UNLIMITED, QuantityError, format_quantity, parse_quantity
from quotree.rules import Verdict, check_apply, check_apply_forest
from quotree.runtime import QuotaTree

__all__ = [
    "ADMISSION_GATE",
    "PREEMPTIBLE_LABEL",
    "QUOTA_LABEL",
    "STANDING_LABEL",
    "UNLIMITED",
    "CohortSpec",
    "ConfigError",
    "Decisions",
    "ElasticQuotaSpec",
    "Engine",
    "Eviction",
    "MemberConfig",
    "PodFacts",
    "PodState",
    "QuantityError",
    "QuotaTree",
    "Resolution",
    "Verdict",
    "check_apply",
    "check_apply_forest",
    "check_delete",
    "format_quantity",
    "parse_member",
    "parse_quantity",
    "pod_facts",
]
