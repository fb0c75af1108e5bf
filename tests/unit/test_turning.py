"""Which file operations take a turn of the world's (``filesystem.hooks.Turning``,
``filesystem.mounts.Code``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.filesystem.hooks import NoHooks, Turning
from harness.filesystem.mounts import Code, Mount
from harness.filesystem.resolution import Resolved

DISK = Mount("/", scope="host", base="overlay")
CODE = ("/opt/venv/lib/python3.10/site-packages", "/opt/harness")


def turns(op: str, path: str, mount: Mount = DISK, dst: str | None = None) -> list[tuple]:
    taken: list[tuple] = []
    turning = Turning(NoHooks(), lambda *a: taken.append(a))
    view = SimpleNamespace(rank=0, host=0, code=Code.of(CODE))

    def at(p: str) -> Resolved:
        return Resolved(p, mount, "host-0", p, None, None, None)

    turning.before(view, op, at(path), None if dst is None else at(dst))
    return taken


@pytest.mark.parametrize("op", ["stat", "open-read", "read", "listdir"])
def test_a_look_at_the_code_every_host_has_takes_no_turn(op):
    assert turns(op, "/opt/venv/lib/python3.10/site-packages/torch/__init__.py") == []
    assert turns(op, "/opt/harness") == []


def test_a_stat_on_the_way_to_the_code_takes_none_but_a_listing_there_does():
    assert turns("stat", "/opt/venv") == [] and turns("stat", "/opt") == []
    assert turns("listdir", "/opt") == [("listdir", "/opt", None, "host-0")]


@pytest.mark.parametrize("op", ["open-write", "write", "unlink", "mkdir"])
def test_a_change_to_the_code_takes_its_turn(op):
    path = "/opt/harness/x.py"
    assert turns(op, path) == [(op, path, None, "host-0")]


def test_a_name_that_only_begins_like_the_code_is_not_the_code():
    assert turns("stat", "/opt/harness-data/cfg.json") == [
        ("stat", "/opt/harness-data/cfg.json", None, "host-0")]
    assert turns("open-read", "/opt/venv/cfg.json") == [
        ("open-read", "/opt/venv/cfg.json", None, "host-0")]


def test_a_rename_out_of_the_code_takes_its_turn():
    assert turns("rename", "/opt/harness/a", dst="/tmp/a") == [
        ("rename", "/opt/harness/a", "/tmp/a", "host-0")]
