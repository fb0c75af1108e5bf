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
    isolation_text,
    marker,
    ms,
    needs_attention,
    seconds,
    seed_group,
    seeds_text,
    sorted_history,
    summary_parts,
    took,
    workload_grids,
)
from harness.reports.diagnosis import Diagnosis, diagnose
from harness.reports.html_assets import CSS, JS
from harness.runner.cells import SCHEMA, Cell, Matrix
from harness.vocabulary import KNOWN, OK, UNEXERCISED, UNEXPECTED

#: Beyond this many events, the page shows the first ones and points to the JSON report.
MAX_HISTORY_ROWS = 2000
NUMERIC = ("t (ms)", "step")
VERDICT_LABELS = {OK: "ok", KNOWN: "known", UNEXPECTED: "unexpected", UNEXERCISED: "unexercised"}


def e(value: object) -> str:
    """Escape any value for HTML text or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def outcome_class(outcome: str) -> str:
    return f"o-{outcome}" if outcome in OUTCOMES else "o-other"


def verdict_class(verdict: str) -> str:
    return f"v-{verdict}" if verdict in VERDICT_LABELS else "v-other"


def outcome_pill(outcome: str) -> str:
    return f'<span class="pill {outcome_class(outcome)}">{e(outcome)}</span>'


def verdict_badge(verdict: str) -> str:
    return (f'<span class="badge {verdict_class(verdict)}" title="verdict">'
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
        f'<p class="meta"><b>{len(matrix.cells)}</b> cells ({len(matrix.scenarios)} scenarios × '
        f'{len(matrix.targets)} targets) in <b>{e(seconds(matrix.duration_s))}</b>'
        f' · {seeds_label} <b>{e(seeds_value)}</b>'
        f' · {e(matrix.created)} · harness {e(matrix.harness_version)}'
        f'{e(isolation_text(matrix).replace(",", " ·", 1))}</p>'
        f'<div class="counts">{"".join(chips)}</div></div></header>'
    )


def grid_cell(cell: Cell | None, count: str = "", seeded: bool = False) -> str:
    """A grid's cell; over several seeds, the most urgent one and how many seeds ended so."""
    if cell is None:
        return '<td><span class="missing" title="not run">·</span></td>'
    title = (f"{cell_name(cell, seeded)}: {cell.outcome}, {cell.verdict} (expected "
             f"{cell.expected}). {cell.detail}")
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


def ranks_table(d: Diagnosis) -> str:
    rows = []
    for g in d.groups:
        rows.append(f'<tr><td class="mono">{e(g.rank_text)}</td><td class="mono">{e(g.host_text)}</td>'
                    f"<td>{outcome_pill(g.outcome)}</td><td class=\"mono\">{e(g.exit)}</td>"
                    f'<td class="wrap mono">{e(g.result)}</td></tr>')
    return table(("rank", "host", "outcome", "exit / signal", "error or result"), rows)


def traces(d: Diagnosis) -> str:
    """Tracebacks and stacks, one block per distinct text, the first one open."""
    parts = []
    for found, title in ((d.stacks, "Stack (still blocked at the deadline)"), (d.tracebacks, "Traceback")):
        for trace in found:
            parts.append(sub(f"{title} · {trace.label}", "", f"<pre>{e(trace.text.rstrip())}</pre>",
                             open_=not parts))
    return "".join(parts)


def faults_table(d: Diagnosis) -> str:
    rows = [f'<tr><td class="num">{e(ms(f.t))}</td><td>{e("all" if f.rank is None else f.rank)}</td>'
            f'<td class="mono">{e(f.fault)}</td><td class="mono">{e(f.op or "")}</td>'
            f'<td class="wrap mono">{e(f.path or "")}</td><td class="wrap">{e(f.message)}</td></tr>'
            for f in d.faults]
    return table(("t (ms)", "rank", "fault", "op", "path", "message"), rows)


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


def history_table(cell: Cell) -> str:
    events = sorted_history(cell)
    rows = []
    grouped = history_rows(events)
    for ev, ranks in grouped[:MAX_HISTORY_ROWS]:
        kind = str(ev.get("kind", ""))
        step = ev.get("step")
        who = "world" if not ranks else format_ranks(ranks)
        rows.append(
            f'<tr class="k-{e(kind)}"><td>{e(ms(ev.get("t")))}</td>'
            f'<td>{e(who)}</td><td>{e(kind)}</td>'
            f'<td>{e(ev.get("op") or "")}</td><td>{e(ev.get("tag") or "")}</td>'
            f'<td>{e("" if step is None else step)}</td>'
            f'<td>{e(ev.get("site") or "")}</td>'
            f'<td>{e(event_message(ev))}</td></tr>')
    more = ""
    if len(grouped) > MAX_HISTORY_ROWS:
        more = (f'<p class="none">{len(grouped) - MAX_HISTORY_ROWS} more rows are in the JSON '
                "report (matrix.json).</p>")
    return table(("t (ms)", "ranks", "kind", "op", "tag", "step", "site", "message"), rows,
                 "t history") + more


