"""One instant, one order: ranks at the same world time act one at a time in the seed's
order, so a racy target gets the same cell from the same seed every time, the cell names
the race whatever its outcome, ``explore`` finds the order that fails, and
``--check-determinism`` says when two runs of a seed differ."""

from __future__ import annotations

import json
from pathlib import Path

from support import REPO, run_cli

INPLACE = "tests/user_targets/async_inplace.py:sync"  # writes in place, readers poll exists()
NONCE = "tests/user_targets/urandom_nonce.py:sync"  # stamps its result from /dev/urandom


def _cells(out: Path, *args: str) -> list[dict]:
    done = run_cli("run", *args, "--format", "json", "--report-dir", str(out))
    assert done.returncode in (0, 1), done.stderr
    return json.loads((out / "latest" / "matrix.json").read_text())["cells"]


def _races(cell: dict) -> list[dict]:
    return [e for e in cell["history"] if e["kind"] == "race"]


def test_the_seed_decides_an_in_place_race_and_the_same_seed_decides_it_again(tmp_path: Path):
    args = ("-s", "divergent-slugs", "-T", INPLACE, "--seeds", "0-5")
    first, again = _cells(tmp_path / "a", *args), _cells(tmp_path / "b", *args)
    outcomes = [c["outcome"] for c in first]
    assert "PASS" in outcomes and "ERROR" in outcomes, outcomes  # an order for each side
    assert [(c["outcome"], c["detail"]) for c in first] == \
        [(c["outcome"], c["detail"]) for c in again], "the same seeds, the same cells"
    for cell in first:  # a PASS too: it passes at this seed's order only
        races = _races(cell)
        assert races, cell["outcome"]
        race = races[0]["detail"]
        assert race["path"] == "/tmp/async_cfg/config.json"
        assert 0 in race["ranks"] and len(set(race["ranks"])) == 2
        assert race["message"].count("at async_inplace.py:") == 2, "both lines"
        assert race["message"].endswith("nothing ordering them")
    failing = next(c for c in first if c["outcome"] == "ERROR")
    assert "JSONDecodeError" in failing["detail"]


def test_a_rendezvous_between_the_write_and_the_reads_is_no_race(tmp_path: Path):
    cells = _cells(tmp_path, "-s", "baseline", "-T", "tests/user_targets/yaml_open.py:sync")
    assert cells[0]["outcome"] == "PASS" and _races(cells[0]) == []


def test_the_terminal_says_a_pass_with_a_race(tmp_path: Path):
    done = run_cli("run", "-s", "divergent-slugs", "-T", INPLACE, "--seeds", "0-5",
                   "--format", "json", "--report-dir", str(tmp_path))
    said = done.stdout + done.stderr
    assert "passes at this seed's order of ranks; with a race:" in said
    assert "race on /tmp/async_cfg/config.json" in said


def test_explore_finds_the_order_that_fails_and_its_replay_reproduces_it(tmp_path: Path):
    out = tmp_path / "found"
    done = run_cli("explore", "-T", str(REPO / INPLACE), "-t", "1x2", "--kinds", "none", "--examples", "30",
                   "--out", str(out), "--no-database", "--format", "json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    ordered = [f for f in report["findings"] if "order-of-ranks" in f["scenario"]]
    assert ordered, report["findings"]
    replay = ordered[0]["replay"]
    assert " --seed " in replay
    again = run_cli(*replay.split()[1:], "--format", "json", "--report-dir", str(tmp_path / "r"),
                    cwd=tmp_path)
    assert again.returncode == 1, again.stderr
    cell = json.loads((tmp_path / "r" / "latest" / "matrix.json").read_text())["cells"][0]
    assert cell["outcome"] == "ERROR" and "JSONDecodeError" in cell["detail"]


def test_check_determinism_passes_a_racy_target_and_names_a_nonce(tmp_path: Path):
    racy = _cells(tmp_path / "a", "-s", "divergent-slugs", "-T", INPLACE, "--seeds", "0-3",
                  "--check-determinism")
    assert not any("not deterministic" in c["detail"] for c in racy)
    nonce = _cells(tmp_path / "b", "-s", "baseline", "-T", NONCE, "--check-determinism")
    assert nonce[0]["verdict"] == "unexpected"
    assert nonce[0]["detail"].startswith("not deterministic: two runs of seed 0 differ at "
                                         "rank 0's value: ")
    assert "'nonce': '" in nonce[0]["detail"]


def test_explore_with_check_determinism_names_a_nonce_and_its_replay_checks_again(
        tmp_path: Path):
    done = run_cli("explore", "-T", str(REPO / NONCE), "-t", "1x2", "--kinds", "none",
                   "--examples", "2", "--check-determinism", "--out", str(tmp_path / "found"),
                   "--no-database", "--format", "json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    [finding] = json.loads(done.stdout)["findings"]
    assert finding["replay"].endswith(" --check-determinism")
    again = run_cli(*finding["replay"].split()[1:], "--format", "json", "--report-dir",
                    str(tmp_path / "r"), cwd=tmp_path)
    cell = json.loads((tmp_path / "r" / "latest" / "matrix.json").read_text())["cells"][0]
    assert again.returncode == 1 and cell["detail"].startswith("not deterministic: "), \
        cell["detail"]


def test_check_determinism_refuses_a_cluster():
    done = run_cli("run", "--check-determinism", "--cluster", "local:1")
    assert done.returncode == 2
    assert "--check-determinism runs each cell twice on this machine" in done.stderr


def test_a_rank_blocked_in_the_kernel_on_another_hands_the_turn_on(tmp_path: Path):
    # rank 0 waits in accept() while the others still need their turns to find its port
    cells = _cells(tmp_path, "-s", "baseline", "-T", "tests/user_targets/socket_handoff.py:sync")
    assert cells[0]["outcome"] == "PASS", cells[0]["detail"]
