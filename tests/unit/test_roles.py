"""Roles: derived from a fault-free history, resolved into triggers, leftovers and mounts."""

from __future__ import annotations

import json

from harness.faults.plan import make_plan
from harness.history import Event
from harness.roles import FileUse, Roles, derive
from harness.runner.run import not_exercised
from harness.scenarios import load_scenario

from support import SCENARIO_HEAD


def op(rank: int, what: str, path: str, **detail: object) -> Event:
    return Event(0.0, "file", rank, what, detail={"path": path, "ok": True, **detail})


def handoff_history(path: str = "/tmp/mycfg/config.yaml") -> list[Event]:
    return ([op(0, "stat", "/tmp/mycfg"), op(0, "open-write", path), op(0, "close", path, size=90)]
            + [op(r, "open-read", path) for r in range(1, 8)])


def test_a_file_one_rank_writes_and_the_others_read_is_the_handoff():
    roles = derive(handoff_history())
    (use,) = roles.of("handoff")
    assert (use.path, use.writers, use.readers) == ("/tmp/mycfg/config.yaml", (0,), tuple(range(1, 8)))
    assert roles.paths("handoff-dir") == ("/tmp/mycfg",)
    assert roles.describe("handoff") == \
        "/tmp/mycfg/config.yaml, written by rank 0, read by ranks 1-7"


def test_a_pollers_failed_attempts_make_it_a_reader():
    flag = "/tmp/sync/cfg.json.done"
    history = [op(3, "stat", flag, ok=False, errno=2), op(0, "close", flag, size=0),
               op(3, "stat", flag)]
    assert derive(history).of("handoff") == (FileUse(flag, (0,), (3,)),)


def test_a_file_written_under_a_staging_name_and_renamed_is_one_handoff():
    tmp, final = "/d/.cfg.yaml.x8f2", "/d/cfg.yaml"
    history = [op(0, "open-write", tmp), op(0, "close", tmp, size=5),
               op(0, "rename", tmp, dst=final), op(1, "open-read", final)]
    roles = derive(history)
    assert roles.paths("handoff") == (final,)
    assert roles.paths("output") == ()  # the staging name is not a file of its own
    # the next run stages under another random name: the glob still matches it
    assert roles.globs("handoff") == (final, tmp, "/d/*cfg.yaml*")


def test_files_no_other_rank_reads_are_outputs_and_files_nobody_writes_are_inputs():
    history = [op(2, "close", "/ck/w2.pt", size=10), op(2, "open-read", "/ck/w2.pt"),
               op(1, "open-read", "/data/x.npy"), op(1, "open-read", "/data/missing", ok=False)]
    roles = derive(history)
    assert roles.paths("output") == ("/ck/w2.pt",)
    assert roles.paths("input") == ("/data/x.npy",)  # a file that was not there is no input
    assert roles.paths("handoff") == ()


def test_a_directory_opened_to_fsync_it_is_no_input_file():
    """A writer that fsyncs its checkpoint directory opens it for reading: that made the
    directory an "input", and a fault placing a file there met IsADirectoryError."""
    ckpt = "/w/checkpoints/ckpt.json"
    history = [op(0, "close", ckpt + ".tmp", size=9), op(0, "rename", ckpt + ".tmp", dst=ckpt),
               op(0, "open-read", "/w/checkpoints"), op(0, "open-read", "/w/data/stream.jsonl")]
    roles = derive(history)
    assert roles.paths("input") == ("/w/data/stream.jsonl",)
    assert roles.paths("output") == (ckpt,)


def test_roles_round_trip_through_the_cache_form():
    roles = Roles(derive(handoff_history()).uses, {"/tmp/mycfg/config.yaml": b"\x80pickle"})
    assert Roles.from_dict(roles.to_dict()) == roles


def plan(faults: list[dict], roles: Roles | None):
    return make_plan(faults, seed=1, world_size=8, hosts=1, home="/root", roles=roles)


def test_a_fault_aimed_at_a_role_fires_on_the_targets_own_file():
    roles = derive(handoff_history())
    (fault,) = plan([{"kind": "torn-write", "role": "handoff"}], roles).faults
    assert fault.trigger.matches("close", "/tmp/mycfg/config.yaml")
    assert not fault.trigger.matches("close", "/tmp/temp_config.yaml")


def test_a_role_the_target_does_not_have_matches_nothing_and_says_why():
    planned = plan([{"kind": "torn-write", "role": "handoff"}], Roles())
    assert not planned.faults[0].trigger.matches("close", "/tmp/anything")
    assert "resolved to nothing" in planned.unresolved[0]
    reason = not_exercised(planned, [], [], 8)
    assert reason is not None and "torn-write#0" in reason and "handoff" in reason


def test_a_stale_leftover_holds_what_another_run_of_the_target_wrote():
    roles = Roles(derive(handoff_history()).uses, {"/tmp/mycfg/config.yaml": b"lr: 0.001\n"})
    planned = plan([{"kind": "stale-leftover", "role": "handoff"}], roles)
    assert [(lo.path, lo.content) for lo in planned.leftovers] == \
        [("/tmp/mycfg/config.yaml", b"lr: 0.001\n")]
    assert planned.unresolved == {}
    assert not_exercised(planned, [], [], 8) is None  # placed: the world starts with it


