"""Kopf admission handlers: read the request, ask `decisions`, answer. Registered at import.

The entry point (quotree_main) imports this module when the webhooks are on; Kopf
serves each handler at https://HOST:PORT/<handler id> (ids in `configurations`). What
the handlers read is one `WebhookState` (settings.py) on Kopf's memo. Every handler is
async so that it reads the engine on the event loop, between the
operator's own updates, never while one is half done. None of them changes
the engine: the operator learns of accepted objects by watching them, so a
dry-run request gets the same answer and changes nothing.

A denial is `kopf.AdmissionError` with one line for people; any other
failure is logged with its traceback here and answered with a short
message, so a user never sees a traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from quotree import Engine, MemberConfig
from quotree.groups import job_facts
from quotree_webhooks import decisions
from quotree_webhooks.configurations import (
    COHORTS_VALIDATE,
    ELASTICQUOTAS_VALIDATE,
    NAMESPACES_VALIDATE,
    PODS_MUTATE,
    PODS_VALIDATE,
)
from quotree_webhooks.pod_groups import GroupLookup, WithJob, job_unknown
from quotree_webhooks.settings import WebhookApi, WebhookState, state_from_memo

__all__ = [
    "NAMESPACE_CONTROLLER",
    "mutate_pod",
    "validate_cohort",
    "validate_elasticquota",
    "validate_namespace",
    "validate_pod_update",
]

logger = logging.getLogger("quotree.webhooks")

#: Who deletes a namespace's objects when the namespace is deleted.
NAMESPACE_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
DENIED = 403
#: Seconds the pod CREATE review waits to read a Job the operator has not seen yet (the
#: API server's webhook timeout is 10 s).
JOB_READ_TIMEOUT = 3.0


class _NotReady(Exception):
    pass


def _state(memo: object) -> WebhookState:
    """The webhooks' state, or _NotReady when the entry point has not made it yet.

    The entry point makes it after the operator has loaded the whole tree (Kopf starts
    the webhook server after the start-up handlers); answers from a partial tree would
    be wrong, so a request without it is refused with "retry".
    """
    state = state_from_memo(memo)
    if state is None:
        raise _NotReady
    return state


def _plain(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if obj is None else dict(obj)


async def _guard(what: str, call: Any) -> Any:
    """Run one decision; turn anything unexpected into a clean denial."""
    try:
        return await call
    except kopf.AdmissionError:
        raise
    except _NotReady:
        raise kopf.AdmissionError(
            f"{what}: quotree is starting and has not loaded the quota tree yet; "
            "retry in a few seconds",
            code=503,
        ) from None
    except Exception as exc:
        logger.exception("webhooks: %s: unexpected error", what)
        raise kopf.AdmissionError(
            f"{what}: quotree could not decide ({type(exc).__name__}); "
            "see the quotree operator's log",
            code=500,
        ) from None


async def _namespace_deleting(state: WebhookState, namespace: str, username: str) -> bool:
    """Rule 7's exception: is the ElasticQuota's namespace being deleted?

    Asked of the API (the Namespace's deletionTimestamp); if the API cannot
    tell, a request from the namespace controller counts as a yes, since it
    only deletes what is in a namespace being deleted.
    """
    if state.api is not None:
        try:
            return await state.api.namespace_deleting(namespace)
        except Exception as exc:
            logger.warning("webhooks: cannot read namespace %s: %s", namespace, exc)
    return username == NAMESPACE_CONTROLLER


async def _children_leaving(
    api: WebhookApi, engine: Engine, old: Mapping[str, Any] | None, state: WebhookState
) -> set[str]:
    """Rule 7's children that do not count: those of a Cohort being deleted that the API
    shows being deleted or gone (the tree hears of a deletion a moment after it happens,
    and `kubectl delete -f` of a whole tree deletes the children just before their Cohort).
    A child the API cannot answer for counts."""
    children = decisions.cohort_children(engine, old, state.recently_allowed)

    async def leaving(child: MemberConfig) -> bool:
        try:
            return await api.member_leaving(child.kind, child.namespace, child.name)
        except Exception as exc:
            logger.warning("webhooks: cannot read %s: %s", child.describe(), exc)
            return False

    answers = await asyncio.gather(*(leaving(child) for child in children))
    return {child.name for child, gone in zip(children, answers, strict=True) if gone}


async def _validate_quota_object(
    operation: str,
    *,
    new: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None,
    userinfo: Mapping[str, Any],
    warnings: list[str],
    memo: object,
    dry_run: bool = False,
) -> None:
    state = _state(memo)
    engine = state.engine
    new_body, old_body = _plain(new), _plain(old)
    namespace_deleting = False
    if operation == "DELETE" and old_body is not None:
        kind, name, namespace = decisions.member_identity(old_body)
        if kind == "ElasticQuota" and namespace and engine.admitted_count(name) > 0:
            username = str(userinfo.get("username", ""))
            namespace_deleting = await _namespace_deleting(state, namespace, username)
    leaving: set[str] = set()
    if operation == "DELETE" and state.api is not None:
        leaving = await _children_leaving(state.api, engine, old_body, state)
    verdict = decisions.review_member(
        engine,
        operation,
        new_body,
        old_body,
        namespace_deleting=namespace_deleting,
        leaving=leaving,
        recent=state.recently_allowed,
        dry_run=dry_run,
    )
    warnings.extend(verdict.warnings)
    if not verdict.allowed:
        raise kopf.AdmissionError(verdict.message, code=DENIED)


def _what(body: Mapping[str, Any], operation: str | None) -> str:
    kind, name, _ = decisions.member_identity(body)
    return f"{kind} {name or '(no name)'} ({(operation or '?').lower()})"


async def _validate(kwargs: Mapping[str, Any]) -> None:
    operation = str(kwargs.get("operation") or "")
    await _guard(
        _what(kwargs["body"], operation),
        _validate_quota_object(
            operation,
            new=kwargs.get("new"),
            old=kwargs.get("old"),
            userinfo=kwargs.get("userinfo") or {},
            warnings=kwargs["warnings"],
            memo=kwargs.get("memo"),
            dry_run=bool(kwargs.get("dryrun")),
        ),
    )


@kopf.on.validate(
    "quotree.io",
    "v1alpha1",
    "cohorts",
    id=COHORTS_VALIDATE,
    operations=["CREATE", "UPDATE", "DELETE"],
)
async def validate_cohort(**kwargs: Any) -> None:
    """Configuration rules for a Cohort (docs/webhooks.md); dry-run answered the same."""
    await _validate(kwargs)


@kopf.on.validate(
    "quotree.io",
    "v1alpha1",
    "elasticquotas",
    id=ELASTICQUOTAS_VALIDATE,
    operations=["CREATE", "UPDATE", "DELETE"],
)
async def validate_elasticquota(**kwargs: Any) -> None:
    """Configuration rules for an ElasticQuota (docs/webhooks.md); dry-run answered the same."""
    await _validate(kwargs)


async def _mutate(body: Mapping[str, Any], patch: Any, memo: object) -> None:
    namespace = str((body.get("metadata") or {}).get("namespace") or "")
    if not namespace:
        return  # the API server fills it in before admission; nothing to decide without it
    state = _state(memo)
    never = state.settings.never_gated
    groups = await _groups_for(state, body, namespace)
    mutation = decisions.review_pod_create(state.engine, body, namespace, never, groups)
    if mutation.denied is not None:
        raise kopf.AdmissionError(mutation.denied, code=DENIED)
    for key, value in mutation.labels.items():
        patch.metadata.labels[key] = value
    for key, note in mutation.annotations.items():
        patch.metadata.annotations[key] = note
    if mutation.gates is not None:
        patch.spec["schedulingGates"] = mutation.gates


async def _groups_for(state: WebhookState, pod: Mapping[str, Any], namespace: str) -> GroupLookup:
    """The Jobs and groups the operator knows; with the pod's own Job read from the API
    when the operator's watch has not shown it yet (so that every pod of a Job gets its
    group, whichever comes first). A Job that cannot be read is left to the operator,
    which groups the pod by its owner once it sees the Job."""
    job = job_unknown(state.groups, pod, namespace)
    if job is None or state.api is None:
        return state.groups
    try:
        async with asyncio.timeout(JOB_READ_TIMEOUT):
            body = await state.api.read_job(namespace, job)
    except Exception as exc:
        logger.warning("webhooks: cannot read Job %s/%s: %s", namespace, job, exc)
        return state.groups
    return state.groups if body is None else WithJob(state.groups, job_facts(body))


@kopf.on.mutate("v1", "pods", id=PODS_MUTATE, operations=["CREATE"])
async def mutate_pod(**kwargs: Any) -> None:
    """Charge a new pod to its quota: the quota-name label and the admission gate."""
    body = kwargs["body"]
    await _guard(decisions.describe_pod(body), _mutate(body, kwargs["patch"], kwargs["memo"]))


async def _check_update(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
    userinfo: Mapping[str, Any],
    memo: object,
) -> None:
    if old is None or new is None:
        return
    trusted = _state(memo).trusted_users
    reason = decisions.review_pod_update(old, new, str(userinfo.get("username", "")), trusted)
    if reason is not None:
        raise kopf.AdmissionError(reason, code=DENIED)


@kopf.on.validate("v1", "pods", id=PODS_VALIDATE, operations=["UPDATE"])
async def validate_pod_update(**kwargs: Any) -> None:
    """Only the operator may change a pod's quotree.io/* labels or remove its gate."""
    await _guard(
        decisions.describe_pod(kwargs["body"]),
        _check_update(
            kwargs.get("old"), kwargs.get("new"), kwargs.get("userinfo") or {}, kwargs.get("memo")
        ),
    )


async def _check_namespace(kwargs: Mapping[str, Any]) -> None:
    new = kwargs.get("new") or kwargs.get("body")
    if new is None:
        return
    userinfo = kwargs.get("userinfo") or {}
    trusted = _state(kwargs.get("memo")).trusted_users
    reason = decisions.review_namespace(
        kwargs.get("old"), new, str(userinfo.get("username", "")), trusted
    )
    if reason is not None:
        raise kopf.AdmissionError(reason, code=DENIED)


@kopf.on.validate("v1", "namespaces", id=NAMESPACES_VALIDATE, operations=["CREATE", "UPDATE"])
async def validate_namespace(**kwargs: Any) -> None:
    """Only the operator may set or remove a namespace's quotree.io/managed label."""
    name = (kwargs["body"].get("metadata") or {}).get("name") or "?"
    await _guard(f"Namespace {name}", _check_namespace(kwargs))
