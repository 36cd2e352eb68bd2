"""GroupBook (quotree/group_book.py): what the pod CREATE webhook knows of Jobs and pod
groups, copied whole once and then change by change."""

from __future__ import annotations

import pickle

from quotree.group_book import GroupBook
from quotree.groups import GroupSpec, JobFacts

TRAIN = JobFacts("ns", "train", "u", parallelism=4, completions=None)


def test_a_copy_kept_up_to_date_by_changes_equals_the_original() -> None:
    book = GroupBook()
    book.set_job(TRAIN)
    book.declare("ns/train", ("q", GroupSpec("train", 4, 4), 0))
    copy = pickle.loads(pickle.dumps(book.copy()))  # as the webhook process gets it
    assert not book.changed
    book.set_job(JobFacts("ns", "etl", "v", parallelism=2, completions=None))
    book.forget_job("ns/train")
    book.declare("ns/train", None)
    book.declare("ns/mpi", ("q", GroupSpec("mpi", 3, 2), 5))
    assert book.changed
    copy.apply(*pickle.loads(pickle.dumps(book.take_changes())))
    assert not book.changed
    assert (copy.jobs, copy.declarations) == (book.jobs, book.declarations)
    assert copy.job("ns", "etl") == book.job("ns", "etl")
    assert copy.job("ns", "train") is None
    assert copy.declaration("ns", "mpi") == ("q", GroupSpec("mpi", 3, 2), 5)


def test_telling_it_what_it_holds_already_is_no_change() -> None:
    book = GroupBook()
    book.set_job(TRAIN)
    book.declare("ns/train", ("q", GroupSpec("train", 4, 4), 0))
    book.take_changes()
    book.set_job(TRAIN)
    book.declare("ns/train", ("q", GroupSpec("train", 4, 4), 0))
    book.declare("ns/other", None)
    book.forget_job("ns/other")
    assert not book.changed