def test_a_stale_leftover_of_a_target_whose_files_move_with_its_inputs_is_unresolved():
    roles = derive(handoff_history())  # the other run wrote elsewhere: nothing kept
    planned = plan([{"kind": "stale-leftover", "role": "handoff"}], roles)
    assert planned.leftovers == ()
    assert "depend on its inputs" in planned.unresolved[0]


def test_a_directory_every_user_shares_is_never_placed_as_another_users():
    roles = derive(handoff_history("/tmp/temp_config.yaml"))
    planned = plan([{"kind": "permission-denied", "role": "handoff-dir", "directory": True}], roles)
    assert planned.leftovers == ()
    planned = plan([{"kind": "permission-denied", "role": "handoff-dir", "directory": True}],
                   derive(handoff_history()))
    assert [lo.path for lo in planned.leftovers] == ["/tmp/mycfg"]


def test_a_fault_that_never_fired_leaves_the_cell_unexercised_until_one_fires():
    planned = plan([{"kind": "kill", "rank": 0, "op": "write", "role": "handoff"},
                    {"kind": "kill", "rank": 0, "op": "collective"}], derive(handoff_history()))
    assert "no planned fault fired" in (not_exercised(planned, [], [], 8) or "")
    fired = [Event(0.1, "fault", 0, "kill", detail={"index": 1})]
    assert not_exercised(planned, fired, [], 8) is None  # alternatives: one of them is enough
    no_file = plan([{"kind": "kill", "rank": 0, "op": "write", "role": "handoff"},
                    {"kind": "kill", "rank": 0, "op": "collective"}], Roles())
    assert not_exercised(no_file, fired, [], 8) is None  # a target that shares no file: killed anyway
    assert "resolved to nothing" in (not_exercised(no_file, [], [], 8) or "")


def test_a_mount_aimed_at_a_role_is_mounted_where_the_target_keeps_it(tmp_path):
    path = tmp_path / "ro.yaml"
    path.write_text(SCENARIO_HEAD.format(name="ro") + "mounts:\n  - role: handoff-dir\n    mode: ro\n")
    scenario = load_scenario(path)
    mounts = scenario.mount_list("/root", derive(handoff_history()))
    assert [(m.path, m.mode) for m in mounts] == [("/tmp/mycfg", "ro")]
    assert scenario.unresolved_mounts("/root", Roles()) == [
        "mount on role handoff-dir resolved to nothing: the target has no "
        "directory holding a file one rank writes and another rank reads"]


COLLECTIVE_ONLY = "tests/user_targets/collective_only.py:sync"


def test_a_cell_whose_fault_cannot_happen_is_shown_and_fails_only_a_run_that_requires_it(
        cli, tmp_path):
    args = ("run", "--scenario", "partial-write", "--target", COLLECTIVE_ONLY,
            "--format", "json", "--report-dir", str(tmp_path / "out"))
    shown = cli(*args)
    assert shown.returncode == 0, shown.stderr
    (cell,) = json.loads((tmp_path / "out" / "latest" / "matrix.json").read_text())["cells"]
    assert (cell["outcome"], cell["verdict"]) == ("NOT-EXERCISED", "unexercised")
    assert "role handoff resolved to nothing" in cell["detail"]
    assert cell["roles"] == {"handoff": "nothing (the target has no file one rank writes and "
                                        "another rank reads)"}
    assert "NOT-EXERCISED ○" in shown.stdout and "1 tested nothing" in shown.stdout
    strict = cli(*args, "--require-exercised")
    assert strict.returncode == 1, strict.stderr


def test_a_file_only_appended_to_is_an_output_and_one_written_over_is_state():
    """A worker appending its results batch by batch to one file per worker adds records, as
    uploads do: the pre-emptions aimed at outputs must find it. A checkpoint is written
    over (truncated, renamed onto, or rewritten in place)."""
    results, state, inplace = "/mnt/bucket/scores/worker-0.jsonl", "/w/state.json", "/w/db"

    def opened(path: str, **how: object) -> list[Event]:
        return [op(0, "open-write", path, **how), op(0, "close", path, size=10)]

    history = (opened(results, trunc=False, new=True, append=True)
               + opened(results, trunc=False, new=False, append=True)
               + opened(state, trunc=True, new=True) + opened(state, trunc=True, new=False)
               + opened(inplace, trunc=False, new=True) + opened(inplace, trunc=False, new=False))
    roles = derive(history)
    assert roles.paths("output") == (results,)
    assert roles.paths("state") == (state, inplace)


def test_an_installed_packages_metadata_is_no_role():
    """``importlib.metadata`` reads entry points in a rank, from the checkout in an editable
    install: never the target's input, which a fault would then aim at."""
    history = [op(0, "open-read", "/repo/harness.egg-info/entry_points.txt"),
               op(1, "open-read", "/venv/lib/site-packages/torch-2.9.0.dist-info/METADATA"),
               op(0, "open-read", "/data/train.npy"), op(1, "open-read", "/data/train.npy")]
    assert derive(history).paths("input") == ("/data/train.npy",)
