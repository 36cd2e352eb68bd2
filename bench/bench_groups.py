"""Pod groups benchmark: the engine's CPU per pod event with groups against single pods.

The same 4,000 pods go through the operator's engine (evictions wait for the cluster)
twice: as 1,000 groups of 4 pods (docs/reference/pods.md, "Pod groups") and as 4,000 single pods. 40
ElasticQuotas under 4 Cohorts, 100 pods each (25 groups), one resource; each pod of a
group arrives right after the one before (as a Job's controller makes them), the groups
in random order. Two regimes:

- roomy: every quota's min holds all its pods;
- contended: every quota's min holds half of them; the rest wait, and are admitted as
  admitted pods end.

Phases, each event followed by `decide()` (as the operator's loop does at most once per
event): every pod arrives (gated); every admitted pod is bound to a Node (its watch
event); every pod ends, in random order (a group's reservation keeps its room until its
last pod ends; the pods that waited are admitted meanwhile). Figure: CPU ms per event
(process time), median over `--repeat` runs, and groups / single pods per phase and in
all (target: within 1.5x of single pods).

Run: .venv/bin/python bench/bench_groups.py [--repeat 3] [--seed 1]
Prints a Markdown section for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import random
import statistics
import time
from datetime import UTC, datetime

from quotree.engine import Engine, PodState
from quotree.groups import GroupSpec
from quotree.models import MemberConfig
from quotree.podfacts import PodFacts

QUOTAS = 40
COHORTS = 4
PODS_PER_QUOTA = 100
GROUP_SIZE = 4
RESOURCE = "example.com/unit"
PHASES = ("arrive", "bind", "end")


def configs(contended: bool) -> list[MemberConfig]:
    share = PODS_PER_QUOTA // 2 if contended else PODS_PER_QUOTA
    per_cohort = QUOTAS // COHORTS
    out = [
        MemberConfig(
            name=f"c{c}",
            kind="Cohort",
            min={RESOURCE: share * per_cohort},
            max={RESOURCE: share * per_cohort},
        )
        for c in range(COHORTS)
    ]
    for q in range(QUOTAS):
        out.append(
            MemberConfig(
                name=f"q{q}",
                kind="ElasticQuota",
                parent=f"c{q // per_cohort}",
                namespace=f"q{q}",
                min={RESOURCE: share},
                max={RESOURCE: share},
            )
        )
    return out


def workload(grouped: bool, rnd: random.Random) -> list[PodFacts]:
    """The pods in arrival order: groups in random order, each group's pods together."""
    blocks: list[list[PodFacts]] = []
    for q in range(QUOTAS):
        for g in range(PODS_PER_QUOTA // GROUP_SIZE):
            block = []
            for i in range(GROUP_SIZE):
                facts = PodFacts(
                    namespace=f"q{q}",
                    name=f"g{g}-{i}",
                    request={RESOURCE: 1},
                    gated=True,
                    created=float(g * GROUP_SIZE + i),
                )
                if grouped:
                    facts = dataclasses.replace(
                        facts, group=GroupSpec(f"g{g}", GROUP_SIZE, GROUP_SIZE)
                    )
                block.append(facts)
            blocks.append(block)
    rnd.shuffle(blocks)
    return [facts for block in blocks for facts in block]


def run(grouped: bool, contended: bool, seed: int) -> dict[str, float]:
    """CPU ms per event of each phase."""
    rnd = random.Random(seed)
    engine = Engine(reclaim_delay=0.0)
    for config in configs(contended):
        engine.set_config(config)
    engine.set_cluster_node("node-1", {RESOURCE: QUOTAS * PODS_PER_QUOTA})
    pods = workload(grouped, rnd)
    now = 0.0
    spent: dict[str, float] = {}
    counts: dict[str, int] = {}

    def step(phase: str, event: object) -> None:
        nonlocal now
        now += 0.01
        start = time.process_time()
        if isinstance(event, PodFacts):
            engine.observe_pod(event)
        else:
            engine.forget_pod(str(event))
        out = engine.decide(now)
        spent[phase] = spent.get(phase, 0.0) + time.process_time() - start
        counts[phase] = counts.get(phase, 0) + 1
        for key, _ in out.admitted:
            bound.append(key)

    bound: list[str] = []
    for facts in pods:
        step("arrive", facts)
    # Bind what is admitted; later admissions (contended) are bound as they come.
    by_key = {facts.key: facts for facts in pods}
    ended: list[str] = [f.key for f in pods]
    rnd.shuffle(ended)
    done: set[str] = set()
    while bound:
        key = bound.pop(0)
        if key in by_key and key not in done:
            step("bind", dataclasses.replace(by_key[key], gated=False, node_name="node-1"))
    for key in ended:
        record = engine.pods.get(key)
        if record is None:
            continue
        step("end", key)
        done.add(key)
        while bound:
            admitted = bound.pop(0)
            if admitted not in done:
                step("bind", dataclasses.replace(by_key[admitted], gated=False, node_name="node-1"))
    left = [r for r in engine.pods.values() if r.state is not PodState.UNMANAGED]
    assert not left, f"{len(left)} pods left"
    return {phase: 1000 * spent[phase] / counts[phase] for phase in PHASES} | {
        "all": 1000 * sum(spent.values()) / sum(counts.values())
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"### Pod groups: engine CPU per event, 1,000 4-pod groups against 4,000 pods ({stamp})")
    print()
    print(
        f"{platform.machine()}, {platform.processor() or 'cpu'}, Python "
        f"{platform.python_version()}; `bench/bench_groups.py --repeat {args.repeat} "
        f"--seed {args.seed}`, both in the same run, alternated"
    )
    print()
    print("| regime | phase | single pods, CPU ms per event | groups, CPU ms per event | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for contended in (False, True):
        results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for r in range(args.repeat):
            for grouped in (False, True):
                results[grouped].append(run(grouped, contended, args.seed + r))
        for phase in (*PHASES, "all"):
            single = statistics.median(x[phase] for x in results[False])
            groups = statistics.median(x[phase] for x in results[True])
            regime = "contended" if contended else "roomy"
            print(f"| {regime} | {phase} | {single:.3f} | {groups:.3f} | {groups / single:.2f}x |")


if __name__ == "__main__":
    main()
