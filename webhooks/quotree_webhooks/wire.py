"""The messages between the operator's process and its webhook process (process.py, worker.py).

Why a module of its own: both ends must frame messages the same way, and neither end
imports the other (the worker must not load Kopf). The channel is one end of a Unix
socket pair the operator made before starting the worker, so nothing else can write to
it; a message is a 4-byte big-endian length and a pickle of a tuple whose first item
names it:

operator -> worker
  ("config", WorkerConfig)            first, once per worker: where to listen, what to read
  ("groups", GroupBook)               the Jobs and pod-group declarations, once per worker
  ("coverage", Coverage)              the engine's namespace -> quota coverage, when it changed
  ("group-changes", jobs, groups)     what changed in the GroupBook since (GroupBook.apply)
  ("reload-certs",)                   the serving certificate files were renewed
  ("admit", bool)                     the operator admits at creation now (it leads)
  ("leader", "host:port" | None)      where the replica that admits at creation answers
  ("admitted", [(id, PodMutation | None)])
                                      the engine's decisions on the pods asked (None:
                                      asked too late, or it failed: the pod is gated)

worker -> operator
  ("serving",)                        the HTTPS listener is up
  ("answers", [(webhook, s, error)])  requests answered since the last batch (the metrics)
  ("admit-at-create", [(id, namespace, pod, until)])
                                      pod CREATEs it would gate, for the leader's engine to
                                      decide and admit if they fit (no answer after
                                      `until`, on the machine's monotonic clock)
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_MESSAGE", "WorkerConfig", "read_message", "send_message", "write_message"]

_LENGTH = struct.Struct(">I")
#: A message larger than this is a broken channel, not a message.
MAX_MESSAGE = 1 << 30


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """What the webhook process needs to know besides the coverage."""

    host: str
    port: int
    #: The serving certificate and key (tls.Pki's cert and key).
    certfile: str
    keyfile: str
    #: WebhookSettings.never_gated.
    never_gated: frozenset[str]
    #: The operator's own listener (a Unix socket, abstract when it starts with NUL), which
    #: answers every request the worker does not: the quota-object and pod UPDATE reviews.
    upstream: str
    log_level: str = "INFO"
    #: The webhook CA (tls.Pki's): the leader's certificate, when pod CREATE reviews are
    #: passed to it, is checked against it.
    cafile: str = ""


def send_message(writer: asyncio.StreamWriter, *message: Any) -> None:
    """Queue one message whole (for a caller that cannot wait: see `write_message`)."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    writer.write(_LENGTH.pack(len(data)) + data)


async def write_message(writer: asyncio.StreamWriter, *message: Any) -> None:
    send_message(writer, *message)
    await writer.drain()


async def read_message(reader: asyncio.StreamReader) -> tuple[Any, ...]:
    """The next message; `asyncio.IncompleteReadError` when the other end is gone."""
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    if length > MAX_MESSAGE:
        raise ValueError(f"webhook process channel: a message of {length} bytes")
    message = pickle.loads(await reader.readexactly(length))
    if not isinstance(message, tuple) or not message or not isinstance(message[0], str):
        raise ValueError("webhook process channel: not a message")
    return message
