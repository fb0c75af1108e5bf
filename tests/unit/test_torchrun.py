"""torchrun's command line, read as torch's elastic launcher reads it, and the environment
its agent gives the one worker it starts on a host (``harness/rank/torchrun.py``)."""

from __future__ import annotations

import pytest

from harness.rank import torchrun

HOSTS = [f"t1v-n-harness-w-{h}" for h in range(8)]


def test_both_ways_of_writing_it_are_torchrun() -> None:
    assert torchrun.is_torchrun(["torchrun", "train.py"])
    assert torchrun.is_torchrun(["/usr/bin/torchrun", "train.py"])
    assert torchrun.is_torchrun(["-m", "torch.distributed.run", "train.py"])
    assert not torchrun.is_torchrun(["train.py"])
    assert not torchrun.is_torchrun(["-m", "train"])


def test_a_job_per_host_by_default_as_the_real_one() -> None:
    launch = torchrun.parse(["torchrun", "--nproc_per_node=1", "train.py", "--lr", "0.1"])
    argv, env = torchrun.worker(launch, host=3, hostnames=HOSTS)
    assert argv == ["train.py", "--lr", "0.1"]
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["GROUP_RANK"]) == \
        ("0", "1", "0", "0")
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "29500")
    assert env["TORCHELASTIC_USE_AGENT_STORE"] == "False"


def test_a_static_multi_node_job_numbers_its_nodes_by_host() -> None:
    launch = torchrun.parse(["torchrun", "--nnodes", "8", "--nproc-per-node", "1",
                             "--master_addr", HOSTS[0], "--master-port", "1234", "-m", "pkg.train"])
    argv, env = torchrun.worker(launch, host=5, hostnames=HOSTS)
    assert argv == ["-m", "pkg.train"]
    assert (env["RANK"], env["WORLD_SIZE"], env["GROUP_WORLD_SIZE"]) == ("5", "8", "8")
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == (HOSTS[0], "1234")


def test_a_c10d_rendezvous_names_host_0_as_its_master() -> None:
    launch = torchrun.parse(["torchrun", "--nnodes=1:8", "--rdzv_backend=c10d",
                             f"--rdzv_endpoint={HOSTS[0]}:29400", "--", "train.py"])
    argv, env = torchrun.worker(launch, host=2, hostnames=HOSTS)
    assert argv == ["train.py"] and env["RANK"] == "2" and env["WORLD_SIZE"] == "8"
    assert env["MASTER_ADDR"] == HOSTS[0] and env["TORCHELASTIC_USE_AGENT_STORE"] == "True"


@pytest.mark.parametrize("argv, hosts, per_host, words", [
    (["torchrun", "--nproc_per_node=4", "t.py"], 8, 1, "--nproc_per_node=4 on a topology of 1"),
    (["torchrun", "t.py"], 8, 4, "launches one worker per host"),
    (["torchrun", "--nnodes=3", "t.py"], 8, 1, "--nnodes=3 on a world of 8 hosts"),
])
def test_a_launch_the_world_cannot_run_is_refused_with_why(argv, hosts, per_host, words) -> None:
    with pytest.raises(torchrun.TorchrunError, match=words.replace("-", r"\-")):
        torchrun.check(torchrun.parse(argv), hosts, per_host)


@pytest.mark.parametrize("argv, words", [
    (["torchrun", "--nproc_per_node=1"], "no training script given"),
    (["torchrun", "--no_python", "t.sh"], "--no_python is not modelled"),
    (["torchrun", "--nnodes=two", "t.py"], "must be numbers"),
    (["torchrun", "--node_rank=x", "t.py"], "torchrun: "),
])
def test_a_malformed_command_line_is_refused_by_name(argv, words) -> None:
    with pytest.raises(torchrun.TorchrunError, match=words.replace("-", r"\-")):
        torchrun.parse(argv)
