"""`quotree simulate examples/demo/` draws the tree the README shows after `make run`.

The README's block is `kubectl quotree tree` on the local control plane. Two things
legitimately differ, and are compared only where they agree:

- the nlp Job: kwok completes a Job's pods at once, so on the cluster nlp ends idle,
  while the simulation shows the Job running (its 4 pods, 16 cpu). The rows of nlp and
  of the Cohorts above it (research, company) are compared on MIN and MAX only, and
  the pod count on the pending pods only;
- pod names: the cluster's pod-template-hash and suffixes are random; the pending
  builders pod is compared with its name's hash and suffix left out.
"""

from __future__ import annotations

import re
from pathlib import Path

from quotree.simulate import render_table, simulate, to_json

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"builders-[a-z0-9]+-[a-z0-9]{5}")
#: The rows the finished Job changes (their REQUEST, RUNTIME and USED columns).
JOB_ROWS = ("company (coh)", "research (coh)", "nlp (eq)")


def readme_tree() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("$ kubectl quotree tree\n", 1)[1].split("```", 1)[0]
    return block.rstrip("\n").splitlines()


def simulated_tree() -> list[str]:
    return render_table(simulate([ROOT / "examples" / "demo"])).rstrip("\n").splitlines()


def _rows(lines: list[str]) -> list[list[str]]:
    """The tree's rows (header and pods left out), each with the member it belongs to."""
    rows, member = [], ""
    for line in lines[2:]:
        if not line.strip():
            break
        if "(coh)" in line or "(eq)" in line:
            member = line[: line.index(")") + 1].lstrip("│├└─ ")
        rows.append([member, *line.split()[-6:]])
    return rows


def test_the_demo_directory_simulates_to_the_readme_tree() -> None:
    readme, simulated = readme_tree(), simulated_tree()
    assert simulated[:2] == readme[:2]  # capacity (the demo's members) and column titles
    assert [line[:34] for line in simulated[2:14]] == [line[:34] for line in readme[2:14]]
    for want, got in zip(_rows(readme), _rows(simulated), strict=True):
        if want[0] in JOB_ROWS:
            assert got[:4] == want[:4]  # member, resource, MIN, MAX
        else:
            assert got == want


def test_the_pending_builders_pod_is_the_readme_one() -> None:
    readme, simulated = readme_tree(), simulated_tree()
    pods = [line for line in readme if line.startswith("pods: ")]
    assert len(pods) == 1
    pending = pods[0].split(", ")[-1]
    assert any(line.startswith("pods: ") and line.endswith(pending) for line in simulated)
    want = [NAME.sub("builders-*", line).split() for line in readme if "builders-" in line]
    got = [NAME.sub("builders-*", line).split() for line in simulated if "builders-" in line]
    assert got == want
    assert want[0][:2] == ["demo-ci/builders-*", "pending"]


def test_the_demo_job_runs_in_the_simulation() -> None:
    report = to_json(simulate([ROOT / "examples" / "demo"]))
    job = {k: e["state"] for k, e in report["pods"].items() if k.startswith("demo-nlp/")}
    assert len(job) == 4
    assert set(job.values()) == {"admitted"}
    assert report["nodes"]["nlp"]["used"]["cpu"] == "16"  # 12 within min, 4 borrowed
