"""How many per-pod `Admitted` events to write, per ElasticQuota; the rest are summed up.

Why a module of its own: an `Admitted` event is one more API write per admitted pod,
on top of the gate removal itself, so a burst of admissions paid twice the writes it
needs (bench/RESULTS.md). Kubernetes' own event recorders keep a token
bucket per source and object and fold repeated events together; quotree does the same
per quota: each ElasticQuota may write `burst` per-pod `Admitted` events at once and
then `per_second` a second, and all quotas together `total_burst` at once and then
`total_per_second` a second (100 quotas with a budget each would otherwise still write
one event per admission). Admissions beyond that write no event of their own; they are
counted, and one `Admitted` event on the ElasticQuota says how many there were
(`summaries`, at most one per quota per `interval`). `Pending`, `Preempted` and
`Reclaimed` events are never limited: they carry the numbers users act on.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AdmittedEvents"]


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float
    skipped: int = 0


class AdmittedEvents:
    """Per-quota token buckets for per-pod `Admitted` events; see module docstring."""

    def __init__(
        self,
        burst: int = 25,
        per_second: float = 1.0,
        total_burst: int = 50,
        total_per_second: float = 2.0,
        interval: float = 10.0,
    ) -> None:
        self.burst = burst
        self.per_second = per_second
        self.total_burst = total_burst
        self.total_per_second = total_per_second
        self.interval = interval
        self._buckets: dict[str, _Bucket] = {}
        self._total = _Bucket(float(total_burst), 0.0)

    @staticmethod
    def _refill(bucket: _Bucket, now: float, burst: int, per_second: float) -> None:
        elapsed = max(0.0, now - bucket.stamp)
        bucket.tokens = min(float(burst), bucket.tokens + elapsed * per_second)
        bucket.stamp = now

    def take(self, quota: str, now: float) -> bool:
        """May this admission to `quota` write its own event? If not, it is counted."""
        bucket = self._buckets.get(quota)
        if bucket is None:
            bucket = self._buckets[quota] = _Bucket(float(self.burst), now)
        self._refill(bucket, now, self.burst, self.per_second)
        self._refill(self._total, now, self.total_burst, self.total_per_second)
        if bucket.tokens >= 1.0 and self._total.tokens >= 1.0:
            bucket.tokens -= 1.0
            self._total.tokens -= 1.0
            return True
        bucket.skipped += 1
        return False

    def summaries(self) -> list[tuple[str, int]]:
        """(quota, admissions without an event of their own since the last call)."""
        out = []
        for quota, bucket in list(self._buckets.items()):
            if bucket.skipped:
                out.append((quota, bucket.skipped))
                bucket.skipped = 0
        return out

    def forget_idle(self, now: float) -> None:
        """Drop the buckets that have refilled (a quota that went quiet costs no memory)."""
        for quota, bucket in list(self._buckets.items()):
            full = bucket.tokens + (now - bucket.stamp) * self.per_second >= self.burst
            if full and not bucket.skipped:
                del self._buckets[quota]

    def message(self, quota: str, count: int) -> str:
        """The summary event's text."""
        return (
            f"admitted {count} more pods to ElasticQuota {quota} in the last "
            f"{self.interval:.0f} s without an Admitted event each (per-pod Admitted events "
            f"are limited to {self.burst} at once and {self.per_second:g} a second per quota, "
            f"{self.total_burst} and {self.total_per_second:g} a second in all)"
        )
