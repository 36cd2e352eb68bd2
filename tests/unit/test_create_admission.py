"""Admission at creation (docs/webhooks.md, "Admission at creation"): a reservation's life and the
order it keeps.

A pod the webhook admits as it is created is charged to its quota at once (its
reservation), before the cluster shows it; the watch bringing the pod swaps the
reservation for the pod; a pod that never shows up, or is deleted first, gives its
room back. The reservation keeps the semantics' order: a pod waiting ahead of the new
one in its quota is never overtaken.
"""

import dataclasses

from builders import R, cohort, engine, pod, quota, states

from quotree.engine import Engine
from quotree.models import FLAVOR_LABEL
from quotree.podfacts import PodFacts
from tests.unit.objects import quota_config as eq
from tests.unit.test_flavors import GPU, TWO_FLAVORS, gpu_pod
from tests.unit.test_flavors import cluster as flavored


def _new(namespace: str, token: str, amount: int, **kwargs: object) -> PodFacts:
    """A pod as the webhook sees it on CREATE: gated, under the reservation's own name."""
    return pod(namespace, f"#{token}", amount, **kwargs)  # type: ignore[arg-type]


def _arrived(eng: Engine, token: str, name: str, facts: PodFacts) -> None:
    """The watch shows the pod (ungated, its real name): the operator's two steps."""
    assert eng.created.take(token) is not None
    eng.observe_pod(dataclasses.replace(facts, name=name, gated=False))


def _used(eng: Engine, name: str = "a") -> int:
    eng.refresh()
    return eng.report(name).used.get(R, 0)


def test_a_pod_that_fits_is_reserved_and_counts_as_used_at_once() -> None:
    eng = engine(quota("a", min=10, max=10), capacity=100)
    admitted = eng.created.admit(_new("a", "t1", 4), "t1", 10.0)
    assert admitted is not None
    assert (admitted.quota, admitted.standing) == ("a", "in-quota")
    assert "used" in admitted.message
    assert _used(eng) == 4
    assert not eng.pods  # no pod record: the pod has no name yet
    # A gated pod that would need the reserved room waits.
    eng.observe_pod(pod("a", "big", 8))
    eng.decide()
    assert states(eng) == {"a/big": "pending"}


def test_reservations_never_admit_more_than_the_room() -> None:
    eng = engine(quota("a", min=10, max=10), capacity=100)
    results = [eng.created.admit(_new("a", f"t{i}", 4), f"t{i}", 10.0) for i in range(4)]
    assert [r is not None for r in results] == [True, True, False, False]
    assert _used(eng) == 8


def test_the_watch_confirms_a_reservation_once() -> None:
    eng = engine(quota("a", min=10, max=10), capacity=100)
    facts = _new("a", "t1", 4)
    assert eng.created.admit(facts, "t1", 10.0) is not None
    _arrived(eng, "t1", "p1", facts)
    assert states(eng) == {"a/p1": "admitted"}
    assert _used(eng) == 4  # the pod took the reservation's place: not counted twice
    assert eng.created.take("t1") is None
    assert eng.created.expire(100.0) == []
    assert _used(eng) == 4


def test_a_reservation_whose_pod_never_shows_up_is_released_on_time() -> None:
    eng = engine(quota("a", min=10, max=10), capacity=100)
    assert eng.created.admit(_new("a", "t1", 8), "t1", 10.0) is not None
    eng.observe_pod(pod("a", "waiting", 8))
    eng.decide()
    assert eng.created.expire(9.9) == []
    assert _used(eng) == 8
    released = eng.created.expire(10.0)
    assert [r.token for r in released] == ["t1"]
    assert _used(eng) == 0
    decisions = eng.decide()
    assert [key for key, _ in decisions.admitted] == ["a/waiting"]


def test_a_reservation_whose_pod_is_deleted_first_is_released() -> None:
    eng = engine(quota("a", min=10, max=10), capacity=100)
    assert eng.created.admit(_new("a", "t1", 6), "t1", 10.0) is not None
    assert eng.created.release("t1")
    assert not eng.created.release("t1")
    assert _used(eng) == 0


