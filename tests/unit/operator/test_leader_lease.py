"""The leader Lease's state machine (quotree_operator/leader.py) with a fake clock and a
fake API that behaves like the API server's optimistic concurrency (409 on a stale write)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from quotree_operator.kube_errors import KubeError
from quotree_operator.leader import LEASE_NAME, LeaderLease, next_lease
from tests.unit.operator.fake_kube import FakeKube

START = datetime(2026, 11, 22, 7, 0, tzinfo=UTC)
DURATION = 15
NAMESPACE = "quotree-system"


class Clock:
    """One fake time for both the monotonic clock and the wall clock written in the Lease."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def monotonic(self) -> float:
        return self.seconds

    def wall(self) -> datetime:
        return START + timedelta(seconds=self.seconds)


class FakeLeases(FakeKube):
    """The API with the operator's one Lease (`lease`), or none yet."""

    @property
    def lease(self) -> dict[str, Any] | None:
        return self.leases.get(f"{NAMESPACE}/{LEASE_NAME}")

    def held_by(self, holder: str, at: datetime, transitions: int = 1) -> None:
        self.leases[f"{NAMESPACE}/{LEASE_NAME}"] = {
            "metadata": {"name": LEASE_NAME, "resourceVersion": self.next_version()},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": DURATION,
                "acquireTime": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "renewTime": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "leaseTransitions": transitions,
            },
        }


def make(api: FakeLeases, clock: Clock, changes: list[bool], identity: str = "me") -> LeaderLease:
    return LeaderLease(
        api,
        NAMESPACE,
        identity,
        changes.append,
        DURATION,
        clock=clock.monotonic,
        wall=clock.wall,
    )


async def test_a_free_lease_is_taken_and_renewed_keeping_acquire_time() -> None:
    api, clock, changes = FakeLeases(), Clock(), []
    lease = make(api, clock, changes)
    assert await lease.step() == DURATION / 3
    assert changes == [True]
    assert api.lease is not None
    first = dict(api.lease["spec"])
    assert first["holderIdentity"] == "me"
    assert first["leaseTransitions"] == 1
    clock.seconds = 5
    await lease.step()
    renewed = api.lease["spec"]
    assert renewed["acquireTime"] == first["acquireTime"]
    assert renewed["leaseTransitions"] == 1
    assert renewed["renewTime"] > first["renewTime"]
    assert changes == [True]  # no second notification


async def test_a_valid_lease_of_another_replica_is_left_alone_until_it_expires() -> None:
    api, clock, changes = FakeLeases(), Clock(), []
    api.held_by("other", START)
    lease = make(api, clock, changes)
    assert await lease.step() == 2  # standby polls every 2 s
    assert changes == []
    assert api.lease is not None
    assert api.lease["spec"]["holderIdentity"] == "other"
    clock.seconds = DURATION + 1  # the other replica stopped renewing
    await lease.step()
    assert changes == [True]
    assert api.lease["spec"]["holderIdentity"] == "me"
    assert api.lease["spec"]["leaseTransitions"] == 2


async def test_a_leader_that_cannot_renew_stops_acting_before_the_lease_expires() -> None:
    api, clock, changes = FakeLeases(), Clock(), []
    lease = make(api, clock, changes)
    await lease.step()
    api.down = KubeError(503, "Lease: unavailable")
    clock.seconds = DURATION * 2 / 3 - 0.5
    await lease.step()
    assert lease.leading
    clock.seconds = DURATION * 2 / 3 + 0.5
    await lease.step()
    assert not lease.leading
    assert changes == [True, False]
    assert DURATION * 2 / 3 + 0.5 < DURATION  # nobody else could have taken it yet


async def test_losing_a_write_race_does_not_make_a_leader() -> None:
    api, clock, changes = FakeLeases(), Clock(), []
    lease = make(api, clock, changes)
    original = api.write_lease

    async def someone_else_first(namespace: str, body: Mapping[str, Any], create: bool) -> None:
        api.held_by("other", clock.wall())
        await original(namespace, body, create)

    api.write_lease = someone_else_first  # type: ignore[method-assign]
    await lease.step()
    assert not lease.leading
    assert changes == []
    assert api.lease is not None
    assert api.lease["spec"]["holderIdentity"] == "other"


async def test_run_gives_up_leadership_when_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    api, clock, changes = FakeLeases(), Clock(), []
    lease = make(api, clock, changes)

    async def cancelled(_: float) -> None:
        raise asyncio.CancelledError  # the task is cancelled while it waits

    monkeypatch.setattr("quotree_operator.leader.asyncio.sleep", cancelled)
    with pytest.raises(asyncio.CancelledError):
        await lease.run()
    assert changes == [True, False]


def test_next_lease_is_pure_and_sends_back_the_version_read() -> None:
    held = {
        "metadata": {"name": LEASE_NAME, "resourceVersion": "7"},
        "spec": {
            "holderIdentity": "me",
            "renewTime": "2026-11-22T07:00:00.000000Z",
            "acquireTime": "2026-11-22T06:00:00.000000Z",
            "leaseTransitions": 3,
        },
    }
    body = next_lease(held, namespace="ns", identity="me", duration=DURATION, now=START)
    assert body is not None
    assert body["metadata"] == {"name": LEASE_NAME, "namespace": "ns", "resourceVersion": "7"}
    assert body["spec"]["acquireTime"] == "2026-11-22T06:00:00.000000Z"
    assert body["spec"]["leaseTransitions"] == 3
    assert next_lease(held, namespace="ns", identity="you", duration=DURATION, now=START) is None
    created = next_lease(None, namespace="ns", identity="you", duration=DURATION, now=START)
    assert created is not None
    assert "resourceVersion" not in created["metadata"]
    assert created["spec"]["leaseTransitions"] == 1


def test_the_holder_says_where_its_webhooks_answer_and_when_it_last_renewed() -> None:
    """Admission at creation: a standby learns the holder's webhook address from the Lease;
    a replica taking the Lease over learns the former holder's last renewal."""
    api, clock = FakeLeases(), Clock()
    leader = LeaderLease(
        api, NAMESPACE, "a", [].append, DURATION, address="10.0.0.1:9443",
        clock=clock.monotonic, wall=clock.wall,
    )  # fmt: skip
    standby = LeaderLease(
        api, NAMESPACE, "b", [].append, DURATION, address="10.0.0.2:9443",
        clock=clock.monotonic, wall=clock.wall,
    )  # fmt: skip
    asyncio.run(leader.step())
    assert leader.leading
    assert leader.previous is None  # nobody held it before
    asyncio.run(standby.step())
    assert not standby.leading
    assert standby.leader_address == "10.0.0.1:9443"
    clock.seconds = DURATION + 1.0  # the holder stopped renewing at 0 s
    asyncio.run(standby.step())
    assert standby.leading
    assert standby.leader_address is None
    assert standby.previous == (START.timestamp(), DURATION)
