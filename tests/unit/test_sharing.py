"""Weighted water-filling with exact integer shares (docs/semantics.md, "Runtime: how a
parent's total is shared", step 4)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from quotree.sharing import proportional, water_fill


def test_example_one_leftover() -> None:
    # Example 1: leftover 45 among B (needs 5), C (20), D (55), weights 60:50:80.
    got = water_fill(45, [5, 20, 55], [60, 50, 80], ["b", "c", "d"])
    assert got == [5, 15, 25]


def test_everyone_satisfied_when_there_is_enough() -> None:
    assert water_fill(100, [3, 4, 5], [1, 1, 1], ["a", "b", "c"]) == [3, 4, 5]


def test_weight_zero_and_need_zero_get_nothing() -> None:
    assert water_fill(10, [5, 5, 0], [0, 1, 1], ["a", "b", "c"]) == [0, 5, 0]


def test_remainder_units_go_to_largest_remainders_then_names() -> None:
    # 10 among three equal weights: 3 each and one unit left; ties go by name.
    assert water_fill(10, [9, 9, 9], [1, 1, 1], ["c", "a", "b"]) == [3, 4, 3]
    # 7 split 1:2 -> 2.33 / 4.67: the larger remainder gets the unit.
    assert water_fill(7, [9, 9], [1, 2], ["a", "b"]) == [2, 5]


def test_nothing_to_share() -> None:
    assert water_fill(0, [1, 2], [1, 1], ["a", "b"]) == [0, 0]
    assert water_fill(-3, [1, 2], [1, 1], ["a", "b"]) == [0, 0]


def test_proportional_scales_guarantees() -> None:
    # Mins 60 and 40 with only 50 to share: 30 and 20.
    assert proportional(50, [60, 40], ["a", "b"]) == [30, 20]
    # Two units among three equal mins: the remainders tie, so names decide.
    assert proportional(2, [1, 1, 1], ["c", "a", "b"]) == [0, 1, 1]


@settings(max_examples=500, deadline=None)
@given(
    st.integers(-5, 400),
    st.lists(st.integers(0, 60), max_size=12),
)
def test_proportional_is_the_water_fill_of_the_weights(amount: int, weights: list[int]) -> None:
    """`proportional` shares in one pass what water-filling the weights as needs gives."""
    names = [f"n{i:02d}" for i in range(len(weights))][::-1]  # ties not in index order
    assert proportional(amount, weights, names) == water_fill(amount, weights, weights, names)


def rounds(amount: int, needs: list[int], weights: list[int], names: list[str]) -> list[int]:
    """The semantics' step 4 written as plainly as it reads: each round shares what is left
    by weight among the hungry (floors, then one unit each to the largest remainders, ties
    by name); whoever gets its need keeps only that, the excess goes round again."""
    got = [0] * len(needs)
    hungry = [i for i in range(len(needs)) if needs[i] > 0 and weights[i] > 0]
    left = max(amount, 0)
    while left > 0 and hungry:
        weight = sum(weights[i] for i in hungry)
        share = {i: left * weights[i] // weight for i in hungry}
        order = sorted(hungry, key=lambda i: (-(left * weights[i] % weight), names[i]))
        for i in order[: left - sum(share.values())]:
            share[i] += 1
        left = 0
        for i in list(hungry):
            if got[i] + share[i] >= needs[i]:
                left += got[i] + share[i] - needs[i]
                got[i] = needs[i]
                hungry.remove(i)
            else:
                got[i] += share[i]
    return got


claimants = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 6)), max_size=12)


@settings(max_examples=500, deadline=None)
@given(st.integers(-5, 400), claimants)
def test_water_fill_is_the_rounds_of_the_rule(amount: int, pairs: list[tuple[int, int]]) -> None:
    needs = [n for n, _ in pairs]
    weights = [w for _, w in pairs]
    names = [f"n{i:02d}" for i in range(len(pairs))][::-1]  # ties not in index order
    assert water_fill(amount, needs, weights, names) == rounds(amount, needs, weights, names)


def plain_proportional(amount: int, weights: list[int], names: list[str]) -> list[int]:
    """Largest remainders as the semantics state them: floors of the proportional parts,
    then one unit each to the largest remainders, ties by name."""
    positive = [i for i in range(len(weights)) if weights[i] > 0]
    total = sum(weights[i] for i in positive)
    if amount <= 0:
        return [0] * len(weights)
    if total <= amount:
        return [w if w > 0 else 0 for w in weights]
    got = [0] * len(weights)
    for i in positive:
        got[i] = amount * weights[i] // total
    order = sorted(positive, key=lambda i: (-(amount * weights[i] % total), names[i]))
    for i in order[: amount - sum(got)]:
        got[i] += 1
    return got


#: Claimants that often share one weight (the fast path of a round) and names in any order.
alike = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from([0, 3, 3, 3, 5])), min_size=1, max_size=30
)


@settings(max_examples=500, deadline=None)
@given(st.integers(-5, 600), alike, st.randoms(use_true_random=False))
def test_water_fill_with_one_weight_and_any_name_order_is_the_rounds(
    amount: int, pairs: list[tuple[int, int]], rnd: object
) -> None:
    """The shortcuts (one weight in a round, ties by position after sorting by name) give
    what the plain rounds give, whatever order the names come in."""
    needs = [n for n, _ in pairs]
    weights = [w for _, w in pairs]
    names = [f"n{i:02d}" for i in range(len(pairs))]
    rnd.shuffle(names)  # type: ignore[attr-defined]
    assert water_fill(amount, needs, weights, names) == rounds(amount, needs, weights, names)
    ordered = sorted(names)  # as a Cohort's children are kept
    assert water_fill(amount, needs, weights, ordered) == rounds(amount, needs, weights, ordered)
    # What a Cohort tells it (`accounts.ChildLists`): the names in order, one weight or not.
    told = water_fill(
        amount,
        needs,
        weights,
        ordered,
        in_name_order=True,
        one_weight=len(set(weights)) <= 1,
    )
    assert told == rounds(amount, needs, weights, ordered)
    same = [weights[0]] * len(weights)
    assert water_fill(amount, needs, same, ordered, in_name_order=True, one_weight=True) == rounds(
        amount, needs, same, ordered
    )


@settings(max_examples=500, deadline=None)
@given(
    st.integers(-5, 600),
    st.lists(st.sampled_from([0, 1, 4, 4, 4, 7, 60]), max_size=30),
    st.randoms(use_true_random=False),
)
def test_proportional_is_largest_remainders(amount: int, weights: list[int], rnd: object) -> None:
    names = [f"n{i:02d}" for i in range(len(weights))]
    rnd.shuffle(names)  # type: ignore[attr-defined]
    assert proportional(amount, weights, names) == plain_proportional(amount, weights, names)
