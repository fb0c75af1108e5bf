"""The Markdown report: the matrix as a GitHub table, then one section per failing cell.

Meant for a pull-request comment or a CI job summary, so it must render on
GitHub and still read as plain text. Error text goes into code spans and
blocks, which GitHub shows literally (a ``<script>`` in an error stays text).
"""

from __future__ import annotations

import re

from harness.history import format_ranks
from harness.reports._common import (
    anchor,
    attention_cells,
    cell_name,
    plural,
    seconds,
    seed_group,
    seeds_text,
    setting_text,
    summary_parts,
    took,
    workload_grids,
)
from harness.reports.diagnosis import diagnose, fault_groups
from harness.runner.cells import Cell, Matrix
from harness.vocabulary import KNOWN, OK, UNEXERCISED, UNEXPECTED

EMOJI = {OK: "✅", KNOWN: "⚠️", UNEXPECTED: "❌", UNEXERCISED: "⭕"}
_MAX_CELL_TEXT = 200


def emoji(verdict: str) -> str:
    return EMOJI.get(verdict, "❔")


def text(value: object) -> str:
    """Prose that Markdown must not interpret: escape what would become markup or HTML."""
    s = " ".join(str(value).split())
    s = re.sub(r"([\\`*\[\]<|])", r"\\\1", s)
    # An underscore inside a word (temp_config) is literal in GFM; only escape the others.
    return re.sub(r"(?<!\w)_|_(?!\w)", r"\\_", s)


def code(value: object, limit: int | None = None) -> str:
    """An inline code span that survives backticks and pipes (safe inside a table)."""
    s = " ".join(str(value).split())
    if limit and len(s) > limit:
        s = s[: limit - 1] + "…"
    if not s:
        return ""
    fence = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s.replace('|', chr(92) + '|')}{pad}{fence}"


def block(value: str, lang: str = "text") -> str:
    """A fenced code block, its fence longer than any backtick run inside."""
    fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", value)), default=0) + 1)
    return f"{fence}{lang}\n{value.rstrip()}\n{fence}"


def grid_cell(cell: Cell | None, count: str = "", seeded: bool = False) -> str:
    """A grid's cell; over several seeds, the most urgent one and how many seeds ended so."""
    if cell is None:
        return "·"
    label = f"{emoji(cell.verdict)} {cell.outcome}" + (f" {count}" if count else "")
    if cell.verdict == UNEXPECTED:
        label = f"{emoji(cell.verdict)} **{cell.outcome}** (unexpected)"
    elif cell.verdict == KNOWN:
        label += " (known)"
    if cell.outcome != "PASS" or cell.verdict != OK:
        label = f"[{label}](#{anchor(cell, seeded)})"
    return label


def table(matrix: Matrix) -> list[str]:
    """One row per scenario, one column per target; one table per workload."""
    groups = workload_grids(matrix)
    lines: list[str] = []
    for workload, scenarios, targets in groups:
        if len(groups) > 1 and workload:
            lines += [f"**{workload}**", ""]
        lines += ["| scenario | " + " | ".join(code(t) for t in targets) + " |",
                  "|---" * (len(targets) + 1) + "|"]
        for scenario in scenarios:
            row = [grid_cell(*seed_group(matrix, scenario, t), matrix.several_seeds)
                   for t in targets]
            lines.append(f"| {code(scenario)} | " + " | ".join(row) + " |")
        lines.append("")
    return lines[:-1]


def section(cell: Cell, seeded: bool = False) -> list[str]:
    """A failing cell: detail, facts, per-rank outcomes, faults, mismatches, traces, replay."""
    d = diagnose(cell, seeded)
    lines = [f'<a id="{anchor(cell, seeded)}"></a>', "",
             f"### {emoji(cell.verdict)} {code(cell_name(cell, seeded))}: {d.outcome}, "
             f"expected {d.expected} ({d.verdict})", "",
             f"> {text(d.detail or '(no detail recorded)')}", ""]
    facts = [f"topology {code(d.topology)}", f"seed {d.seed}", took(d.duration_s, d.world_time_s)]
    if cell.workload:
        facts.append(f"workload {code(cell.workload)}")
    if d.checker:
        facts.append(f"checker {code(d.checker)}")
    lines.append("- " + " · ".join(facts))
    if d.finding:
        lines.append(f"- seed finding: {text(d.finding)}")
    lines += [f"- role {code(role)} = {text(what)}" for role, what in d.roles.items()]
    lines.append("")
    if d.groups:
        lines += ["| ranks | hosts | outcome | exit | error or result |", "|---|---|---|---|---|"]
        for g in d.groups:
            lines.append(f"| {g.rank_text} | {g.host_text} | {g.outcome} | {text(g.exit)} | "
                         f"{code(g.result, _MAX_CELL_TEXT)} |")
        lines.append("")
    if d.faults:
        lines += ["**Faults fired**", "", "| t (ms) | rank | fault | op | path | message |",
                  "|---:|---|---|---|---|---|"]
        for g in fault_groups(d.faults):  # a fault that fired alike many times: one row
            f, rank = g.first, format_ranks(g.ranks) if g.ranks else "all"
            times = f" ({g.count:,} times)" if g.count > 1 else ""
            lines.append(f"| {f.t * 1000:.1f} | {rank} | {code(f.fault)} | {code(f.op or '')} | "
                         f"{code(f.path or '')} | {text(f.message)}{times} |")
        lines.append("")
    if d.mismatches:
        lines += ["**Mismatches**", ""] + [f"- {code(m)}" for m in d.mismatches] + [""]
    for traces, title in ((d.tracebacks, "traceback of"), (d.stacks, "stack (still blocked) of")):
        for trace in traces:
            lines += [f"<details><summary>{title} {trace.label}</summary>", "",
                      block(trace.text), "", "</details>", ""]
    lines += ["**Replay**", "", block(d.replay or "(none)", "sh"), ""]
    return lines


def to_markdown(matrix: Matrix) -> str:
    """The whole report: header, summary, table, legend, then the cells that need a look."""
    outcomes, verdicts = summary_parts(matrix)
    counts = ", ".join(f"{n} {o}" for o, n in outcomes) or "no cells"
    verdict_counts = ", ".join((f"**{n} {v}**" if v == UNEXPECTED else f"{n} {v}") for v, n in verdicts)
    lines = ["# harness matrix", "",
             f"{seeds_text(matrix)} · harness {text(matrix.harness_version)} · {text(matrix.created)} · "
             f"{plural(len(matrix.cells), 'cell')} in {seconds(matrix.duration_s)}"
             f"{text(setting_text(matrix))}", "",
             f"**{counts}**" + (f" · {verdict_counts}" if verdict_counts else ""), ""]
    if not matrix.cells:
        return "\n".join(lines + ["The matrix is empty: no cell was run.", ""])
    lines += table(matrix)
    lines += ["", f"{EMOJI[OK]} meets its expectation · {EMOJI[KNOWN]} known failure · "
                  f"{EMOJI[UNEXPECTED]} unexpected", ""]
    cells = attention_cells(matrix)
    if cells:
        lines += [f"## Cells that need a look ({len(cells)})", ""]
        for cell in cells:
            lines += section(cell, matrix.several_seeds)
    return "\n".join(lines).rstrip() + "\n"
