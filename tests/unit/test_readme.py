"""The README is the first page a user reads: short, and it says what to run and how long."""

from __future__ import annotations

import re

from support import REPO

README = (REPO / "README.md").read_text()


def test_the_readme_fits_on_a_few_screens():
    assert len(README.splitlines()) <= 200


def test_the_readme_gives_the_two_commands_with_how_long_each_takes_and_the_fast_lane():
    assert "pip install torch==2.13.0 . && harness run" in README
    assert "pip install torch==2.13.0 '.[test]' && python -m pytest" in README
    assert "python -m pytest tests/unit" in README  # the fast lane
    commands = README[README.index("## Two commands"):README.index("## Your own code")]
    assert len(re.findall(r"\b\d+ (?:s|minutes?)\b", commands)) >= 3, "each command says how long"


def test_the_readme_shows_your_own_code_within_its_first_hundred_lines():
    first = "\n".join(README.splitlines()[:110])
    assert "harness run --target sync.py:sync_config" in first
    assert "harness init" in first


def test_every_page_the_readme_links_exists():
    for link in re.findall(r"\]\(([^)#]+\.md)\)", README):
        assert (REPO / link).is_file(), link
