"""The seed and the deadline are checked where they are typed: every command that takes
them refuses a value a world cannot use with click's usage message, exit 2."""

from __future__ import annotations

import pytest

#: Each command with the arguments that make it otherwise valid.
COMMANDS = {
    "exec": ("exec", "{option}", "{value}", "python", "-c", "pass"),
    "run": ("run", "--scenario", "baseline", "{option}", "{value}"),
    "replay": ("replay", "--scenario", "baseline", "--target", "naive-sync", "{option}",
               "{value}"),
}

BAD = [("--seed", "-1", "not in the range 0<=x<=4294967295"),
       ("--seed", "4294967296", "not in the range 0<=x<=4294967295"),
       ("--seed", "1.5", "not a valid integer"),
       ("--timeout", "nan", "is not a number of seconds"),
       ("--timeout", "inf", "not in the range 0.1<=x<=600"),
       ("--timeout", "0", "not in the range"),
       ("--timeout", "-1", "not in the range"),
       ("--timeout", "601", "not in the range")]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("option,value,words", BAD, ids=[f"{o}={v}" for o, v, _ in BAD])
def test_a_seed_or_timeout_a_world_cannot_use_is_a_usage_error(cli, command, option, value,
                                                                words):
    args = [a.format(option=option, value=value) for a in COMMANDS[command]]
    done = cli(*args)
    assert done.returncode == 2, done.stderr
    assert "Usage:" in done.stderr and f"Invalid value for '{option}'" in done.stderr
    assert words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


SEEDED = """
import numpy
import torch_xla.distributed.xla_multiprocessing as xmp

def _mp_fn(index):
    numpy.random.seed(4294967295)

if __name__ == "__main__":
    xmp.spawn(_mp_fn)
"""


def test_the_largest_seed_and_the_longest_timeout_run(cli, tmp_path):
    script = tmp_path / "seeded.py"
    script.write_text(SEEDED)
    done = cli("exec", "-t", "1x1", "--seed", "4294967295", "--timeout", "600",
               "python", str(script))
    assert done.returncode == 0, done.stderr
