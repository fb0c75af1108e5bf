"""The test suite's own shape: every test file in a tier, its tier its marker."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

from support import REPO, TESTS

TIERS = ("unit", "world", "catalog", "cli", "pod")


def test_every_test_file_is_in_a_tier_and_its_name_is_unique():
    files = sorted(TESTS.rglob("test_*.py"))
    outside = [str(f.relative_to(TESTS)) for f in files if f.parent.name not in TIERS]
    assert outside == [], "put each test file in tests/<tier>/ (CONTRIBUTING.md)"
    twice = [name for name, n in Counter(f.name for f in files).items() if n > 1]
    assert twice == [], "pytest imports test files by name: each name once"


def _collected(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0",
                           *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)  # the machine's time: a bound, so a stuck run fails
    assert done.returncode in (0, 5), done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_a_tier_is_its_marker():
    unit = _collected("-m", "unit", "tests/unit/test_tiers.py", "tests/world/test_recording.py")
    assert unit and all(line.startswith("tests/unit/") for line in unit)
    assert _collected("-m", "world", "tests/unit/test_tiers.py") == []
