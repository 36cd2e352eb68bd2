"""The engine's switches, one frozen value given to its constructor.

Why a module of its own: each switch turns off a shortcut or a rule so that a test or a
benchmark can compare the engine with and without it (the property tests "skip = no
skip", "lazy = eager", "bound = exact"; the hold against no hold). They are fixed for an
engine's life: one engine is never half one way and half the other, and setting them
for one engine never changes another's.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EngineOptions"]


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How an `Engine` decides; the defaults are what the product runs."""

    #: Pending pods hold their quota's unused guarantee on the other flavors they may use
    #: (`hold.py`); off: they count on the flavor they wait on only.
    holds: bool = True
    #: Skip the quotas that only lost room in a round (`Decider._only_shrank`); off: look at
    #: every quota whose runtime changed.
    skip_shrunk_quotas: bool = True
    #: Leave the runtimes of subtrees whose share only falls unevaluated until read
    #: (`QuotaTree.lazy`, `deferral.py`); off: every runtime current after each settle.
    lazy_runtimes: bool = True
    #: Judge a flavor a pending pod is not charged to by a bound first (`flavor_fit.judge`)
    #: and move its demand there only when it may fit; off: move it to every flavor that
    #: passes `admission.may_fit`.
    bound_flavors: bool = True