def test_a_waiting_higher_priority_pod_is_not_overtaken() -> None:
    eng = engine(quota("a", min=10, max=10, preempt=False), capacity=100)
    eng.observe_pod(pod("a", "running", 6, gated=False))
    eng.observe_pod(pod("a", "urgent", 6, priority=10))
    eng.decide()
    assert states(eng)["a/urgent"] == "pending"
    # 4 more would fit, but the urgent pod waits ahead of it: created gated.
    assert eng.created.admit(_new("a", "t1", 4, priority=1), "t1", 10.0) is None
    assert _used(eng) == 6
    assert set(states(eng)) == {"a/running", "a/urgent"}  # the check left nothing behind


def test_a_waiting_lower_priority_pod_does_not_hold_a_higher_new_one() -> None:
    eng = engine(quota("a", min=10, max=10), capacity=100)
    eng.observe_pod(pod("a", "running", 6, gated=False))
    eng.observe_pod(pod("a", "big-low", 6, priority=0))
    eng.decide()
    assert eng.created.admit(_new("a", "t1", 4, priority=5), "t1", 10.0) is not None


def test_an_ancestor_without_room_holds_the_new_pod() -> None:
    eng = engine(
        cohort("org", min=8, max=8),
        quota("a", "org", min=4, max=10),
        quota("b", "org", min=4, max=10),
        capacity=100,
        instant_evictions=False,
        reclaim_delay=1000.0,
    )
    eng.observe_pod(pod("b", "running", 6, gated=False))
    eng.decide()
    # Room in a (its min), none above: org holds 6 of its 8.
    assert eng.created.admit(_new("a", "t1", 4), "t1", 10.0) is None
    eng.observe_pod(pod("a", "gated", 4))
    eng.decide()
    assert "Cohort org" in eng.pods["a/gated"].reason
    eng.forget_pod("a/gated")
    assert eng.created.admit(_new("a", "t2", 2), "t2", 10.0) is not None


def test_non_preemptible_pods_are_admitted_at_creation_within_min_only() -> None:
    eng = engine(quota("a", min=5, max=20), capacity=100)
    first = eng.created.admit(_new("a", "t1", 4, preemptible=False), "t1", 10.0)
    assert first is not None
    second = eng.created.admit(_new("a", "t2", 4, preemptible=False), "t2", 10.0)
    assert second is None  # non-preemptible used 4 + 4 > min 5, the reservation counted
    assert eng.created.admit(_new("a", "t3", 4), "t3", 10.0) is not None


def test_the_standing_label_follows_the_guarantee() -> None:
    eng = engine(quota("a", min=4, max=20), capacity=100)
    eng.observe_pod(pod("a", "running", 4, gated=False))
    eng.decide()
    admitted = eng.created.admit(_new("a", "t1", 2), "t1", 10.0)
    assert admitted is not None
    assert admitted.standing == "over-quota"


def test_a_pod_is_admitted_at_creation_on_the_first_flavor_where_it_fits() -> None:
    eng = flavored(eq("team", **TWO_FLAVORS))
    first = eng.created.admit(gpu_pod("team", "#t1", 2), "t1", 10.0)
    assert first is not None
    assert (first.flavor, first.node_labels) == ("a100", {"gpu": "a100"})
    second = eng.created.admit(gpu_pod("team", "#t2", 2), "t2", 10.0)
    assert second is not None
    assert (second.flavor, second.node_labels) == ("h100", {"gpu": "h100"})
    # The pod shows up on its flavor (the label the webhook wrote): the numbers stay.
    facts = gpu_pod("team", "p1", 2, gated=False, labels={FLAVOR_LABEL: "a100"})
    assert eng.created.take("t1") is not None
    eng.observe_pod(facts)
    eng.refresh()
    assert eng.report("team").used.get(f"{GPU}@a100") == 2
    assert eng.report("team").used.get(f"{GPU}@h100") == 2
