"""Whatever a target writes, prints or raises reaches a complete report, and a FAIL says which
values differ even when Python calls them equal.

Run as a user runs them: ``harness run`` on a target file written here, the way a stranger
writes one (its own file names, its own messages).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from support import run_cli

#: Rank 0 writes a config under a file name that is not UTF-8, every rank prints escape
#: codes, and a rank that cannot read it raises with the name inside its own message.
NASTY_TARGET = '''
import json, os
import torch_xla.core.xla_model as xm

NAME = os.fsdecode(b"/tmp/cfg-\\xff.json")

def sync(inputs):
    print("\\x1b[2J\\x1b[31mstarting\\x1b[0m\\r\\x07")
    if xm.get_ordinal() == 0:
        with open(NAME, "w") as f:
            json.dump({"lr": 0.1}, f)
    xm.rendezvous("cfg")
    if not os.path.exists(NAME):
        raise RuntimeError(f"no config at {NAME} \\x1b[41m")
    with open(NAME) as f:
        return json.load(f)
'''

#: Ranks that return configs Python calls equal to rank 0's.
ALIKE_TARGET = '''
import torch_xla.core.xla_model as xm

def sync(inputs):
    rank = xm.get_ordinal()
    return {"lr": -0.0 if rank == 3 else 0.0, "warmup": True if rank == 5 else 1,
            "dims": [1, 2] if rank == 6 else (1, 2)}
'''


def test_surrogates_and_escape_codes_from_a_target_reach_every_report_intact(
        tmp_path: Path) -> None:
    (tmp_path / "nasty.py").write_text(NASTY_TARGET)
    done = run_cli("run", "--target", "nasty.py:sync", "-s", "baseline", "-s", "isolated-tmp",
                   "-s", "partial-write", "--report-dir", "reports", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # isolated-tmp: an unexpected ERROR, not exit 3
    assert "\x1b" not in done.stdout and "\ud800" not in done.stdout
    latest = tmp_path / "reports" / "latest"
    files = {p.suffix: p.read_bytes().decode("utf-8") for p in latest.iterdir()}
    assert sorted(files) == [".html", ".json", ".md", ".txt", ".xml"]
    for suffix, text in files.items():
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]", text), suffix
    report = json.loads(files[".json"])
    cells = {c["scenario"]: c for c in report["cells"]}
    assert cells["baseline"]["outcome"] == "PASS"
    tmp = cells["isolated-tmp"]
    assert tmp["outcome"] == "ERROR"
    assert "RuntimeError: no config at /tmp/cfg-\\udcff.json \\u001b[41m" in tmp["detail"]
    assert "\\u001b[2J" in tmp["ranks"][0]["stdout"]
    torn = cells["partial-write"]  # the handoff file, found by its role and torn
    assert {f["path"] for f in torn["faults_fired"]} == {"/tmp/cfg-\\udcff.json"}
    assert torn["roles"]["handoff"].startswith("/tmp/cfg-\\udcff.json")
    ET.fromstring(files[".xml"])
    # read back, the same text renders again
    again = run_cli("report", str(latest / "matrix.json"), cwd=tmp_path)
    assert again.returncode == 0 and "cfg-\\udcff.json" in again.stdout


def test_a_fail_names_values_python_calls_equal_by_their_type_or_sign(tmp_path: Path) -> None:
    (tmp_path / "alike.py").write_text(ALIKE_TARGET)
    done = run_cli("run", "--target", "alike.py:sync", "-s", "baseline", "--format", "json",
                   "--report-dir", "reports", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    cell = json.loads((tmp_path / "reports/latest/matrix.json").read_text())["cells"][0]
    assert cell["outcome"] == "FAIL"
    assert "rank 3 differs from rank 0: lr 0.0 != -0.0" in cell["detail"]
    assert "rank 5 differs from rank 0: warmup 1 != True" in cell["detail"]
    assert "rank 6 differs from rank 0: dims (1, 2) != [1, 2]" in cell["detail"]
