"""Which ranks, which operation, which path or tag, which occurrences: a
fault's trigger, matched by the rank's fault engine at each operation."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

#: Operations a trigger can name.
OPS = ("open-read", "open-write", "read", "write", "fsync", "close", "stat", "listdir",
       "mkdir", "remove", "rmdir", "rename", "link", "symlink", "truncate", "utime", "chmod",
       "collective", "start")
#: The operations of a file (every one the view reports except close).
FILE_OPS = ("open-read", "open-write", "read", "write", "fsync", "stat", "listdir", "mkdir",
            "remove", "rmdir", "rename", "link", "symlink", "truncate", "utime", "chmod")


@dataclass(frozen=True)
class Trigger:
    """Which ranks, which operation, which path or tag, which occurrences."""

    ranks: tuple[int, ...] | None = None
    hosts: tuple[int, ...] | None = None
    op: tuple[str, ...] | None = None
    path: str | None = None  # a glob on the virtual path
    paths: tuple[str, ...] | None = None  # globs a role resolved to (none: matches nothing)
    tag: str | None = None  # a glob on a collective's op name or tag
    occurrences: tuple[int, ...] | None = None  # 1-based, counted per rank, fault and life
    after_ms: int | None = None  # time from the rank's start
    lives: tuple[int, ...] | None = None  # which incarnations (0 = first start) it fires in

    def selects(self, rank: int, host: int, life: int = 0) -> bool:
        return ((self.ranks is None or rank in self.ranks)
                and (self.hosts is None or host in self.hosts)
                and (self.lives is None or life in self.lives))

    def matches(self, op: str, path: str | None = None, tag: str | None = None) -> bool:
        if self.op is not None and op not in self.op:
            return False
        if self.path is not None and (path is None or not fnmatch.fnmatchcase(path, self.path)):
            return False
        if self.paths is not None and (path is None or not any(
                fnmatch.fnmatchcase(path, g) for g in self.paths)):
            return False
        if self.tag is not None and (tag is None or not fnmatch.fnmatchcase(tag, self.tag)):
            return False
        return True


class PlanError(ValueError):
    """A fault that cannot be planned; ``field`` names the offending key as
    written, ``index`` the fault's place in the list."""

    def __init__(self, message: str, field: str | None = None, index: int | None = None) -> None:
        super().__init__(message)
        self.field, self.index = field, index

    @property
    def loc(self) -> tuple[str | int, ...]:
        """Where in a scenario: ``("faults", 0, "count")``."""
        return ("faults", self.index or 0) + ((self.field,) if self.field else ())
