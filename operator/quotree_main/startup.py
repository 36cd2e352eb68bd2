"""Why the operator cannot start, in one line that says what is missing and how to fix it.

The start-up handler (quotree_main.start) connects and loads the cluster; a failure there
becomes a `kopf.TemporaryError` with one of these lines, so Kopf logs it on one line
("Activity 'start' failed temporarily: ...") and tries again after `RETRY_DELAY` seconds,
with no traceback. Until start-up succeeds, Kopf does not open its health endpoint
(`--liveness`): the Deployment's probes see a replica that is not ready.
"""

from __future__ import annotations

from quotree_operator.kube_errors import CredentialsError, KubeError

__all__ = ["RETRY_DELAY", "explain"]

#: Seconds between start-up attempts.
RETRY_DELAY = 5.0

_PREFIX = "quotree cannot start: "


def explain(exc: KubeError) -> str:
    """One line for a failed start-up call (`KubeError` from the client layer)."""
    detail = " ".join(str(exc).split())
    if isinstance(exc, CredentialsError):
        return (
            f"{_PREFIX}no usable Kubernetes credentials ({detail}); set KUBECONFIG to a "
            "kubeconfig with a current context (hack/sa-kubeconfig.sh writes one for the "
            "quotree ServiceAccount), or run it in a pod with a ServiceAccount"
        )
    if exc.status == 0:
        return (
            f"{_PREFIX}the API server does not answer ({detail}); check that it runs and "
            "that the kubeconfig's server address is right; retrying"
        )
    if exc.status == 401:
        return (
            f"{_PREFIX}the API server refused the credentials ({detail}); the token or "
            "client certificate is invalid or expired: make a new one (hack/sa-kubeconfig.sh)"
        )
    if exc.status == 403:
        return (
            f"{_PREFIX}RBAC denies a call it needs ({detail}); give its ServiceAccount the "
            "permissions in manifests/access (kubectl apply -k manifests/access); retrying"
        )
    if exc.status == 404 and any(k in detail for k in ("Cohort", "ElasticQuota", "ResourceFlavor")):
        return (
            f"{_PREFIX}the quotree CRDs are not installed ({detail}); install them with "
            "kubectl apply -f crds/ (kubectl apply -k manifests/ includes them); retrying"
        )
    return f"{_PREFIX}{detail}; retrying"
