"""Hypothesis profiles for every test directory.

`HYPOTHESIS_PROFILE=ci` (set by `.ci/run`): each property test draws the same examples on
every run (`derandomize`), so a CI run's result is the result of the commit, not of the
day's draw. Without it (the default, `make test` on a developer's machine) every run draws
new examples, and `make fuzz` runs the property tests over several fresh seeds: that is
where the rare cases are found (and then kept as regression tests).
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "explore"))
