"""Weighted water-filling with exact integer shares (semantics.md step 4)."""

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
