"""Admission at creation, the operator's side: only the replica that decides admits, and
never two replicas at once.

The pod CREATE webhook of the leader asks `CreateAdmitter` (webhooks'
admit_at_create.Admit) whether a new pod fits now; the engine decides and reserves its
room before the answer goes out (`Engine.created`, quotree/create_admission.py). The
pod's arrival in the watch takes the reservation's place (inputs.py); one that does not
arrive within `reserve_for` seconds (a later webhook refused it, the client gave up)
gives its room back (`expire`, called by the decision loop every tick).

Who admits: the Lease holder only (`Signals.leading`, checked when the answer is made,
so a replica that lost the Lease a moment ago gates). A replica that takes the Lease over
does not know what the former holder admitted at creation whose pods the cluster does not
show yet; the former holder stopped acting two thirds of its Lease's duration after its
last renewal (leader.py), and those pods show up within `reserve_for` seconds of its
answer or never. So the new holder neither admits at creation nor removes a gate until
then (`took_lead`, `deciding`): two engines never count the same room as free.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from quotree.create_admission import CreateAdmission
from quotree.engine import Engine
from quotree.models import ConfigError
from quotree.podfacts import pod_facts
from quotree_operator.inputs import Inputs

__all__ = ["RESERVATION_NAME", "CreateAdmitter"]

logger = logging.getLogger("quotree.operator")

#: The name a reserved pod goes by in the engine until the cluster shows it ("#" is in no
#: pod's name; a `generateName` pod has none yet).
RESERVATION_NAME = "#admitted-at-create-{token}"


class CreateAdmitter:
    """See module docstring."""

    def __init__(
        self,
        engine: Engine,
        inputs: Inputs,
        *,
        enabled: bool,
        reserve_for: float,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.inputs = inputs
        self.signals = inputs.signals
        #: QUOTREE_ADMIT_AT_CREATE: off, every pod is gated.
        self.enabled = enabled
        #: QUOTREE_ADMIT_RESERVATION_SECONDS: how long a reservation waits for its pod.
        self.reserve_for = reserve_for
        self.clock = clock
        self.wall = wall
        #: `clock` time before which this replica, new leader, neither admits at creation
        #: nor decides (`took_lead`).
        self.hold_until = 0.0
        self.admitted = 0  # pods admitted at creation so far
        self.released = 0  # reservations released unused so far

    def active(self) -> bool:
        """This replica admits at creation now."""
        return self.enabled and self.signals.leading and self.clock() >= self.hold_until

    def deciding(self) -> bool:
        """This replica, leading, may decide (it is past `took_lead`'s hold)."""
        return self.clock() >= self.hold_until

    def took_lead(self, previous_renew: float | None, previous_duration: float) -> None:
        """This replica took the Lease, last renewed by its former holder at
        `previous_renew` (wall seconds; None: nobody held it) for `previous_duration`
        seconds (module docstring)."""
        self.hold_until = 0.0
        if not self.enabled or previous_renew is None:
            return
        until = previous_renew + previous_duration * 2 / 3 + self.reserve_for
        wait = until - self.wall()
        if wait > 0:
            self.hold_until = self.clock() + wait
            logger.info(
                "admission at creation: the former leader's reservations may still be "
                "under way; admitting and deciding from %.1fs on",
                wait,
            )

    def __call__(self, pod: Mapping[str, Any]) -> CreateAdmission | None:
        """Admit the new pod (as it would be created, gated) if it fits now."""
        if not self.active():
            return None
        token = secrets.token_hex(12)
        metadata = {**pod["metadata"], "name": RESERVATION_NAME.format(token=token)}
        metadata.pop("creationTimestamp", None)
        try:
            facts = pod_facts({**pod, "metadata": metadata}, default_created=self.wall())
        except ConfigError:
            return None  # a bad quantity: gated, and the operator says why when it arrives
        admission = self.engine.created.admit(facts, token, self.clock() + self.reserve_for)
        if admission is not None:
            self.admitted += 1
            self.inputs.dirty.add(admission.quota)
            self.signals.status_dirty.set()
        return admission

    def expire(self) -> None:
        """Give back the room of reservations whose pods did not show up in time."""
        for admission in self.engine.created.expire(self.clock()):
            self.released += 1
            logger.info(
                "admission at creation: no pod with reservation %s of ElasticQuota %s "
                "showed up within %.0fs; its room is given back",
                admission.token,
                admission.quota,
                self.reserve_for,
            )
            self.inputs.dirty.add(admission.quota)
            self.signals.changed()
