"""Engine fixes found through the webhooks: denial messages stay one readable line."""

from __future__ import annotations

from typing import Any

import pytest

from quotree import ConfigError, parse_member
from tests.unit.objects import quota


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # A name with a line break used to split the message in two.
        (quota("a\nb", "n"), "ElasticQuota a\\nb: metadata.name must be a valid object name"),
        (quota("q", "n", **{"bad\nkey": 1}), "ElasticQuota q: spec.bad\\nkey: unknown field"),
        # A wrong type used to read "spec.min.cpu.str: Input should be a valid string (and 2 more)".
        (
            quota("q", "n", min={"cpu": [1]}),
            "ElasticQuota q: spec.min.cpu: "
            'must be a quantity (a string such as "500m" or a number), not [1]',
        ),
        # Every problem is listed: fixing one never reveals another.
        (
            quota("q", "n", min={"cpu": [1], "memory": {}}),
            "ElasticQuota q: spec.min.cpu: "
            'must be a quantity (a string such as "500m" or a number), not [1]; '
            'spec.min.memory: must be a quantity (a string such as "500m" or a number), not {}',
        ),
        (
            quota("q", "n", mni={"cpu": "1"}, max={"cpu": "x"}, preemption=5),
            "ElasticQuota q: spec.max: cpu: 'x' is not a quantity "
            '(want e.g. "500m", "4", "40Gi"); spec.preemption: must be an object, not 5; '
            "spec.mni: unknown field",
        ),
    ],
)
def test_parse_errors_are_one_line(obj: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_member(obj)
    assert str(info.value) == expected
    assert "\n" not in str(info.value)
