"""The HTML report: one self-contained page a person opens from a CI artifact.

No external resource (the page must open offline, from a zip, years later).
Each cell's detail is a <details> element, so the page works with JavaScript
off; the few lines of script only open the clicked cell and copy a replay
command. Every piece of text from a run goes through ``html.escape``: error
messages and a target's output are untrusted.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from harness.history import format_ranks
from harness.reports._common import (
    OUTCOMES,
    anchor,
    attention_cells,
    cell_name,
    event_message,
    marker,
    ms,
    needs_attention,
    plural,
    seconds,
    seed_group,
    seeds_text,
    setting_text,
    sorted_history,
    summary_parts,
    took,
    workload_grids,
)
from harness.reports.diagnosis import Diagnosis, diagnose, fault_groups, group_line
from harness.reports.html_assets import CSS, JS, minified
from harness.runner.cells import SCHEMA, Cell, Matrix
from harness.vocabulary import KNOWN, OK, UNEXERCISED, UNEXPECTED

#: A history longer than these rows together shows its first rows and its last (where the
#: world ended); the JSON report has every event.
HISTORY_HEAD, HISTORY_TAIL = 6, 3
#: A cell's faults beyond this many, and a role's files beyond ROLE_FILES, are counted.
FAULT_ROWS, ROLE_FILES = 6, 3
#: The summary line of a closed cell, and a rank's value in its table, are cut here: the
#: open cell shows the whole detail, and the JSON report every value.
SUMMARY_CHARS, VALUE_CHARS = 120, 120
STYLE = minified(CSS)
NUMERIC = ("t (ms)", "step")
VERDICT_LABELS = {OK: "ok", KNOWN: "known", UNEXPECTED: "unexpected", UNEXERCISED: "unexercised"}


def e(value: object) -> str:
    """Escape any value for HTML text or a double-quoted attribute (every attribute here is
    one): a single quote stays itself, so a Python repr costs no entity per quote."""
    return html.escape("" if value is None else str(value), quote=False).replace('"', "&quot;")


def outcome_class(outcome: str) -> str:
    return f"o-{outcome}" if outcome in OUTCOMES else "o-other"


def verdict_class(verdict: str) -> str:
    return f"v-{verdict}" if verdict in VERDICT_LABELS else "v-other"


def outcome_pill(outcome: str) -> str:
    return f'<span class="pill {outcome_class(outcome)}">{e(outcome)}</span>'


def verdict_badge(verdict: str) -> str:
    return (f'<span class="badge {verdict_class(verdict)}">'
            f"{e(marker(verdict))} {e(verdict)}</span>")


def header(matrix: Matrix) -> str:
    outcomes, verdicts = summary_parts(matrix)
    seeds_label, _, seeds_value = seeds_text(matrix).partition(" ")
    unexpected = len(matrix.unexpected)
    if unexpected:
        status = (f'<span class="status bad">{unexpected} unexpected '
                  f'cell{"s" if unexpected != 1 else ""}</span>')
    else:
        status = '<span class="status good">no unexpected cell</span>'
    chips = [f'<span class="pill {outcome_class(o)}">{n} {e(o)}</span>' for o, n in outcomes]
    chips.append('<span class="sep"></span>')
    chips += [f'<span class="badge {verdict_class(v)}">{e(marker(v))} {n} {e(v)}</span>' for v, n in verdicts]
    return (
        f'<header><div class="wrap"><h1>harness matrix {status}</h1>'
        f'<p class="meta"><b>{len(matrix.cells)}</b> {"cell" if len(matrix.cells) == 1 else "cells"} '
        # not "33 scenarios × 7 targets", which reads as 231 cells where a workload's
        # scenarios run only its own targets
        f'of {plural(len(matrix.scenarios), "scenario")} and {plural(len(matrix.targets), "target")} '
        f'in <b>{e(seconds(matrix.duration_s))}</b>'
        f' · {seeds_label} <b>{e(seeds_value)}</b>'
        f' · {e(matrix.created)} · harness {e(matrix.harness_version)}'
        f'{e(setting_text(matrix).replace(",", " ·", 1))}</p>'
        f'<div class="counts">{"".join(chips)}</div></div></header>'
    )


def grid_cell(cell: Cell | None, count: str = "", seeded: bool = False) -> str:
    """A grid's cell; over several seeds, the most urgent one and how many seeds ended so."""
    if cell is None:
        return '<td><span class="missing" title="not run">·</span></td>'
    title = f"{cell_name(cell, seeded)}: {cell.outcome}, {cell.verdict} (expected {cell.expected})"
    seeds = f' <span class="n">{e(count)}</span>' if count else ""
    return (f'<td><a class="gc {outcome_class(cell.outcome)} {verdict_class(cell.verdict)}" '
            f'href="#{e(anchor(cell, seeded))}" title="{e(title)}"><span>{e(cell.outcome)}</span>'
            f"{verdict_badge(cell.verdict)}{seeds}</a></td>")


