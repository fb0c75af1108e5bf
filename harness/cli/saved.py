"""``harness report`` and ``harness diff``: what a saved report says, again or against another."""

from __future__ import annotations

import sys

import click

from harness.cli.common import load_report
from harness.vocabulary import FORMATS


@click.command("report")
@click.argument("report", type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "fmt", default="terminal", show_default=True, type=click.Choice(FORMATS))
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write here instead of stdout.")
def report_command(report: str, fmt: str, output: str | None) -> None:
    """Render a saved JSON report again, in any format."""
    from harness.reports import render
    from harness.reports.store import atomic_write_text

    text = render(load_report(report), fmt)
    if output:
        atomic_write_text(output, text)  # a reader never sees half a report
        click.echo(f"wrote {output}")
    else:
        click.echo(text)


@click.command("diff")
@click.argument("before", type=click.Path(exists=True, dir_okay=False))
@click.argument("after", type=click.Path(exists=True, dir_okay=False))
@click.option("--expected", "expected_file", type=click.Path(exists=True, dir_okay=False),
              default=None, help="A reviewed YAML file of the differences that are expected, "
              "each with its reason; exit 1 only for differences it does not list.")
@click.option("--allow-infra", is_flag=True,
              help="Cells the pod itself failed (INFRA) do not fail the diff (exit 4 otherwise).")
@click.option("--common", is_flag=True,
              help="Compare only the cells both reports ran (a run of a few scenarios "
                   "against a full one); the others are counted, not listed.")
@click.option("--format", "fmt", default="text", show_default=True,
              type=click.Choice(["text", "json"]), help="json: the groups as one object.")
def diff_command(before: str, after: str, expected_file: str | None, allow_infra: bool,
                 common: bool, fmt: str) -> None:
    """Compare two saved reports cell by cell: a simulator run with a pod run (or before
    with after a fix). Cells that differ, cells only one side ran, cells the pod failed.

    \b
    harness diff reports/sim/matrix.json reports/pod/matrix.json --expected expected.yaml

    Exit 0 when every difference is listed in --expected, 1 when some is not, 2 for a bad
    report or expected file, 4 when the pod failed in some cell (unless --allow-infra).
    """
    import json

    from harness.reports.diff import check_pod, compare, render_text, sides, to_json_dict
    from harness.reports.expected import load_expected
    from harness.scenario_yaml import ScenarioError

    a, b = load_report(before), load_report(after)
    for path, matrix in ((before, a), (after, b)):
        problem = check_pod(matrix)
        if problem:
            raise click.UsageError(f"{path}: {problem}")
    expected = None
    if expected_file is not None:
        try:
            expected = load_expected(expected_file)
        except ScenarioError as exc:
            raise click.BadParameter(str(exc), param_hint="'--expected'") from None
    comparison = compare(*sides(a, b, before, after), expected, common)
    if fmt == "json":
        click.echo(json.dumps(to_json_dict(comparison, allow_infra), indent=2, ensure_ascii=False))
    else:
        click.echo(render_text(comparison, allow_infra), nl=False)
    sys.exit(comparison.exit_code(allow_infra))
