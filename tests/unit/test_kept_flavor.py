"""A pod kept on its flavor while evictions are under way is placed again once they are done.

docs/semantics.md, "Admission": a pending unit is admitted when it fits, with flavors on one
flavor for all its pods. While evictions are under way, no pending pod's demand moves to
another flavor (`ClaimBook.keeps_flavor`: the plans under way counted on the runtimes as
they were), so a pod that would fit on another flavor is checked on its own only. Once
the victims are gone it must be placed again (`ClaimBook.released`): nothing else need
change for its quota, and without that look it waited on its flavor with a free GPU on
the other until something else did (here its reclaim delay passing; for pods short at
their own quota on that flavor, in `bench_reclaim_ab.py --whole --mixed` with 2 flavors,
nothing did: 6 GPUs idle at the root for the rest of the run). A victim gone also
counts as a change of the evictions under way (`PodIntake.forget`), else the list of
them was stale and said they still were.
"""

from __future__ import annotations

from builders import engine, pod, quota, states

from quotree.engine import Engine
from quotree.flavor_spec import FlavorConfig
from quotree.models import MemberConfig

GPU = "nvidia.com/gpu"


def flavored(name: str, flavors: tuple[str, ...]) -> MemberConfig:
    """A quota of min 0 and max 2 GPUs on each of flavors a and b, in the order `flavors`."""
    return MemberConfig(
        kind="ElasticQuota", name=name, namespace=name,
        min={f"{GPU}@a": 0, f"{GPU}@b": 0}, max={f"{GPU}@a": 2, f"{GPU}@b": 2},
        flavors=flavors, flavored_resources=frozenset({GPU}),
    )  # fmt: skip


def cluster() -> Engine:
    """2 GPUs on each of flavors a and b, all held by `lender`; `queue`'s pod (flavors b
    then a) waits on b for the lent GPU; `alpha` (cpu only, looked at first) runs a
    low-priority pod. The operator's engine: evictions take effect when told."""
    eng = engine(
        quota("alpha", min={"cpu": 2}, max={"cpu": 2}),
        flavored("lender", ("a", "b")),
        flavored("queue", ("b", "a")),
        capacity={"cpu": 2},
        instant_evictions=False,
        reclaim_delay=30.0,
    )
    for flavor in "ab":
        eng.set_flavor(FlavorConfig(flavor, {"flavor": flavor}))
        eng.set_cluster_node(f"pool-{flavor}", {GPU: 2}, {"flavor": flavor})
    for i, flavor in enumerate("aabb"):
        eng.observe_pod(pod("lender", f"l{i}", {GPU: 1}, created=i, selector={"flavor": flavor}))
    eng.observe_pod(pod("alpha", "low", {"cpu": 2}, created=5))
    eng.decide(0.0)
    eng.observe_pod(pod("queue", "mine", {GPU: 1}, created=10))
    eng.decide(1.0)
    assert states(eng) == {
        **{f"lender/l{i}": "admitted" for i in range(4)},
        "alpha/low": "admitted",
        "queue/mine": "pending",
    }
    assert eng.pods["queue/mine"].flavor == "b"  # lent to lender, reclaimed in 30 s
    return eng


def test_a_pod_kept_on_its_flavor_is_placed_again_when_the_evictions_are_done() -> None:
    eng = cluster()
    # In one round: a GPU on flavor a is freed, and alpha's high-priority pod preempts
    # (looked at before queue): while that eviction is under way, queue's pod stays on b.
    eng.forget_pod("lender/l0")
    eng.observe_pod(pod("alpha", "high", {"cpu": 2}, priority=10, created=11))
    out = eng.decide(2.0)
    assert [e.pod for e in out.evictions] == ["alpha/low"]
    assert eng.pods["queue/mine"].flavor == "b"
    # The victim is gone: alpha's pod is admitted, and queue's pod takes the free GPU on a.
    eng.forget_pod("alpha/low")
    out = eng.decide(3.0)
    assert sorted(key for key, _ in out.admitted) == ["alpha/high", "queue/mine"]
    assert eng.pods["queue/mine"].flavor == "a"
    # Nothing is reclaimed for it once its delay has passed.
    out = eng.decide(40.0)
    assert out.evictions == []
    assert states(eng)["lender/l2"] == states(eng)["lender/l3"] == "admitted"
