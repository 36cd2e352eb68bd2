"""A pod's standing in its quota (docs/semantics.md, "In-quota and over-quota pods"): admitted pods,
by priority then admission, add up; a pod is in-quota while the running sum is within the
quota's guarantee (its min, after scaling) in every resource the pod itself requests."""

from __future__ import annotations

from tests.unit.builders import arrive, engine, pod, quota


def standing(eng: object, key: str) -> str | None:
    return eng.pods[key].standing  # type: ignore[attr-defined]


def test_only_the_resources_a_pod_requests_decide_its_standing() -> None:
    # y is over the min after big-y; a pod that asks for x only is still within x's min (a
    # pod on H100s is not over-quota because the quota's A100s are).
    eng = engine(quota("a", min={"x": 4, "y": 1}), capacity={"x": 10, "y": 10})
    arrive(eng, pod("a", "big-y", {"y": 2}), pod("a", "small-x", {"x": 1}))
    assert standing(eng, "a/big-y") == "over-quota"
    assert standing(eng, "a/small-x") == "in-quota"


def test_the_running_sum_counts_every_pod_before_it_in_every_resource() -> None:
    # The x of the pods before it counts, in-quota or not: 3 + 2 > 4.
    eng = engine(quota("a", min={"x": 4, "y": 1}), capacity={"x": 10, "y": 10})
    arrive(eng, pod("a", "both", {"x": 3, "y": 2}), pod("a", "more-x", {"x": 2}))
    assert standing(eng, "a/both") == "over-quota"
    assert standing(eng, "a/more-x") == "over-quota"


def test_standing_is_measured_against_the_scaled_guarantee() -> None:
    # The cluster (x 4) holds less than the mins (4 + 4): each guarantee is scaled to 2, so a
    # pod of 3 is over its quota's guarantee though within its min.
    eng = engine(quota("a", min={"x": 4}), quota("b", min={"x": 4}), capacity={"x": 4})
    arrive(eng, pod("a", "p", {"x": 3}))
    assert eng.report("a").used == {"x": 3}
    assert standing(eng, "a/p") == "over-quota"
