"""The documentation site: ``mkdocs build --strict`` passes, and the reference's generated
parts (``docs/hooks.py``) say what the code says: every catalog scenario, every exit code, and
a marker the hook does not know fails the build instead of staying in the page."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.scenarios import catalog
from harness.vocabulary import ExitCode

from support import REPO

_spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hooks)


def rendered(page: str) -> str:
    """A page of docs/ with its markers replaced, as the build sees it."""
    text = (REPO / "docs" / page).read_text()
    return hooks.on_page_markdown(text, page=SimpleNamespace(file=SimpleNamespace(src_uri=page)),
                                  config=None, files=None)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install '.[docs]'")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d",
                           str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, check=False)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
    assert not list((tmp_path / "site").rglob("*.py"))  # the build's hooks are no page


def test_an_unknown_marker_fails_naming_the_page_and_the_marker() -> None:
    from mkdocs.exceptions import PluginError

    page = SimpleNamespace(file=SimpleNamespace(src_uri="reference/mine.md"))
    with pytest.raises(PluginError, match=r"reference/mine\.md: unknown marker "
                                          r"<!-- harness: fault-kindz -->"):
        hooks.on_page_markdown("# Mine\n\n<!-- harness: fault-kindz -->\n", page=page,
                               config=None, files=None)


def test_a_page_without_markers_is_left_as_it_is() -> None:
    text = "# Mine\n\n`<!-- harness: catalog -->` in prose is no marker\n"
    assert hooks.on_page_markdown(text, page=None, config=None, files=None) == text


def test_every_catalog_scenario_has_a_row() -> None:
    text = rendered("reference/scenarios.md")
    assert "<!-- harness:" not in text
    for scenario in catalog():
        assert f"| `{scenario.name}` | {scenario.workload} | {scenario.topology} | " \
               f"`{scenario.expect}` |" in text, scenario.name


def test_every_exit_code_has_a_row_with_its_meaning() -> None:
    text = rendered("reference/exit-codes.md")
    for code in ExitCode:
        row = next((line for line in text.splitlines()
                    if line.startswith(f"| {code.value} | `{code.name}` | ")), None)
        assert row is not None, code
        assert len(row.split(" | ")[2]) > 20, f"{code.name} says what it means: {row}"


def test_the_scenario_schema_names_every_field_and_the_nested_models() -> None:
    from harness.scenarios import MountSpec, Scenario

    text = rendered("reference/scenarios.md")
    for field in [*Scenario.model_fields, *MountSpec.model_fields]:
        assert f"| `{field}` |" in text, field
    assert "| `timeout` | float (> 0, ≤ 86,400, finite) | `1800.0` |" in text
    assert "list of `MountSpec`" in text and "list of `FaultKind` (by `kind`)" in text


def test_the_report_schema_names_every_field_of_a_cell() -> None:
    from harness.runner.cells import Cell

    text = rendered("reference/reports.md")
    for field in Cell.__dataclass_fields__:
        assert f"| `{field}` |" in text, field
    assert "| `schema` | `harness.matrix/1` | required |" in text
