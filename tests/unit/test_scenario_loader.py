"""Every malformed scenario file is refused at load with its file and line: one test
per class of malformed input (reading, top-level fields, mounts)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.scenarios import ScenarioError, load_scenario

from support import SCENARIO_HEAD

GOOD = SCENARIO_HEAD.format(name="mine") + "timeout: 3\n"


def refused(path: Path, line: int | None, *words: str) -> ScenarioError:
    """Load ``path``, expecting a refusal at ``line`` whose message has ``words``."""
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    err = info.value
    assert str(err).startswith(f"{path}:{line}: " if line else f"{path}: "), str(err)
    for word in words:
        assert word in str(err), str(err)
    return err


def write_bytes(tmp_path: Path, data: bytes, name: str = "mine") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(data)
    return path


# -- reading -------------------------------------------------------------------------------

@pytest.mark.parametrize("data,line,words", [
    (GOOD.encode() + b"description: caf\xe9\n", 8, ("must be UTF-8", "0xe9")),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00", 1, ("unacceptable character", "binary")),
    (GOOD.encode() + b"x: \x00\x01\n", 8, ("unacceptable character",)),
    (b"", None, ("must be a mapping of fields, not empty",)),
    (b"# only a comment\n", None, ("not empty",)),
    (b"- a list\n", 1, ("not a list",)),
    (b"a: " + b"[" * 10_000 + b"]" * 10_000 + b"\n", 1, ("nested deeper than",)),
    (b"{" * 10_000, 1, ("nested deeper than",)),
    (b"a: &a [*a]\n", 1, ("nested deeper than", "aliases")),
    (GOOD.encode() + b"1: one\n", 8, ("key '1' is not a string",)),
    (GOOD.encode() + b"[a, b]: one\n", 8, ("not a string",)),
    (GOOD.encode() + b"workload: config-sync\n", 8, ("key 'workload' is written twice",)),
    (GOOD.encode() + b"inputs:\n  x: 1\n  x: 2\n", 10, ("key 'x' is written twice",)),
    (GOOD.encode() + b"--- \nname: again\n", 8, ("not valid YAML", "single document")),
])
def test_a_file_that_is_not_a_small_yaml_mapping_is_refused_with_its_line(
        tmp_path, data, line, words):
    refused(write_bytes(tmp_path, data), line, *words)


def test_a_directory_or_a_missing_file_is_refused_naming_it(tmp_path):
    (tmp_path / "dir.yaml").mkdir()
    refused(tmp_path / "dir.yaml", None, "must be a regular file", "a directory")
    refused(tmp_path / "absent.yaml", None, "cannot read", "No such file")


def test_a_huge_file_is_refused_without_parsing_it(tmp_path):
    path = write_bytes(tmp_path, GOOD.encode() + b"#" * (2 << 20))
    refused(path, None, "larger than the 1 MiB")


def test_billion_laughs_is_refused_quickly(tmp_path):
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    path = write_bytes(tmp_path, ("\n".join(lines) + "\n").encode())
    start = time.monotonic()
    refused(path, 1, "more than 100000 values once aliases are expanded")
    assert time.monotonic() - start < 5


def test_a_modest_alias_still_loads(tmp_path):
    path = write_bytes(tmp_path, GOOD.replace('description: a test scenario',
                                              'description: &d a test scenario').encode()
                       + b"finding2: *d\n")
    refused(path, 8, "unknown key")  # the alias resolved; the key is what is wrong


@pytest.mark.parametrize("literal", ["99999999999999999999", "-9223372036854775809",
                                     "1" * 5000, "0x" + "f" * 17])
def test_an_integer_no_machine_word_holds_is_refused_anywhere(tmp_path, literal):
    path = write_bytes(tmp_path, (GOOD + f"inputs:\n  num_samples: {literal}\n").encode())
    refused(path, 9, "integer", "too large" if len(literal) > 64 else "outside")


# -- top-level fields ----------------------------------------------------------------------

@pytest.mark.parametrize("old,new,line,field,words", [
    ("timeout: 3", "timeout: true", 7, "timeout", ("valid number",)),
    ("timeout: 3", "timeout: '3'", 7, "timeout", ("valid number",)),
    ("timeout: 3", "timeout: .nan", 7, "timeout", ("finite number",)),
    ("timeout: 3", "timeout: .inf", 7, "timeout", ("finite number",)),
    ("timeout: 3", "timeout: -.inf", 7, "timeout", ("finite number",)),
    ("timeout: 3", "timeout: 1.0e+400", 7, "timeout", ("finite number",)),
    ("timeout: 3", "timeout: 0", 7, "timeout", ("greater than 0",)),
    ("timeout: 3", "timeout: 86401", 7, "timeout", ("less than or equal to 86400",)),
    ("name: mine", "name: 7", 1, "name", ("valid string",)),
    ("description: a test scenario", "description: 5", 3, "description", ("valid string",)),
    ("description: a test scenario", "description: [a]", 3, "description", ("valid string",)),
    ('finding: "seed 000"', "finding: 3", 4, "finding", ("valid string",)),
    ('finding: "seed 000"', "finding: null", 4, "finding", ("valid string",)),
    ("workload: config-sync", "workload: {a: 1}", 2, "workload", ("valid string",)),
    ("expect: pass", "expect: true", 6, "expect", ("'pass' or 'fail-loudly'",)),
    ("timeout: 3", "inputs: [1]", 7, "inputs", ("valid dictionary",)),
    ("timeout: 3", "mounts: 5", 7, "mounts", ("valid list",)),
])
def test_a_top_level_field_of_the_wrong_type_is_refused(tmp_path, old, new, line, field, words):
    assert old in GOOD
    err = refused(write_bytes(tmp_path, GOOD.replace(old, new).encode()), line, *words)
    assert err.field == field


def test_a_whole_number_timeout_is_still_a_timeout(tmp_path):
    assert load_scenario(write_bytes(tmp_path, GOOD.encode())).timeout == 3.0


# -- mounts --------------------------------------------------------------------------------

MOUNTS = GOOD + "mounts:\n  - path: /mnt/data\n    scope: shared\n  - {path: /mnt/b, scope: host}\n"


@pytest.mark.parametrize("old,new,line,field,words", [
    ("path: /mnt/data", "path: /mnt/../etc", 9, "mounts.0.path", ("'..'",)),
    ("path: /mnt/data", "path: ..", 9, "mounts.0.path", ("absolute",)),
    ("path: /mnt/data", 'path: "/mnt/a\\0b"', 9, "mounts.0.path", ("NUL",)),
    ("path: /mnt/data", 'path: "/mnt/a\\nb"', 9, "mounts.0.path", ("control character",)),
    ("path: /mnt/data", "path: mnt/data", 9, "mounts.0.path", ("absolute",)),
    ("path: /mnt/data", "path: ~user/x", 9, "mounts.0.path", ("absolute",)),
    ("path: /mnt/data", "path: ''", 9, "mounts.0.path", ("absolute",)),
    ("path: /mnt/data", "path: 5", 9, "mounts.0.path", ("valid string",)),
    ("path: /mnt/data", "path: /proc", 9, "mounts.0.path", ("kernel's /proc, /sys, /dev",)),
    ("path: /mnt/data", "path: /sys/fs/", 9, "mounts.0.path", ("kernel's",)),
    ("path: /mnt/data", "path: //dev/shm", 9, "mounts.0.path", ("kernel's",)),
    ("path: /mnt/data", "path: /" + "a" * 200, 9, "mounts.0.path", ("at most 160",)),
    ("path: /mnt/b,", "path: /mnt/data/,", 11, "mounts.1.path", ("already mounts.0",)),
    ("scope: shared", "scope: shared\n    delay_ms: 5", 11, "mounts.0.delay_ms",
     ("consistency 'delayed' only, not 'local'",)),
    ("scope: shared", "consistency: delayed\n    delay_ms: -1", 11, "mounts.0.delay_ms",
     ("greater than or equal to 0",)),
    ("scope: shared", "consistency: delayed\n    delay_ms: 86400001", 11, "mounts.0.delay_ms",
     ("less than or equal to 86400000",)),
    ("scope: shared", "consistency: delayed\n    delay_ms: true", 11, "mounts.0.delay_ms",
     ("valid integer",)),
    ("scope: shared", "consistency: delayed\n    delay_ms: 1.5", 11, "mounts.0.delay_ms",
     ("valid integer",)),
    ("scope: shared", "scope: everywhere", 10, "mounts.0.scope", ("'shared', 'host' or",)),
])
def test_a_mount_that_cannot_be_mounted_is_refused(tmp_path, old, new, line, field, words):
    assert old in MOUNTS
    err = refused(write_bytes(tmp_path, MOUNTS.replace(old, new).encode()), line, *words)
    assert err.field == field


def test_mounts_that_can_be_mounted_load(tmp_path):
    text = MOUNTS.replace("scope: shared", "consistency: delayed\n    delay_ms: 600000")
    text += "  - {path: ~/.cache}\n  - {path: '~'}\n  - {path: /mnt/data/sub}\n"
    scenario = load_scenario(write_bytes(tmp_path, text.encode()))
    assert [m.path for m in scenario.mount_list("/home/u")] == \
        ["/mnt/data", "/mnt/b", "/home/u/.cache", "/home/u", "/mnt/data/sub"]


@pytest.mark.parametrize("path,delay", [("a", 0), ("/a\0", 0), ("/a", -1),
                                        ("/a", 86_400_001)])
def test_a_mount_built_in_code_checks_the_same(path, delay):
    from harness.filesystem.mounts import Mount
    with pytest.raises(ValueError):
        Mount(path, delay_ms=delay)


# -- faults, at the loader's edge ----------------------------------------------------------

def test_a_fault_parameter_the_fault_checks_let_through_is_still_refused(tmp_path):
    text = GOOD + "faults:\n  - {kind: kill, rank: 0, op: 5, path: /tmp/x}\n"
    err = refused(write_bytes(tmp_path, text.encode()), 9)
    assert err.field is not None and err.field.startswith("faults")
