"""Per-quota and overall budgets of per-pod Admitted events (event_budget.py)."""

from __future__ import annotations

from quotree_operator.event_budget import AdmittedEvents


def test_a_burst_writes_its_budget_then_the_rest_is_counted() -> None:
    budget = AdmittedEvents(burst=5, per_second=2.0, total_burst=100)
    taken = [budget.take("a", 0.0) for _ in range(8)]
    assert taken == [True] * 5 + [False] * 3
    assert budget.take("b", 0.0)  # another quota has a budget of its own
    assert budget.summaries() == [("a", 3)]
    assert budget.summaries() == []  # counted once


def test_the_budget_refills_at_its_rate() -> None:
    budget = AdmittedEvents(burst=2, per_second=2.0)
    assert budget.take("a", 0.0)
    assert budget.take("a", 0.0)
    assert not budget.take("a", 0.1)  # 0.2 of a token back
    assert budget.take("a", 0.6)  # 1.2 tokens: one event
    assert not budget.take("a", 0.6)
    assert budget.take("a", 100.0)
    assert budget.take("a", 100.0)  # refilled, never above burst
    assert not budget.take("a", 100.0)


def test_many_quotas_share_an_overall_budget() -> None:
    """100 quotas with a budget each must not write one event per admission in a burst."""
    budget = AdmittedEvents(burst=25, per_second=1.0, total_burst=10, total_per_second=5.0)
    taken = [budget.take(f"q{i}", 0.0) for i in range(30)]
    assert taken == [True] * 10 + [False] * 20
    assert budget.take("q29", 1.0)  # 5 tokens back overall after a second
    assert sum(count for _, count in budget.summaries()) == 20


def test_quiet_quotas_are_forgotten_and_the_message_has_the_numbers() -> None:
    budget = AdmittedEvents(burst=2, per_second=1.0, total_burst=100, total_per_second=10.0)
    budget.take("a", 0.0)
    budget.forget_idle(0.5)
    assert "a" in budget._buckets  # not full yet
    budget.forget_idle(5.0)
    assert budget._buckets == {}
    assert budget.message("a", 7) == (
        "admitted 7 more pods to ElasticQuota a in the last 10 s without an Admitted event "
        "each (per-pod Admitted events are limited to 2 at once and 1 a second per quota, "
        "100 and 10 a second in all)"
    )


def test_the_default_budget_keeps_a_burst_to_a_few_events_and_a_trickle_to_all() -> None:
    """Each per-pod event costs the API server about what the pod's own creation does
    (bench/RESULTS.md): a burst of 1,000 admissions over 10 s in 100 quotas writes at most
    50 at once and 2 a second in all; one admission a second still gets its event each."""
    burst = AdmittedEvents()
    written = sum(burst.take(f"q{i % 100}", i / 100) for i in range(1000))
    assert written <= 50 + 2 * 10
    assert sum(count for _, count in burst.summaries()) == 1000 - written
    trickle = AdmittedEvents()
    assert all(trickle.take(f"q{i % 3}", float(i)) for i in range(300))