def grid(matrix: Matrix) -> str:
    """One grid per workload (its scenarios x its targets): a catalog of three workloads is
    three small grids, not one wide grid whose cells are mostly empty."""
    groups = workload_grids(matrix)
    grids = []
    for workload, scenarios, targets in groups:
        head = "".join(f'<th scope="col">{e(t)}</th>' for t in targets)
        rows = []
        for scenario in scenarios:
            cells = "".join(grid_cell(*seed_group(matrix, scenario, t), matrix.several_seeds)
                            for t in targets)
            rows.append(f'<tr><th scope="row">{e(scenario)}</th>{cells}</tr>')
        title = f"<h3>{e(workload)}</h3>" if len(groups) > 1 and workload else ""
        grids.append(f'{title}<div class="scroll"><table class="matrix"><thead><tr>'
                     f'<th scope="col">scenario \\ target</th>{head}</tr></thead>'
                     f'<tbody>{"".join(rows)}</tbody></table></div>')
    legend = (
        '<div class="legend"><span>colour: the outcome</span>'
        f"<span>{verdict_badge(OK)} meets its expectation</span>"
        f"<span>{verdict_badge(KNOWN)} a recorded known failure</span>"
        f"<span>{verdict_badge(UNEXPECTED)} a new failure, or a known one that now passes</span>"
        f"<span>{verdict_badge(UNEXERCISED)} the scenario's fault could not happen to the target</span>"
        "<span>click a cell for its detail</span></div>"
    )
    return f'<section><h2>Matrix</h2>{"".join(grids)}{legend}</section>'


