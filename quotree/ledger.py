"""The ledger of pods: every pod's record, each quota's admitted pods and pending queue.

Why a module of its own: the engine takes pods in (`engine.py`), the decision loop
admits and evicts them (`decide.py`), the reports count them (`status.py`); all of them
read and write the same records. The ledger owns them and the bookkeeping that says
which quotas a decision round must look at again (`touched`, `released_in`), so that no
part keeps a copy.
"""

from __future__ import annotations

import itertools

from quotree.pods import PodRecord, QuotaPods

__all__ = ["Ledger"]


class Ledger:
    """The pods the engine knows, by key, and by quota."""

    def __init__(self) -> None:
        self.pods: dict[str, PodRecord] = {}
        #: quota -> its admitted pods and pending queue (in every tree that charges them)
        self.quota_pods: dict[str, QuotaPods] = {}
        self.by_namespace: dict[str, set[str]] = {}  # namespace -> keys of its pods
        #: quotas whose pods or configuration changed since the last round
        self.touched: set[str] = set()
        #: quotas of other trees that a pod left (or kept, its eviction refused): the queues
        #: of the pods also charged to them look again
        self.released_in: set[str] = set()
        self.unresolved: dict[str, PodRecord] = {}  # gated pods no quota will take
        self.unannounced: dict[str, str] = {}  # their reasons, until the next round
        #: pods of pod groups let in: pod -> (its group, its rank), read as it is taken in
        self.grouped: dict[str, tuple[str, tuple[int, float, str]]] = {}
        #: pods being evicted (their resources on their way back), by key
        self.evicting: set[str] = set()
        self.arrivals = itertools.count()  # the order pods came in
        self.admissions = itertools.count(1)  # the order pods were admitted in
        #: How many times a pod started or stopped being evicted, or was gone while being
        #: evicted (`intake.PodIntake.forget`): what the eviction planner's list of
        #: evictions under way is kept against.
        self.eviction_changes = 0

    def queue(self, quota: str) -> QuotaPods:
        """Quota `quota`'s pods (made empty when new)."""
        pods = self.quota_pods.get(quota)
        if pods is None:
            pods = self.quota_pods[quota] = QuotaPods(quota)
        return pods

    def set_evicting(self, record: PodRecord, evicting: bool) -> None:
        """The pod is being evicted (its resources on their way back), or no longer."""
        assert record.quota is not None
        if evicting:
            self.evicting.add(record.key)
        else:
            self.evicting.discard(record.key)
        self.eviction_changes += 1
        self.quota_pods[record.quota].set_evicting(record, evicting)
        for other in record.also:
            self.quota_pods[other].set_evicting(record, evicting)
