"""A Cohort or ElasticQuota set while more than one tree is in play (docs/reference/objects.md,
"Several trees").

Why a module of its own: with several trees an object may land in a tree of its own,
move from one tree to another (its pods moving along), or be shadowed by an object of
the same name in another tree (rule 6, the webhook bypassed). `Engine.set_config` hands
such a change here; what is common to one tree and several stays there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quotree.models import MemberConfig
from quotree.pods import PodState
from quotree.resolution import namespaces_of
from quotree.runtime import QuotaTree

if TYPE_CHECKING:  # the engine calls this module
    from quotree.engine import Engine

__all__ = ["set_forest_config"]


def set_forest_config(
    engine: Engine, config: MemberConfig, home: QuotaTree, old: MemberConfig | None
) -> bool:
    """`set_config` when more than one tree is in play; True when nothing more is to do."""
    name = config.name
    target = engine.forest.grow(
        config.tree,
        engine.cluster.capacity,
        engine.cluster.unmanaged,
        (r.request for r in engine.pods.values() if r.state is PodState.ADMITTED),
    )
    if home is not target and name in home.structure:
        if old is None:
            # Another object holds the name in another tree: keep the first (rule 6).
            shadowed = engine.shadowed.setdefault(name, [])
            shadowed[:] = [
                c for c in shadowed if (c.kind, c.namespace) != (config.kind, config.namespace)
            ]
            shadowed.append(config)
            return True
        # The object moves to another tree: its pods move along (`PodIntake.move` in
        # two halves, the quota moving in between).
        lifted = engine.intake.lift(name)
        home.remove_config(name, config.kind, config.namespace)
        target.set_config(config)
        engine.forest.settle(target, name)
        engine.coverage.remove(old)
        if config.is_leaf:
            engine.coverage.add(config)
        engine.ledger.touched.add(name)
        for pod in lifted:
            engine.intake.land(pod)
        engine.intake.reresolve(namespaces_of(old) | namespaces_of(config))
        return True
    target.set_config(config)
    engine.forest.settle(target, name)
    return False
