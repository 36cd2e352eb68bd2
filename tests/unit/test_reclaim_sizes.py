"""Reclaim's victims fit the shortfall (docs/semantics.md, "Reclaim (getting lent quota back), and
only when it pays": the fewest victims that let the unit in). Within one standing and
priority, reclaim takes the fewest pods that free what the waiting pod is short of, and
among those the ones that leave least of it idle; the latest admitted only among equals."""

from __future__ import annotations

from builders import arrive, engine, pod, quota, states

from quotree.engine import Engine
from quotree.flavor_spec import FlavorConfig
from quotree.models import MemberConfig

GPU = "nvidia.com/gpu"


def lender_and_borrower(*sizes: int) -> Engine:
    """owner (min 8) is idle; batch (min 0) borrows all 16 GPUs with pods of `sizes`,
    admitted in that order."""
    eng = engine(
        quota("batch", min={GPU: 0}, max={GPU: 16}),
        quota("owner", min={GPU: 8}, max={GPU: 16}),
        capacity={GPU: 16},
    )
    arrive(eng, *(pod("batch", f"b{i}", {GPU: n}, created=i) for i, n in enumerate(sizes)))
    assert all(state == "admitted" for state in states(eng).values())
    return eng


def reclaimed(eng: Engine) -> list[str]:
    return sorted(k for k, s in states(eng).items() if s == "reclaimed")


def test_one_gpu_is_not_reclaimed_by_evicting_an_8_gpu_pod() -> None:
    # batch's 8-GPU pod is its latest admitted, but a 1-GPU pod (the same standing and
    # priority) frees what owner's pod needs: 7 GPUs are not left idle.
    eng = lender_and_borrower(*[1] * 8, 8)
    arrive(eng, pod("owner", "mine", {GPU: 1}, created=20), now=1.0)
    assert states(eng)["owner/mine"] == "admitted"
    assert reclaimed(eng) == ["batch/b7"]


def test_eight_gpus_are_reclaimed_with_one_pod_not_eight() -> None:
    # batch's 1-GPU pods are its latest admitted, but its one 8-GPU pod alone frees what
    # owner's 8-GPU pod needs: one eviction, not eight.
    eng = lender_and_borrower(8, *[1] * 8)
    arrive(eng, pod("owner", "mine", {GPU: 8}, created=20), now=1.0)
    assert states(eng)["owner/mine"] == "admitted"
    assert reclaimed(eng) == ["batch/b0"]


def test_among_pods_alike_the_latest_admitted_goes() -> None:
    eng = lender_and_borrower(*[2] * 8)
    arrive(eng, pod("owner", "mine", {GPU: 1}, created=20), now=1.0)
    assert reclaimed(eng) == ["batch/b7"]


def test_standing_still_comes_before_size() -> None:
    # batch has a min of 8: its first pods are in-quota. The over-quota pods go first,
    # even when an in-quota pod alone would have been one eviction.
    eng = engine(
        quota("batch", min={GPU: 8}, max={GPU: 16}),
        quota("owner", min={GPU: 8}, max={GPU: 16}),
        capacity={GPU: 16},
    )
    arrive(eng, pod("batch", "big", {GPU: 8}, created=0))
    arrive(eng, *(pod("batch", f"s{i}", {GPU: 1}, created=1 + i) for i in range(8)))
    arrive(eng, pod("owner", "mine", {GPU: 2}, created=20), now=1.0)
    assert states(eng)["owner/mine"] == "admitted"
    assert reclaimed(eng) == ["batch/s6", "batch/s7"]


def two_flavors(*configs: MemberConfig) -> Engine:
    """GPU flavors a and b, 8 GPUs each."""
    eng = engine(*configs, capacity={})
    for flavor in "ab":
        eng.set_flavor(FlavorConfig(flavor, {"flavor": flavor}))
        eng.set_cluster_node(f"pool-{flavor}", {GPU: 8}, {"flavor": flavor})
    return eng


def flavored(name: str, min_each: int) -> MemberConfig:
    return MemberConfig(
        kind="ElasticQuota", name=name, namespace=name,
        min={f"{GPU}@a": min_each, f"{GPU}@b": min_each},
        max={f"{GPU}@a": 8, f"{GPU}@b": 8},
        flavors=("a", "b"), flavored_resources=frozenset({GPU}),
    )  # fmt: skip


def test_reclaim_takes_the_flavor_where_it_leaves_least_idle() -> None:
    # owner's pod may run on a or b and waits on a (its first flavor). On a, batch's one
    # 8-GPU pod is all reclaim could take (7 GPUs idle); on b, one of its 1-GPU pods
    # frees just the GPU: the pod's demand moves to b, and that pod goes.
    eng = two_flavors(flavored("batch", 0), flavored("owner", 4))
    arrive(eng, pod("batch", "train", {GPU: 8}, created=0, selector={"flavor": "a"}))
    arrive(eng, *(pod("batch", f"s{i}", {GPU: 1}, created=1 + i, selector={"flavor": "b"})
                  for i in range(8)))  # fmt: skip
    assert all(state == "admitted" for state in states(eng).values())
    arrive(eng, pod("owner", "mine", {GPU: 1}, created=20), now=1.0)
    assert states(eng)["owner/mine"] == "admitted"
    assert eng.pods["owner/mine"].flavor == "b"
    assert reclaimed(eng) == ["batch/s7"]
