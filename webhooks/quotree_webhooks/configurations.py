"""The Mutating- and ValidatingWebhookConfiguration that quotree writes, as plain dicts.

quotree writes these itself rather than through Kopf's
`settings.admission.managed`, because Kopf's managed configurations have a
fixed 30 s timeout, no `namespaceSelector` and no `matchConditions`, and
are rewritten whenever Kopf rescans the cluster. Choices (docs/webhooks.md):

- pods, CREATE (mutating) and UPDATE (validating): `failurePolicy: Fail`,
  a 5 s timeout, and a `namespaceSelector`: only namespaces labelled
  `quotree.io/managed: "true"` (the operator labels those a quota covers), and
  never the never-gated ones (kube-system, kube-public, kube-node-lease, the
  operator's namespace and the configured system namespaces); so a stopped
  operator holds up only the namespaces it manages, never its own restart or
  the cluster's own pods. The
  UPDATE webhook is only called when a `quotree.io/*` label changes or the
  `quotree.io/admission` gate goes away, and never for the operator's own
  requests (`matchConditions`).
- pods, CREATE, in every other namespace but the never-gated ones
  (`pods-mutate-unlabelled`, same handler): `failurePolicy: Ignore` and a 2 s
  timeout. A namespace a quota covers is labelled a moment after the operator
  learns of it (a new quota, or a namespace a quota lists that is created
  later, with its pods in the same `kubectl apply`); pods created in that moment
  are gated all the same, since the handler asks the engine which quota covers
  the namespace, not the label. While the operator is down these namespaces are
  not held up (Ignore): nothing was gated there before it went down.
  Its validating twin (`pods-validate-unlabelled`, same UPDATE handler, same
  conditions, `Ignore`, 2 s) keeps anyone but the operator from removing the gate
  or changing `quotree.io/*` labels of such a pod in that moment.
- Cohorts and ElasticQuotas, CREATE/UPDATE/DELETE: `failurePolicy: Fail`
  (while the operator is down the tree cannot change, rather than change
  unchecked), 5 s timeout, not called for updates that leave `spec` alone
  (finalizers, the operator's annotations).
- namespaces, CREATE/UPDATE: only called when the `quotree.io/managed` label
  is set, changed or removed by someone other than the operator, who is then
  refused (`failurePolicy: Fail`: while the operator is down nobody changes it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from quotree import ADMISSION_GATE
from quotree.models import MANAGED_LABEL

__all__ = [
    "COHORTS_VALIDATE",
    "CONFIGURATION_NAME",
    "ELASTICQUOTAS_VALIDATE",
    "LOCAL_CONFIGURATION_NAME",
    "METRIC_WEBHOOKS",
    "NAMESPACES_VALIDATE",
    "PODS_MUTATE",
    "PODS_MUTATE_UNLABELLED",
    "PODS_VALIDATE",
    "PODS_VALIDATE_UNLABELLED",
    "TIMEOUT_SECONDS",
    "UNLABELLED_TIMEOUT_SECONDS",
    "build_configurations",
]

#: Name of both configuration objects of an installed operator (webhooks behind a Service).
CONFIGURATION_NAME = "quotree.io"
#: Name of both configuration objects of a local run (webhooks at a URL, e.g. `make run`):
#: its own, so that installing quotree on the same cluster (`kubectl apply -k manifests/`,
#: Helm) creates its Service-based configurations next to them instead of merging a
#: Service into a URL's webhook, which the API server refuses.
LOCAL_CONFIGURATION_NAME = "local.quotree.io"
#: Handler ids; Kopf serves each at https://HOST:PORT/<id>.
PODS_MUTATE = "pods-mutate"
#: The second mutating webhook (unlabelled namespaces); served by the PODS_MUTATE handler.
PODS_MUTATE_UNLABELLED = "pods-mutate-unlabelled"
PODS_VALIDATE = "pods-validate"
#: The second validating pod webhook (unlabelled namespaces); served by PODS_VALIDATE.
PODS_VALIDATE_UNLABELLED = "pods-validate-unlabelled"
COHORTS_VALIDATE = "cohorts-validate"
ELASTICQUOTAS_VALIDATE = "elasticquotas-validate"
NAMESPACES_VALIDATE = "namespaces-validate"
TIMEOUT_SECONDS = 5
#: The `webhook` label of the metrics; any other path counts as "other".
METRIC_WEBHOOKS = frozenset({PODS_MUTATE, PODS_VALIDATE, COHORTS_VALIDATE, ELASTICQUOTAS_VALIDATE})
#: The unlabelled namespaces' pod webhook: short, since a slow answer there is ignored.
UNLABELLED_TIMEOUT_SECONDS = 2

_SPEC_CHANGED = (
    "request.operation != 'UPDATE' || has(object.spec) != has(oldObject.spec)"
    " || (has(object.spec) && object.spec != oldObject.spec)"
)
_QUOTREE_LABEL_CHANGED = (
    "(has(object.metadata.labels) && object.metadata.labels.exists(k, k.startsWith('quotree.io/')"
    " && (!has(oldObject.metadata.labels) || !(k in oldObject.metadata.labels)"
    " || oldObject.metadata.labels[k] != object.metadata.labels[k])))"
    " || (has(oldObject.metadata.labels) && oldObject.metadata.labels.exists(k,"
    " k.startsWith('quotree.io/')"
    " && (!has(object.metadata.labels) || !(k in object.metadata.labels))))"
)
_MANAGED_LABEL_CHANGED = (
    f"(has(object.metadata.labels) && '{MANAGED_LABEL}' in object.metadata.labels"
    f" ? object.metadata.labels['{MANAGED_LABEL}'] : '')"
    " != (request.operation == 'UPDATE' && has(oldObject.metadata.labels)"
    f" && '{MANAGED_LABEL}' in oldObject.metadata.labels"
    f" ? oldObject.metadata.labels['{MANAGED_LABEL}'] : '')"
)
_GATE_REMOVED = (
    "has(oldObject.spec.schedulingGates)"
    f" && oldObject.spec.schedulingGates.exists(g, g.name == '{ADMISSION_GATE}')"
    " && !(has(object.spec.schedulingGates)"
    f" && object.spec.schedulingGates.exists(g, g.name == '{ADMISSION_GATE}'))"
)


def _client_config(base: dict[str, Any], handler_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "url" in base:
        out["url"] = f"{base['url'].rstrip('/')}/{handler_id}"
    if "service" in base:
        service = dict(base["service"])
        service["path"] = f"{service.get('path', '').rstrip('/')}/{handler_id}"
        out["service"] = service
    if base.get("caBundle"):
        out["caBundle"] = base["caBundle"]
    return out


def _webhook(
    handler_id: str,
    base: dict[str, Any],
    rule: dict[str, Any],
    *,
    namespace_selector: dict[str, Any] | None = None,
    match_conditions: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    webhook: dict[str, Any] = {
        "name": f"{handler_id}.{CONFIGURATION_NAME}",
        "clientConfig": _client_config(base, handler_id),
        "rules": [rule],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_SECONDS,
        "admissionReviewVersions": ["v1"],
    }
    if namespace_selector is not None:
        webhook["namespaceSelector"] = namespace_selector
    if match_conditions:
        webhook["matchConditions"] = match_conditions
    return webhook


def build_configurations(
    client_config: dict[str, Any],
    *,
    never_gated: Iterable[str],
    operator_username: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(MutatingWebhookConfiguration, ValidatingWebhookConfiguration) for `client_config`.

    `client_config` is `{"url": ...}` or `{"service": {...}}`, plus `caBundle`; the pod
    webhooks are never called for the `never_gated` namespaces. Both objects are named
    CONFIGURATION_NAME for a Service, LOCAL_CONFIGURATION_NAME for a URL.
    """
    name = LOCAL_CONFIGURATION_NAME if "url" in client_config else CONFIGURATION_NAME
    selector = {
        "matchLabels": {MANAGED_LABEL: "true"},
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": sorted(set(never_gated)),
            }
        ],
    }
    pods_create = {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
        "operations": ["CREATE"],
        "scope": "Namespaced",
    }
    pod_conditions = [
        {
            "name": "quotree-owned-change",
            "expression": f"({_QUOTREE_LABEL_CHANGED}) || ({_GATE_REMOVED})",
        }
    ]
    namespace_conditions = [{"name": "managed-label-changed", "expression": _MANAGED_LABEL_CHANGED}]
    if operator_username:
        escaped = operator_username.replace("\\", "\\\\").replace("'", "\\'")
        not_operator = {
            "name": "not-the-operator",
            "expression": f"request.userInfo.username != '{escaped}'",
        }
        pod_conditions.append(not_operator)
        namespace_conditions.append(not_operator)
    unlabelled = {
        "matchExpressions": [
            {"key": MANAGED_LABEL, "operator": "NotIn", "values": ["true"]},
            *selector["matchExpressions"],
        ]
    }
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "quotree"}},
        "webhooks": [
            {
                **_webhook(PODS_MUTATE, client_config, pods_create, namespace_selector=selector),
                "reinvocationPolicy": "Never",
            },
            {
                **_webhook(PODS_MUTATE, client_config, pods_create, namespace_selector=unlabelled),
                "name": f"{PODS_MUTATE_UNLABELLED}.{CONFIGURATION_NAME}",
                "failurePolicy": "Ignore",
                "timeoutSeconds": UNLABELLED_TIMEOUT_SECONDS,
                "reinvocationPolicy": "Never",
            },
        ],
    }
    spec_changed = [{"name": "spec-changed", "expression": _SPEC_CHANGED}]
    member_ops = ["CREATE", "UPDATE", "DELETE"]
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "quotree"}},
        "webhooks": [
            _webhook(
                COHORTS_VALIDATE,
                client_config,
                {
                    "apiGroups": ["quotree.io"],
                    "apiVersions": ["v1alpha1"],
                    "resources": ["cohorts"],
                    "operations": member_ops,
                    "scope": "Cluster",
                },
                match_conditions=spec_changed,
            ),
            _webhook(
                ELASTICQUOTAS_VALIDATE,
                client_config,
                {
                    "apiGroups": ["quotree.io"],
                    "apiVersions": ["v1alpha1"],
                    "resources": ["elasticquotas"],
                    "operations": member_ops,
                    "scope": "Namespaced",
                },
                match_conditions=spec_changed,
            ),
            _webhook(
                PODS_VALIDATE,
                client_config,
                {**pods_create, "operations": ["UPDATE"]},
                namespace_selector=selector,
                match_conditions=pod_conditions,
            ),
            {
                **_webhook(
                    PODS_VALIDATE,
                    client_config,
                    {**pods_create, "operations": ["UPDATE"]},
                    namespace_selector=unlabelled,
                    match_conditions=pod_conditions,
                ),
                "name": f"{PODS_VALIDATE_UNLABELLED}.{CONFIGURATION_NAME}",
                "failurePolicy": "Ignore",
                "timeoutSeconds": UNLABELLED_TIMEOUT_SECONDS,
            },
            _webhook(
                NAMESPACES_VALIDATE,
                client_config,
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["namespaces"],
                    "operations": ["CREATE", "UPDATE"],
                    "scope": "Cluster",
                },
                match_conditions=namespace_conditions,
            ),
        ],
    }
    return mutating, validating
