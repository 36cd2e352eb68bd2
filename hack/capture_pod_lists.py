"""Keep one namespace's pod list, as a real API server writes it in JSON and protobuf, as
the unit tests' data (tests/unit/operator/data/podlist.json and podlist.pb).

Why: the operator's start-up reads the pod list in protobuf (podproto.py), and
tests/unit/operator/test_podproto.py checks without a cluster that every pod reads the
same from both encodings, on bytes a real API server wrote. Run it against the test
cluster (`make cluster-up`):
python hack/capture_pod_lists.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "operator")]

from tests.e2e import pod_lists  # noqa: E402


def main() -> None:
    pod_lists.settle()
    try:
        listed, proto = pod_lists.answers()
    finally:
        pod_lists.clean_up()
    (pod_lists.DATA / "podlist.json").write_bytes(listed)
    (pod_lists.DATA / "podlist.pb").write_bytes(proto)
    print(f"wrote {pod_lists.DATA / 'podlist.json'} and {pod_lists.DATA / 'podlist.pb'}")


if __name__ == "__main__":
    main()
