"""Sharing an integer amount among claimants by weight, exactly (the semantics, step 4).

Every share is the integer floor of the claimant's proportional part; the
units left over go one at a time to the largest remainders, ties broken by
name ascending. A claimant that reaches its need keeps only its need and the
excess goes round again among those still hungry. Pure functions over
lists, so that the tree can call them on any parent.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["proportional", "water_fill"]


def water_fill(
    amount: int,
    needs: Sequence[int],
    weights: Sequence[int],
    names: Sequence[str],
    *,
    in_name_order: bool = False,
    one_weight: bool = False,
) -> list[int]:
    """Share `amount` among claimants, none above its need; returns what each receives.

    Claimants with need 0 or weight 0 receive nothing. When the needs add up
    to no more than `amount`, every claimant receives its need (the rounds
    would reach the same result). A caller whose `names` are in ascending order
    says so (`in_name_order`: they are not sorted again), and one whose claimants
    all have the same weight (`one_weight`: every round is one division, as
    `_round_shares` finds); the shares are the same.
    """
    count = len(needs)
    got = [0] * count
    if amount <= 0:
        return got
    hungry = [i for i in range(count) if needs[i] > 0 and weights[i] > 0]
    if sum([needs[i] for i in hungry]) <= amount:
        for i in hungry:
            got[i] = needs[i]
        return got
    # The hungry in name order, once: a tie between remainders then goes to the one that
    # comes first in `hungry` (a position, not a string, is compared), and the rounds keep
    # that order. Children lists are kept sorted by name, so this sort finds them in order.
    if not in_name_order:
        hungry.sort(key=names.__getitem__)
    leftover = amount
    while leftover > 0 and hungry:
        if one_weight:  # `_round_shares`' first case, without looking at the weights
            share, units = divmod(leftover, len(hungry))
            shares = [share + 1] * units + [share] * (len(hungry) - units)
        else:
            shares = _round_shares(leftover, [weights[i] for i in hungry])
        still_hungry = []
        returned = 0
        for i, share in zip(hungry, shares, strict=True):
            room = needs[i] - got[i]
            if share >= room:
                got[i] = needs[i]
                returned += share - room
            else:
                got[i] += share
                still_hungry.append(i)
        leftover = returned
        hungry = still_hungry
    return got


def _round_shares(amount: int, weights: list[int]) -> list[int]:
    """One round: `amount` shared by the (positive) `weights`, floors first, then one unit
    each to the largest remainders, ties to the earlier position (the caller's name order)."""
    count = len(weights)
    low, high = min(weights), max(weights)
    if low == high:
        # One weight: every remainder is the same, so the units go to the first ones.
        share, units = divmod(amount, count)
        if not units:
            return [share] * count
        return [share + 1] * units + [share] * (count - units)
    total_weight = sum(weights)
    shares: list[int] = []
    remainders: list[tuple[int, int]] = []
    handed = 0
    for k, weight in enumerate(weights):
        share, remainder = divmod(amount * weight, total_weight)
        if remainder:
            remainders.append((-remainder, k))
        shares.append(share)
        handed += share
    units = amount - handed
    if units:
        for _, k in heapq.nsmallest(units, remainders):
            shares[k] += 1
    return shares


def proportional(amount: int, weights: Sequence[int], names: Sequence[str]) -> list[int]:
    """Share `amount` in proportion to `weights` (largest remainders, ties by name).

    Used to scale guarantees when the mins add up to more than there is: with needs
    equal to the weights and `amount` below their sum, no floor reaches its weight and
    a remainder unit at most makes one equal to it, so this is the first and only round
    of `water_fill(amount, weights, weights, names)`, done here without the rounds'
    bookkeeping (it runs whenever a saturated Cohort's total moves).
    """
    count = len(weights)
    got = [0] * count
    if amount <= 0:
        return got
    positive = [i for i in range(count) if weights[i] > 0]
    if sum([weights[i] for i in positive]) <= amount:
        return [w if w > 0 else 0 for w in weights]
    positive.sort(key=names.__getitem__)  # ties by name: by position in `positive`
    shares = _round_shares(amount, [weights[i] for i in positive])
    for i, share in zip(positive, shares, strict=True):
        got[i] = share
    return got
