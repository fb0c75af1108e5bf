"""The mount table on its own: which mount a virtual path belongs to, its scope
keys and backing directories, and how a path is normalised. Pure data, no world."""

from __future__ import annotations

import posixpath
import sys
import sysconfig

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.filesystem.mounts import (
    Mount,
    MountTable,
    default_table,
    installed_code,
    normalize,
    real_root,
    scope_keys,
    staging_root,
    whiteout_root,
)
from harness.topology import get_topology


def table(*paths: str) -> MountTable:
    return MountTable(tuple(Mount(p) for p in ("/", *paths)))


# -- match: the longest mount containing the path ----------------------------------

def test_longest_prefix_wins_whatever_the_order_mounts_were_given_in():
    t = MountTable((Mount("/mnt"), Mount("/"), Mount("/mnt/data/deep"), Mount("/mnt/data")))
    assert t.match("/mnt/data/deep/x").path == "/mnt/data/deep"
    assert t.match("/mnt/data/deeper").path == "/mnt/data"
    assert t.match("/mnt/data").path == "/mnt/data"
    assert t.match("/mnt/other").path == "/mnt"
    assert t.match("/etc/passwd").path == "/"


def test_a_prefix_of_a_name_is_not_a_parent_directory():
    t = table("/tmp")
    assert t.match("/tmpfile").path == "/"
    assert t.match("/tmp").path == "/tmp"
    assert t.match("/tmp/x").path == "/tmp"


def test_a_table_without_root_has_no_mount_for_other_paths():
    with pytest.raises(LookupError):
        MountTable((Mount("/tmp"),)).match("/etc")


def test_with_mount_replaces_the_mount_at_the_same_path():
    t = table("/tmp").with_mount(Mount("/tmp", scope="rank", mode="ro"))
    assert [m.path for m in t.mounts].count("/tmp") == 1
    assert t.match("/tmp/x").scope == "rank" and t.get("/tmp").mode == "ro"
    assert t.replace("/tmp", consistency="object").get("/tmp").consistency == "object"
    with pytest.raises(KeyError):
        t.replace("/nowhere", mode="rw")


# -- mounts: normalisation, validation, scopes ------------------------------------------

def test_mount_paths_are_normalised_and_must_be_absolute():
    assert Mount("/tmp/").path == "/tmp"
    assert Mount("/a//b/../c").path == "/a/c"
    with pytest.raises(ValueError, match="absolute"):
        Mount("tmp")


@pytest.mark.parametrize("field,value", [("scope", "world"), ("mode", "wo"),
                                         ("base", "tmpfs"), ("consistency", "eventual")])
def test_a_mount_refuses_values_outside_its_vocabulary(field, value):
    with pytest.raises(ValueError, match=field):
        Mount("/x", **{field: value})


def test_scope_keys_name_one_backing_directory_per_sharer():
    topo = get_topology("2x2")  # two hosts of two ranks
    assert Mount("/s", scope="shared").scope_key(3, 1) == "shared"
    assert Mount("/h", scope="host").scope_key(3, 1) == "host-1"
    assert Mount("/r", scope="rank").scope_key(3, 1) == "rank-3"
    assert scope_keys(Mount("/s", scope="shared"), topo) == ["shared"]
    assert scope_keys(Mount("/h", scope="host"), topo) == ["host-0", "host-1"]
    assert scope_keys(Mount("/r", scope="rank"), topo) == [f"rank-{r}" for r in range(4)]


def test_backing_directories_are_apart_per_mount_and_key():
    mounts = [Mount(p) for p in ("/", "/root", "/mnt/a", "/mnt_a", "/mnt%5Fa", "/mnt/a_b", "/mnt_a/b")]
    roots = {f("/sb", m, k) for f in (real_root, whiteout_root, staging_root)
             for m in mounts for k in ("shared", "host-0")}
    assert len(roots) == 3 * len(mounts) * 2
    assert real_root("/sb", Mount("/mnt/checkpoints"), "shared") == "/sb/mounts/mnt_checkpoints/shared"


@given(a=st.text(alphabet="ab_%/", min_size=1, max_size=8), b=st.text(alphabet="ab_%/", max_size=8))
def test_two_mount_paths_never_share_a_slug(a, b):
    first, second = Mount("/" + a), Mount("/" + b)
    assert (first.slug == second.slug) == (first.path == second.path)


def test_relative_is_the_path_below_the_mount_point():
    assert Mount("/mnt/data").relative("/mnt/data") == ""
    assert Mount("/mnt/data").relative("/mnt/data/a/b") == "a/b"
    assert Mount("/").relative("/etc/x") == "etc/x"


def test_normalize_applies_cwd_and_home_without_touching_the_disk():
    assert normalize("out/ckpt", "/work/repo", "/home/u") == "/work/repo/out/ckpt"
    assert normalize("~/.cache/x", "/w", "/home/u") == "/home/u/.cache/x"
    assert normalize("~", "/w", "/home/u") == "/home/u"
    assert normalize("~other/x", "/w", "/home/u") == "/w/~other/x"  # not this user's home
    assert normalize("/a/./b/../c//d", "/w", "/h") == "/a/c/d"
    assert normalize("../..", "/w/x", "/h") == "/"


def test_default_table_overlays_cwd_and_home_under_a_fresh_tmp():
    t = default_table(get_topology("1x1"), home="/tmp/home", cwd="/tmp/ci/repo")
    assert t.match("/tmp/ci/repo/x").base == "overlay"
    assert t.match("/tmp/home/.cache").base == "overlay"
    assert t.match("/tmp/other").base == "fresh"
    assert t.match("/proc/self/status").base == "passthrough"
    assert t.get("/mnt/checkpoints") is None
    assert default_table(get_topology("v6e-256"), "/h", "/w").get("/mnt/checkpoints") \
        .consistency == "object"


# -- the property: match returns the longest mount that contains the path -------------------

_names = st.sampled_from(["a", "b", "ab", "data", "tmp", "x"])
_paths = st.lists(_names, min_size=0, max_size=4).map(lambda parts: "/" + "/".join(parts))


def _contains(mount_path: str, path: str) -> bool:
    return mount_path == "/" or path == mount_path or path.startswith(mount_path + "/")


@given(mount_paths=st.lists(_paths, max_size=8), path=_paths)
def test_match_returns_the_longest_mount_containing_the_path(mount_paths, path):
    t = MountTable(tuple(Mount(p) for p in {"/", *mount_paths}))
    found = t.match(path)
    containing = [p for p in {"/", *mount_paths} if _contains(p, path)]
    assert found.path == max(containing, key=len)
    assert _contains(found.path, path)
    assert posixpath.normpath(found.path) == found.path


def test_default_table_overlays_the_installed_code_under_a_fresh_tmp():
    """A venv under /tmp stays visible to each host, as installed code is on every VM."""
    t = default_table(get_topology("1x1"), home="/h", cwd="/w", installed=("/tmp/venv",))
    assert t.match("/tmp/venv/lib/python3.11/site-packages/torch").base == "overlay"
    assert t.match("/tmp/other").base == "fresh"
    assert sys.prefix in installed_code()
    assert sysconfig.get_paths()["purelib"] in installed_code()
