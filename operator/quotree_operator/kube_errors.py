"""How a Kubernetes API call fails, for everything that makes one (no client library here).

`client.py` turns the client's exceptions into `KubeError`; the parts above it catch
`KubeError` and ask `unanswered` whether trying again is worth it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable

__all__ = ["CredentialsError", "KubeError", "refused", "unanswered", "write_event_retrying"]

logger = logging.getLogger("quotree_operator.client")


class KubeError(Exception):
    """A failed API call: `status` is the HTTP status (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def refused(what: str, status: int, body: bytes) -> KubeError:
    """A call the API server answered with `status` (not 2xx), in one line: `<what>:
    <status> <message>`, the message its Status's, else the start of the body."""
    try:
        message = json.loads(body).get("message") or ""
    except (TypeError, ValueError, AttributeError):  # not JSON, or not an object
        message = body[:200].decode(errors="replace")
    return KubeError(status, f"{what}: {status} {message}")


def unanswered(exc: KubeError) -> bool:
    """No answer, or the API server (or its storage) is unavailable: worth trying later."""
    return exc.status in {0, 429} or exc.status >= 500


async def write_event_retrying(
    write: Callable[[], Awaitable[None]],
    *,
    first: float,
    longest: float,
    give_up_after: float,
    still_wanted: Callable[[], bool] = lambda: True,
) -> KubeError | None:
    """Write one Event, trying again with backoff (`first` doubling to `longest` seconds)
    while the API does not answer, for up to `give_up_after` seconds or until
    `still_wanted()` says no. `write` names the Event the same way on every try, so a try
    whose answer was lost meets 409 instead of writing a second Event. Returns the error
    that ended the tries (None: written, or no longer wanted)."""
    give_up = time.monotonic() + give_up_after
    delay = first
    while True:
        try:
            await write()
            return None
        except KubeError as exc:
            if exc.status == 409:
                return None  # an earlier try was written, its answer lost
            if not unanswered(exc) or time.monotonic() + delay > give_up:
                return exc
            logger.debug("%s; trying again in %.1fs", exc, delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, longest)
        if not still_wanted():
            return None


class CredentialsError(KubeError):
    """No usable credentials: no in-cluster ServiceAccount and no usable kubeconfig."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)
