"""What the pod CREATE webhook needs to know about pod groups, kept where it can be copied.

Why a module of its own: the webhook runs in a process of its own (the shells'
webhooks/quotree_webhooks/worker.py) that sees no engine, only copies the operator sends.
To group a Job's pods it must know the Job's parallelism, and to refuse a pod that
disagrees with its group, what the group's existing pods declared. `GroupBook` holds both,
filled by the operator (the Jobs it watches, `Engine.group_declaration` after each pod it
takes in) and copied to the webhook process as a whole once, then change by change
(`take_changes` / `apply`). Pure data: no I/O, no engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from quotree.groups import GroupSpec, JobFacts

__all__ = ["Declaration", "GroupBook"]

#: What a group's existing pods declared: (quota, spec, priority), as `groups.disagreement`
#: compares them.
Declaration = tuple[str | None, GroupSpec, int]


@dataclass(slots=True)
class GroupBook:
    """Jobs by "namespace/name" and group declarations by "namespace/group"."""

    jobs: dict[str, JobFacts] = field(default_factory=dict)
    declarations: dict[str, Declaration] = field(default_factory=dict)
    #: What changed since the last `take_changes` (None: removed).
    _job_changes: dict[str, JobFacts | None] = field(default_factory=dict)
    _declaration_changes: dict[str, Declaration | None] = field(default_factory=dict)

    # ------------------------------------------------------------ what the webhook asks

    def job(self, namespace: str, name: str) -> JobFacts | None:
        return self.jobs.get(f"{namespace}/{name}")

    def declaration(self, namespace: str, group: str) -> Declaration | None:
        return self.declarations.get(f"{namespace}/{group}")

    # ------------------------------------------------------------ what the operator tells

    def set_job(self, facts: JobFacts) -> None:
        if self.jobs.get(facts.key) != facts:
            self.jobs[facts.key] = facts
            self._job_changes[facts.key] = facts

    def forget_job(self, key: str) -> None:
        if self.jobs.pop(key, None) is not None:
            self._job_changes[key] = None

    def declare(self, key: str, declaration: Declaration | None) -> None:
        """Group `key` ("namespace/group") now declares this (None: it has no pods left)."""
        if self.declarations.get(key) == declaration:
            return
        if declaration is None:
            del self.declarations[key]
        else:
            self.declarations[key] = declaration
        self._declaration_changes[key] = declaration

    # ------------------------------------------------------------ copies

    @property
    def changed(self) -> bool:
        return bool(self._job_changes or self._declaration_changes)

    def copy(self) -> GroupBook:
        """The whole book as it is now (what a new webhook process starts from); the
        changes so far are in it, so they are taken too."""
        self._job_changes.clear()
        self._declaration_changes.clear()
        return GroupBook(dict(self.jobs), dict(self.declarations))

    def take_changes(
        self,
    ) -> tuple[dict[str, JobFacts | None], dict[str, Declaration | None]]:
        """What changed since the last call (or `copy`), for `apply` on a copy."""
        jobs, self._job_changes = self._job_changes, {}
        declarations, self._declaration_changes = self._declaration_changes, {}
        return jobs, declarations

    def apply(
        self,
        jobs: dict[str, JobFacts | None],
        declarations: dict[str, Declaration | None],
    ) -> None:
        """Bring a copy up to date with what `take_changes` gave on the original."""
        for key, facts in jobs.items():
            if facts is None:
                self.jobs.pop(key, None)
            else:
                self.jobs[key] = facts
        for key, declaration in declarations.items():
            if declaration is None:
                self.declarations.pop(key, None)
            else:
                self.declarations[key] = declaration
