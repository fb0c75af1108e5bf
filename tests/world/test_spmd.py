"""SPMD worlds: one process per host (``v4-64-spmd``, ``v6e-256-spmd``), ``xr.use_spmd()``
answering as torch_xla 2.9, and a step that spans every host."""

from __future__ import annotations

import pytest

from harness import HANG, PASS, run_world
from harness.filesystem.mounts import Mount
from harness.reports.diagnosis import describe
from harness.topology import get_topology

from support import TARGETS_DIR, USER_TARGETS_DIR, run_cli_here

TARGETS = TARGETS_DIR / "spmd_targets.py"


def target(name: str) -> str:
    return f"{TARGETS}:{name}"


def test_spmd_topologies_run_one_process_per_host_over_every_chip():
    for name, hosts, chips in (("v4-64-spmd", 8, 32), ("v6e-256-spmd", 64, 256)):
        topology = get_topology(name)
        assert (topology.hosts, topology.ranks_per_host, topology.spmd) == (hosts, 1, True)
        assert topology.world_size * topology.devices_per_process == chips


def test_v6e_256_spmd_is_seed_004s_pod_with_its_mounts():
    from harness.filesystem.mounts import default_table

    table = default_table(get_topology("v6e-256-spmd"), "/h", "/w")
    assert table.get("/mnt/checkpoints").consistency == "object"
    assert table.get("/mnt/data").mode == "ro"


def test_use_spmd_makes_each_process_one_virtual_device_as_2_9_does():
    result = run_world(target("answers"), topology="v4-64-spmd", timeout=60)
    assert result.outcome == PASS, describe(result)
    for rank in result.ranks:
        seen = rank.value
        assert seen["before"] == {"is_spmd": False}
        assert seen["after"] == {
            "is_spmd": True, "world_size": 1, "global_ordinal": 0, "local_ordinal": 0,
            "process_index": rank.rank, "process_count": 8, "global_device_count": 1,
            "global_runtime_device_count": 32, "addressable_runtime_device_count": 4,
            "is_master_ordinal": True, "host_index": rank.rank}
        # the first call is quiet; a second one warns that XLA_USE_SPMD is set
        assert seen["warned"] == [[], ["XLA_USE_SPMD is being deprecated. Use to"]]
        assert seen["env"] == [], "an SPMD process is no PJRT spawn's: no per-chip variables"


def test_use_spmd_after_the_device_was_used_warns_and_goes_on():
    """(The real one moves the tensors it has to the virtual device; the shim's are CPU
    tensors, which stay as they are.)"""
    result = run_world(target("used_then_spmd"), topology="2x1", timeout=60)
    assert result.outcome == PASS, describe(result)
    assert [r.value for r in result.ranks] == [
        [[2, r], ["Replicating tensors already initialized on"], [1, 0]] for r in range(2)]


def test_use_spmd_where_each_chip_has_its_process_is_not_modelled_and_says_why():
    result = run_world(target("spmd_on_one_process_per_chip"), topology="1x4", timeout=60)
    assert result.outcome == PASS, describe(result)
    said = result.ranks[0].value
    assert said.startswith("NotModelledError: torch_xla.runtime.use_spmd"), said
    assert "4 processes per host" in said and "v4-64-spmd" in said


@pytest.mark.parametrize("steps", [0, 2])
def test_a_host_that_leaves_an_spmd_step_leaves_the_others_waiting_in_it(steps):
    result = run_world(target("one_host_leaves_after"), args=(steps,), topology="4x1",
                       timeout=60)
    assert result.outcome == HANG, describe(result)
    assert result.ranks[1].value == "left"
    assert "sync" in result.hang_report and "rank 1" in result.hang_report, result.hang_report


def test_an_spmd_topology_implies_the_2_9_profile():
    from harness.world.config import WorldConfig

    assert WorldConfig(topology="v4-64-spmd").profile == "current"
    assert WorldConfig(topology="v4-64").profile == "legacy"


def test_exec_refuses_the_legacy_profile_on_an_spmd_topology(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('never')\n")
    out = run_cli_here("exec", "-t", "v4-64-spmd", "--profile", "legacy", "--", "python",
                       str(script))
    assert out.returncode == 2, out.stdout + out.stderr
    said = out.stdout + out.stderr
    assert "v4-64-spmd runs SPMD" in said and "--profile current" in said, said


def test_a_mesh_and_sharding_annotations_are_checked_as_2_9_checks_them():
    result = run_world(target("shards_as_the_docs_show"), topology="v4-64-spmd", timeout=60)
    assert result.outcome == PASS, describe(result)
    said = result.ranks[3].value
    assert said == {
        "before_use_spmd": "Please enable SPMD via `torch_xla.runtime.use_spmd()`",
        "returns_the_tensor": True, "logical_mesh": (16, 2), "hybrid": (8, 4),
        "too_few_devices": "AssertionError: Number of device IDs (8) must match the global "
                           "number of devices (32)",
        "spec_length": "AssertionError: Partition spec length (1) should be equal to the input "
                       "rank (2).",
        "axis_twice": "AssertionError: Each device mesh dimension should appear at most once "
                      "in partition_spec.",
        "multislice": "ValueError: Invalid dcn_mesh_shape for single slice mesh"}


def test_a_strangers_spmd_script_runs_unmodified_one_process_per_host():
    """tests/user_targets/spmd_train.py, written from torch_xla's SPMD guide, as
    ``harness exec -t v4-64-spmd -- python spmd_train.py`` runs it."""
    script = USER_TARGETS_DIR / "spmd_train.py"
    result = run_world(argv=(str(script),), topology="v4-64-spmd", timeout=600,
                       cwd=str(script.parent))
    assert result.outcome == PASS, describe(result)
    assert len(result.ranks) == 8
    said = [r.stdout for r in result.ranks if "trained" in (r.stdout or "")]
    assert len(said) == 1 and "on 32 devices over 8 hosts" in said[0], said
    assert sum(e.kind == "call" and e.op == "sync" for e in result.history) == 5 * 8


def test_the_distributed_checkpoint_guides_trainer_runs_unmodified_under_torchrun():
    """tests/user_targets/spmd_checkpoint_train.py, written as torch_xla 2.9's
    distributed-checkpoint guide shows (a gloo group from xla://, CheckpointManager saving
    asynchronously), as ``harness exec -t v4-64-spmd -- torchrun --nproc_per_node=1 ...``
    runs it: 8 processes, one per host, each tracking the same committed steps, each with
    the same model."""
    script = USER_TARGETS_DIR / "spmd_checkpoint_train.py"
    result = run_world(argv=("torchrun", "--nproc_per_node=1", str(script), "--ckpt-dir",
                             "/mnt/checkpoints/run", "--steps", "25"),
                       topology="v4-64-spmd", timeout=600, cwd=str(script.parent),
                       mounts=[Mount("/mnt/checkpoints", scope="shared")])
    assert result.outcome == PASS, describe(result)
    lines = [line for r in result.ranks for line in (r.stdout or "").splitlines()
             if line.startswith("process ")]
    assert sorted(int(line.split()[1]) for line in lines) == list(range(8)), lines
    assert {line.split(" ", 2)[2] for line in lines} == \
        {lines[0].split(" ", 2)[2]}, lines  # the same model, the same steps everywhere
    assert "steps [0, 10, 20]" in lines[0]
    # the manager's process group is gloo's, on the world: its saves are collectives there
    assert any(e.kind == "call" and (e.detail or {}).get("group", "").startswith("1:")
               for e in result.history)
