"""Engine fixes found through the webhooks: denial messages stay one readable line."""

from __future__ import annotations

from typing import Any

import pytest

from quotree import ConfigError, parse_node
from tests.unit.objects import quota


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # A name with a line break used to split the message in two.
        (quota("a\nb", "n"), "ElasticQuota a\\nb: metadata.name must be a valid object name"),
        (
            quota("q", "n", **{"bad\nkey": 1}),
            "ElasticQuota q: spec.bad\\nkey: Extra inputs are not permitted",
        ),
        # A wrong type used to read "spec.min.cpu.str: Input should be a valid string (and 2 more)".
        (
            quota("q", "n", min={"cpu": [1]}),
            "ElasticQuota q: spec.min.cpu: "
            'must be a quantity (a string such as "500m" or a number)',
        ),
        (
            quota("q", "n", min={"cpu": [1], "memory": {}}),
            "ElasticQuota q: spec.min.cpu: "
            'must be a quantity (a string such as "500m" or a number) (and 1 more)',
        ),
    ],
)
def test_parse_errors_are_one_line(obj: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_node(obj)
    assert str(info.value) == expected
    assert "\n" not in str(info.value)
