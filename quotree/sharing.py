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
    amount: int, needs: Sequence[int], weights: Sequence[int], names: Sequence[str]
) -> list[int]:
    """Share `amount` among claimants, none above its need; returns what each receives.

    Claimants with need 0 or weight 0 receive nothing. When the needs add up
    to no more than `amount`, every claimant receives its need (the rounds
    would reach the same result).
    """
    count = len(needs)
    got = [0] * count
    if amount <= 0:
        return got
    hungry = [i for i in range(count) if needs[i] > 0 and weights[i] > 0]
    if sum(needs[i] for i in hungry) <= amount:
        for i in hungry:
            got[i] = needs[i]
        return got
    leftover = amount
    while leftover > 0 and hungry:
        total_weight = sum(weights[i] for i in hungry)
        shares: list[int] = []  # in `hungry`'s order
        remainders: list[tuple[int, str, int]] = []
        handed = 0
        for i in hungry:
            share, remainder = divmod(leftover * weights[i], total_weight)
            if remainder:
                remainders.append((-remainder, names[i], len(shares)))
            shares.append(share)
            handed += share
        units = leftover - handed
        if units:
            for _, _, k in heapq.nsmallest(units, remainders):
                shares[k] += 1
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
    total = sum(w for w in weights if w > 0)
    if total <= amount:
        return [w if w > 0 else 0 for w in weights]
    remainders: list[tuple[int, str, int]] = []
    handed = 0
    for i, weight in enumerate(weights):
        if weight > 0:
            share, remainder = divmod(amount * weight, total)
            got[i] = share
            handed += share
            if remainder:
                remainders.append((-remainder, names[i], i))
    units = amount - handed
    if units:
        for _, _, i in heapq.nsmallest(units, remainders):
            got[i] += 1
    return got