def output_blocks(d: Diagnosis) -> str:
    parts = []
    for stream, found in (("stdout", d.stdout), ("stderr", d.stderr)):
        for trace in found:
            parts.append(sub(f"{stream} · {trace.label}", "", f"<pre>{e(trace.text.rstrip())}</pre>"))
    return "".join(parts)


def cell_detail(cell: Cell, seeded: bool = False) -> str:
    """One cell as a <details>: closed, its summary says enough to decide whether to open it."""
    d = diagnose(cell, seeded)
    facts = [("scenario", cell.scenario), ("target", cell.target), ("topology", d.topology),
             ("seed", d.seed), ("expected", d.expected),
             ("outcome", f"{d.outcome} ({d.verdict})"),
             ("duration", took(d.duration_s, d.world_time_s))]
    if cell.workload:
        facts.append(("workload", cell.workload))
    if d.checker:
        facts.append(("checker", d.checker))
    body = []
    if d.detail or d.outcome != "PASS":
        body.append(f'<p class="detail">{e(d.detail or "(no detail recorded)")}</p>')
    if d.finding:
        body.append(f'<div class="finding"><b>Seed finding:</b> {e(d.finding)}</div>')
    for role, what in d.roles.items():
        body.append(f'<div class="finding"><b>Role {e(role)}:</b> {e(what)}</div>')
    items = "".join(f"<li><span>{e(k)}</span>{e(v)}</li>" for k, v in facts)
    body.append(f'<ul class="facts">{items}</ul>')
    body.append('<h4>Replay</h4><div class="replay"><pre><code>'
                f'{e(d.replay or "(none)")}</code></pre>'
                '<button class="copy js" type="button" hidden>Copy</button></div>')
    ranks = ranks_table(d) if d.groups else '<p class="none">no rank recorded</p>'
    body.append("<h4>Ranks</h4>" + ranks)
    body.append(traces(d))
    if d.faults:
        body.append(f"<h4>Faults fired ({len(d.faults)})</h4>" + faults_table(d))
    if d.mismatches:
        body.append(f"<h4>Mismatches ({len(d.mismatches)})</h4><ul>"
                    + "".join(f'<li class="mono">{e(m)}</li>' for m in d.mismatches) + "</ul>")
    if cell.history:
        body.append(sub("History", f"({len(cell.history)} events, in time order)", history_table(cell),
                        open_=d.outcome != "PASS" and len(cell.history) <= 60))
    output = output_blocks(d)
    if output:
        body.append(sub("Captured output", "", output))
    name = cell_name(cell, seeded)
    return (f'<details class="cell {verdict_class(cell.verdict)}">'
            f'<summary>{outcome_pill(cell.outcome)}{verdict_badge(cell.verdict)}'
            f'<code class="name">{e(name)}</code><span class="line">{e(d.detail)}</span></summary>'
            f'<div class="body" id="{e(anchor(cell, seeded))}">{"".join(body)}</div></details>')


def cells_section(matrix: Matrix) -> str:
    attention = attention_cells(matrix)
    others = [c for c in matrix.cells if not needs_attention(c)]
    toolbar = ('<div class="toolbar js" hidden><button id="expand" type="button">Expand all</button>'
               '<button id="collapse" type="button">Collapse all</button></div>')
    parts = [f"<section><h2>Cells that need a look ({len(attention)})</h2>{toolbar}"]
    if attention:
        parts += [cell_detail(c, matrix.several_seeds) for c in attention]
    else:
        parts.append('<p class="none">every cell passed and met its expectation</p>')
    if others:
        parts.append(f'<details class="group"><summary>Passing cells ({len(others)})</summary>'
                     + "".join(cell_detail(c, matrix.several_seeds) for c in others) + "</details>")
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
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>"
        f'{header(matrix)}<main class="wrap">{main}</main>'
        f'<footer class="wrap">report schema {e(SCHEMA)} · harness {e(matrix.harness_version)} · '
        f"created {e(matrix.created)}</footer>"
        f"<script>{JS}</script></body></html>\n"
    )
