"""How long the status writer waits between two rounds (status_writer.pause)."""

from __future__ import annotations

from quotree_operator.status_writer import pause


def test_rounds_are_half_a_second_apart_when_nothing_is_admitted() -> None:
    assert pause(busy=False, spent=0.01) == 0.5


def test_while_pods_are_admitted_a_round_waits_five_seconds() -> None:
    """A burst moves every quota's numbers: rewriting them all every 2 s cost the API server
    more than the admissions' own writes; every status is current within 5 s."""
    assert pause(busy=True, spent=0.01) == 5.0


def test_a_long_round_waits_three_times_as_long_but_never_past_five_seconds() -> None:
    assert pause(busy=False, spent=0.4) == 0.4 * 3
    assert pause(busy=False, spent=60.0) == 5.0