def table(headers: Iterable[str], rows: Iterable[str], cls: str = "t") -> str:
    """A table; a header in ``NUMERIC`` is right-aligned like its numbers."""
    th = "".join(f'<th class="num">{e(h)}</th>' if h in NUMERIC else f"<th>{e(h)}</th>" for h in headers)
    return (f'<div class="scroll"><table class="{cls}"><thead><tr>{th}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def sub(title: str, count: str, content: str, open_: bool = False) -> str:
    """A collapsible block inside a cell (tracebacks, history, output)."""
    attr = " open" if open_ else ""
    n = f' <span class="n">{e(count)}</span>' if count else ""
    return f'<details class="sub"{attr}><summary>{e(title)}{n}</summary>{content}</details>'


def ranks_list(d: Diagnosis) -> str:
    """Each group of ranks that ended alike, one line as the terminal says it, after its
    outcome's colour: ``ranks 1-7 (hosts 1-7): exit 1: FileNotFoundError: ...``."""
    items = []
    for g in d.groups:
        rest = group_line(g)[len(g.label) + 2:]  # after "ranks 1-7 (hosts 1-7): "
        rest = rest[len(g.outcome):].lstrip(" ,:") if rest.startswith(g.outcome) else rest
        items.append(f"<li>{outcome_pill(g.outcome)}<b>{e(g.label)}</b>"
                     f"{': ' + e(cut(rest, VALUE_CHARS)) if rest else ''}</li>")
    return f'<ul class="ranks">{"".join(items)}</ul>'


def traces(d: Diagnosis, seen: dict[str, tuple[str, str]], here: tuple[str, str]) -> str:
    """Tracebacks and stacks, one block per distinct text, the first one open. A text an
    earlier cell of the page showed (a seed's bug that fails a dozen cells alike) links
    there instead of being printed again: ``seen`` maps each text to its cell's anchor and
    name, and ``here`` is this cell's."""
    parts = []
    for found, title in ((d.stacks, "Stack (still blocked at the deadline)"), (d.tracebacks, "Traceback")):
        for trace in found:
            text = trace.text.rstrip()
            if text in seen:
                where, name = seen[text]
                parts.append(f'<p class="none">{e(title)} · {e(trace.label)}: the same as in '
                             f'<a href="#{e(where)}">{e(name)}</a></p>')
                continue
            seen[text] = here
            parts.append(sub(f"{title} · {trace.label}", "", f"<pre>{e(text)}</pre>",
                             open_=not parts))
    return "".join(parts)


def faults_table(d: Diagnosis) -> str:
    """The faults that fired, first few, each that fired alike many times once; a fault's
    path is in its message (added where the message does not say it)."""
    def message(f: Any) -> str:
        return f.message if not f.path or f.path in f.message else f"{f.message} · {f.path}"

    groups = fault_groups(d.faults)
    rows = [f'<tr><td>{e(ms(g.first.t))}</td><td>{e(format_ranks(g.ranks) if g.ranks else "all")}</td>'
            f'<td>{e(g.first.fault)}</td><td>{e(g.first.op or "")}</td>'
            f'<td>{e(message(g.first))}{e(f" ({g.count:,} times)" if g.count > 1 else "")}</td></tr>'
            for g in groups[:FAULT_ROWS]]
    if len(groups) > FAULT_ROWS:
        rows.append(f'<tr><td colspan="5" class="none">{plural(len(groups) - FAULT_ROWS, "more fault")}'
                    ", in the JSON report (matrix.json)</td></tr>")
    return table(("t (ms)", "ranks", "fault", "op", "message"), rows, "t faults")


def cut(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def first_files(what: str) -> str:
    """A role's resolution (``a, written by rank 0; b, written by rank 1; ...``), its first
    few files and how many more."""
    files = what.split("; ")
    if len(files) <= ROLE_FILES:
        return what
    return "; ".join(files[:ROLE_FILES]) + f"; and {len(files) - ROLE_FILES} more"


def history_rows(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[int]]]:
    """Each event with the ranks it stands for: consecutive events that differ only by rank
    (eight ranks entering one rendezvous from one line, seven ranks that returned) are one
    row, ``ranks 0-7``, at the first one's time. Every event stays in the JSON report."""
    rows: list[tuple[dict[str, Any], list[int]]] = []
    for ev in events:
        rank = ev.get("rank")
        if rows and rank is not None:
            last, ranks = rows[-1]
            same = all(last.get(k) == ev.get(k) for k in ("kind", "op", "tag", "step", "site"))
            if same and event_message(last) == event_message(ev) and rank not in ranks:
                ranks.append(rank)
                continue
        rows.append((ev, [] if rank is None else [rank]))
    return rows


#: The history's columns, as its text lines show them.
HISTORY_COLUMNS = ("t (ms)", "ranks", "kind", "op", "tag", "step", "site", "message")
#: Events a history marks, as the grid colours outcomes.
MARKED = ("fault", "hang", "mismatch")


def history_text(cell: Cell) -> str:
    """The history as aligned lines of text, as a terminal shows a table: its bulk is the
    report's, and a table's markup would be most of it. Its first rows and its last (where the
    world ended), each one event or one group of ranks doing the same; the rows between are
    counted, and are in matrix.json. Faults, hangs and mismatches are marked."""
    grouped = history_rows(sorted_history(cell))
    head, tail = grouped, []
    if len(grouped) > HISTORY_HEAD + HISTORY_TAIL:
        head, tail = grouped[:HISTORY_HEAD], grouped[-HISTORY_TAIL:]

    def fields(ev: dict[str, Any], ranks: list[int]) -> list[str]:
        step = ev.get("step")
        return [ms(ev.get("t")), "world" if not ranks else format_ranks(ranks),
                str(ev.get("kind", "")), str(ev.get("op") or ""), str(ev.get("tag") or ""),
                "" if step is None else str(step), str(ev.get("site") or ""), event_message(ev)]

    rows = [(ev, fields(ev, ranks)) for ev, ranks in (*head, *tail)]
    widths = [max([len(h)] + [len(f[i]) for _, f in rows]) for i, h in enumerate(HISTORY_COLUMNS)]

    def line(values: list[str]) -> str:
        cols = [values[0].rjust(widths[0])] + [v.ljust(w) for v, w in zip(values[1:-1], widths[1:-1])]
        return "  ".join([*cols, values[-1]]).rstrip()

    lines = [f'<span class="h">{e(line(list(HISTORY_COLUMNS)))}</span>']
    for n, (ev, values) in enumerate(rows):
        if tail and n == len(head):
            skipped = len(grouped) - len(head) - len(tail)
            lines.append(f'<span class="none">… {plural(skipped, "more row")}, in the JSON '
                         "report (matrix.json)</span>")
        text = e(line(values))
        kind = ev.get("kind")
        lines.append(f'<span class="k-{e(kind)}">{text}</span>' if kind in MARKED else text)
    return '<pre class="history">' + "\n".join(lines) + "</pre>"


def output_blocks(d: Diagnosis) -> str:
    parts = []
    for stream, found in (("stdout", d.stdout), ("stderr", d.stderr)):
        for trace in found:
            parts.append(sub(f"{stream} · {trace.label}", "", f"<pre>{e(trace.text.rstrip())}</pre>"))
    return "".join(parts)


def cell_detail(cell: Cell, seeded: bool = False,
                seen: dict[str, tuple[str, str]] | None = None) -> str:
    """One cell as a <details>: closed, its summary says enough to decide whether to open it.
    A cell that met its expectation shows its faults and ranks; its history and tracebacks
    are in the JSON report. ``seen``: the tracebacks earlier cells of the page showed."""
    d = diagnose(cell, seeded)
    met = cell.verdict == "ok"
    name, here = cell_name(cell, seeded), anchor(cell, seeded)
    facts = [("topology", d.topology), ("expected", d.expected),
             ("duration", took(d.duration_s, d.world_time_s))]  # the summary names the rest
    if seeded:  # else the page's one seed is in its header
        facts.insert(1, ("seed", d.seed))
    if d.checker:
        facts.append(("checker", d.checker))
    body = []
    if len(d.detail) > SUMMARY_CHARS or (not d.detail and d.outcome != "PASS"):
        body.append(f'<p class="detail">{e(d.detail or "(no detail recorded)")}</p>')
    if d.finding:
        body.append(f'<div class="finding"><b>Seed finding:</b> {e(d.finding)}</div>')
    for role, what in d.roles.items():
        body.append(f'<div class="finding"><b>Role {e(role)}:</b> {e(first_files(what))}</div>')
    body.append('<p class="facts">' + " · ".join(f"<i>{e(k)}</i> {e(v)}" for k, v in facts)
                + "</p>")
    body.append(f'<div class="replay"><pre>{e(d.replay or "(no replay)")}</pre></div>')  # + Copy
    elsewhere = []  # what this page leaves to the JSON report
    if met and cell.outcome == "PASS":  # every rank returned what it should
        elsewhere.append(f"what the {plural(len(cell.ranks), 'rank')} returned")
    else:
        ranks = ranks_list(d) if d.groups else '<p class="none">no rank recorded</p>'
        body.append("<h4>Ranks</h4>" + ranks)
    if not met:
        body.append(traces(d, {} if seen is None else seen, (here, name)))
    show_history = bool(cell.history) and not met and cell.verdict != "unexercised"
    if d.faults:
        body.append(f"<h4>Faults fired ({len(d.faults)})</h4>" + faults_table(d))
    if d.mismatches:
        body.append(f"<h4>Mismatches ({len(d.mismatches)})</h4><ul>"
                    + "".join(f'<li class="mono">{e(m)}</li>' for m in d.mismatches) + "</ul>")
    if cell.history and not show_history:  # no fault happened, or it was survived
        elsewhere.append(f"the history ({plural(len(cell.history), 'event')})")
    elif show_history:
        body.append(sub("History", f"({plural(len(cell.history), 'event')}, in time order)",
                        history_text(cell), open_=d.outcome != "PASS" and len(cell.history) <= 60))
    output = output_blocks(d)
    if output:
        body.append(sub("Captured output", "", output))
    if elsewhere:
        body.append(f'<p class="none">In the JSON report (matrix.json): {" and ".join(elsewhere)}.</p>')
    line = "line cut" if len(d.detail) > SUMMARY_CHARS else "line"  # cut: the body has it whole
    return (f'<details class="cell {verdict_class(cell.verdict)}">'
            f'<summary>{outcome_pill(cell.outcome)}{verdict_badge(cell.verdict)}'
            f'<code class="name">{e(name)}</code><span class="{line}">'
            f'{e(cut(d.detail, SUMMARY_CHARS))}</span></summary>'
            f'<div class="body" id="{e(here)}">{"".join(body)}</div></details>')


def cells_section(matrix: Matrix) -> str:
    attention = attention_cells(matrix)
    seen: dict[str, tuple[str, str]] = {}  # each traceback's first cell on the page
    others = [c for c in matrix.cells if not needs_attention(c)]
    toolbar = ('<div class="toolbar js" hidden><button id="expand" type="button">Expand all</button>'
               '<button id="collapse" type="button">Collapse all</button></div>')
    parts = [f"<section><h2>Cells that need a look ({len(attention)})</h2>{toolbar}"]
    if attention:
        parts += [cell_detail(c, matrix.several_seeds, seen) for c in attention]
    else:
        parts.append('<p class="none">every cell passed and met its expectation</p>')
    if others:
        parts.append(f'<details class="group"><summary>Passing cells ({len(others)})</summary>'
                     + "".join(cell_detail(c, matrix.several_seeds, seen) for c in others)
                     + "</details>")
    parts.append("</section>")
    return "".join(parts)


def to_html(matrix: Matrix) -> str:
    """The whole page: header, grid, then every cell's detail; inline CSS and JS only."""
    unexpected = len(matrix.unexpected)
    title = f"harness matrix · {unexpected} unexpected · {seeds_text(matrix)}"
    if matrix.cells:
        main = grid(matrix) + cells_section(matrix)
    else:
        main = '<section><p class="none">The matrix is empty: no cell was run.</p></section>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><style>{STYLE}</style></head><body>"
        f'{header(matrix)}<main class="wrap">{main}</main>'
        f'<footer class="wrap">report schema {e(SCHEMA)} · harness {e(matrix.harness_version)} · '
        f"created {e(matrix.created)}</footer>"
        f"<script>{JS}</script></body></html>\n"
    )
