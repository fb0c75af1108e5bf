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

from harness.reports._common import (
    OUTCOMES,
    anchor,
    attention_cells,
    cell_name,
    event_message,
    marker,
    ms,
    needs_attention,
    rank_groups,
    ranks_label,
    seconds,
    sorted_history,
    summary_parts,
    text_groups,
)
from harness.runner.cells import KNOWN, OK, SCHEMA, UNEXPECTED, Cell, Matrix

#: Beyond this many events, the page shows the first ones and points to the JSON report.
MAX_HISTORY_ROWS = 2000
NUMERIC = ("t (ms)", "step")
VERDICT_LABELS = {OK: "ok", KNOWN: "known", UNEXPECTED: "unexpected"}


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


CSS = """
:root { color-scheme: light; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg: #f6f8fa;
  --PASS: #1a7f37; --PASS-bg: #dafbe1; --ERROR: #9a6700; --ERROR-bg: #fff1c5;
  --FAIL: #a0116e; --FAIL-bg: #ffe3f4; --HANG: #4c2fbf; --HANG-bg: #ebe5ff;
  --CRASH: #ffffff; --CRASH-bg: #3d444d; --other: #59636e; --other-bg: #eef1f4; --bad: #cf222e; }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); background: #fff; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
  font-size: 12.5px; }
header { background: var(--bg); border-bottom: 1px solid var(--line); padding: 18px 0 14px; }
.wrap { max-width: 1240px; margin: 0 auto; padding: 0 24px; }
h1 { font-size: 22px; margin: 0 0 6px; }
h1 .status { font-size: 14px; font-weight: 600; margin-left: 10px; padding: 3px 10px; border-radius: 999px;
  vertical-align: 3px; }
.status.bad { background: var(--bad); color: #fff; }
.status.good { background: var(--PASS); color: #fff; }
h2 { font-size: 17px; margin: 26px 0 10px; }
h4 { font-size: 13px; margin: 16px 0 6px; color: var(--muted); text-transform: uppercase;
  letter-spacing: .04em; }
.meta { color: var(--muted); margin: 0 0 10px; }
.meta b { color: var(--fg); font-weight: 600; }
.counts { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
.counts .pill, .counts .badge { font-size: 12.5px; padding: 2px 9px; }
.counts .sep { width: 1px; height: 20px; background: var(--line); margin: 0 6px; }
.pill { display: inline-block; font-weight: 700; font-size: 12px; padding: 1px 8px; border-radius: 4px;
  letter-spacing: .02em; }
summary .pill { min-width: 58px; text-align: center; flex: none; }
summary .badge { min-width: 96px; text-align: center; flex: none; }
.o-PASS { color: var(--PASS); background: var(--PASS-bg); }
.o-ERROR { color: var(--ERROR); background: var(--ERROR-bg); }
.o-FAIL { color: var(--FAIL); background: var(--FAIL-bg); }
.o-HANG { color: var(--HANG); background: var(--HANG-bg); }
.o-CRASH { color: var(--CRASH); background: var(--CRASH-bg); }
.o-other { color: var(--other); background: var(--other-bg); }
.badge { display: inline-block; font-size: 11.5px; font-weight: 600; padding: 0 7px; border-radius: 999px;
  border: 1px solid transparent; white-space: nowrap; }
.badge.v-ok { color: var(--PASS); border-color: #aceebb; }
.badge.v-known { color: var(--muted); border: 1px dashed #9aa4ad; }
.badge.v-unexpected { color: #fff; background: var(--bad); }
.badge.v-other { color: var(--muted); border-color: var(--line); }
.legend { color: var(--muted); font-size: 12.5px; margin: 8px 0 0; display: flex; flex-wrap: wrap;
  gap: 14px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; }
table.matrix { border-spacing: 0; }
table.matrix th { text-align: left; font-weight: 600; padding: 6px 10px; white-space: nowrap; }
table.matrix thead th { border-bottom: 2px solid var(--line);
  font-family: ui-monospace, Menlo, Consolas, monospace;
  font-size: 12.5px; }
table.matrix tbody th { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px;
  font-weight: 500; border-bottom: 1px solid #eef1f4; }
table.matrix td { padding: 3px 4px; border-bottom: 1px solid #eef1f4; }
table.matrix tbody tr:hover { background: #f6f8fa; }
a.gc { display: flex; align-items: center; justify-content: space-between; gap: 8px; min-width: 150px;
  padding: 4px 8px; border-radius: 6px; text-decoration: none; border: 2px solid transparent;
  font-weight: 700; font-size: 12.5px; }
a.gc:hover { filter: brightness(.95); }
a.gc.v-known { border: 2px dashed #9aa4ad; opacity: .8; }
a.gc.v-unexpected { border: 2px solid var(--bad); box-shadow: 0 0 0 1px var(--bad); }
a.gc .badge { font-size: 10.5px; background: rgba(255, 255, 255, .85); }
a.gc .badge.v-unexpected { background: var(--bad); }
a.gc.v-ok .badge { border-color: transparent; }
.missing { color: #9aa4ad; padding: 4px 8px; }
details.cell { border: 1px solid var(--line); border-radius: 8px; margin: 0 0 8px; background: #fff; }
details.cell.v-unexpected { border-left: 5px solid var(--bad); }
details.cell.v-known { border-left: 5px dashed #9aa4ad; }
details.cell.v-ok { border-left: 5px solid var(--PASS); }
details.cell > summary { display: flex; align-items: center; gap: 10px; padding: 8px 12px; cursor: pointer;
  list-style: none; }
details.cell > summary::-webkit-details-marker { display: none; }
details.cell > summary::before { content: "▸"; color: var(--muted); width: 10px; flex: none; }
details.cell[open] > summary::before { content: "▾"; }
details.cell[open] > summary { border-bottom: 1px solid var(--line); background: var(--bg);
  border-radius: 8px 8px 0 0; }
summary .name { font-weight: 600; white-space: nowrap; }
summary .line { color: var(--muted); overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  min-width: 0; flex: 1; }
details.cell[open] > summary .line { visibility: hidden; }
.body { padding: 4px 16px 14px; scroll-margin-top: 60px; }
.body:target { outline: 3px solid #54aeff; outline-offset: 2px; }
p.detail { font-size: 15px; font-weight: 600; margin: 10px 0 8px; }
.facts { display: flex; flex-wrap: wrap; gap: 4px 18px; margin: 0 0 6px; padding: 0; list-style: none; }
.facts li span { color: var(--muted); margin-right: 5px; }
.finding { background: #fff8c5; border: 1px solid #eed888; border-radius: 6px; padding: 6px 10px;
  margin: 8px 0; }
.replay { display: flex; align-items: stretch; gap: 6px; }
.replay pre { flex: 1; margin: 0; }
button { font: inherit; font-size: 12.5px; padding: 3px 12px; border: 1px solid var(--line);
  border-radius: 6px;
  background: #f6f8fa; cursor: pointer; }
button:hover { background: #eef1f4; }
pre { background: #f6f8fa; border: 1px solid #e3e8ec; border-radius: 6px; padding: 8px 10px;
  margin: 4px 0 8px;
  white-space: pre-wrap; overflow-wrap: anywhere; max-height: 30em; overflow: auto; }
table.t { margin: 2px 0 8px; font-size: 13px; }
table.t th { text-align: left; color: var(--muted); font-weight: 600; border-bottom: 1px solid var(--line);
  padding: 4px 8px; white-space: nowrap; }
table.t td { border-bottom: 1px solid #eef1f4; padding: 3px 8px; vertical-align: top; }
table.t td { white-space: nowrap; }
table.t td.num, table.t th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.t td.wrap { white-space: normal; overflow-wrap: anywhere; min-width: 16em; }
tr.k-fault td { background: #fff0f1; } tr.k-hang td { background: #ebe5ff; }
tr.k-mismatch td { background: #ffe3f4; } tr.k-exit td { background: #f6f8fa; }
details.sub { margin: 4px 0; }
details.sub > summary { cursor: pointer; color: var(--fg); font-weight: 600; padding: 2px 0; }
details.sub > summary .n { color: var(--muted); font-weight: 400; }
details.group > summary { cursor: pointer; font-size: 15px; font-weight: 600; margin: 26px 0 10px; }
.toolbar { margin: 0 0 10px; display: flex; gap: 6px; }
.none { color: var(--muted); font-style: italic; }
footer { color: var(--muted); font-size: 12px; padding: 24px 0 40px; }
@media (max-width: 700px) { summary .line { display: none; } .wrap { padding: 0 12px; } }
"""

JS = """
(function () {
  function openCell(id, scroll) {
    var target = id && document.getElementById(id);
    if (!target) return;
    for (var el = target; el; el = el.parentElement) if (el.tagName === 'DETAILS') el.open = true;
    var cell = target.closest('details.cell');
    if (scroll && cell) cell.scrollIntoView({block: 'start'});
  }
  document.querySelectorAll('a.gc').forEach(function (a) {
    a.addEventListener('click', function () { openCell(a.getAttribute('href').slice(1), false); });
  });
  window.addEventListener('hashchange', function () { openCell(location.hash.slice(1), true); });
  if (location.hash) openCell(location.hash.slice(1), true);
  document.querySelectorAll('.js').forEach(function (el) { el.hidden = false; });
  document.querySelectorAll('button.copy').forEach(function (b) {
    b.addEventListener('click', function () {
      var text = b.parentElement.querySelector('code').textContent;
      function done() { b.textContent = 'Copied'; setTimeout(function () { b.textContent = 'Copy'; }, 1500); }
      function fallback() {
        var ta = document.createElement('textarea'); ta.value = text; document.body.appendChild(ta);
        ta.select(); try { document.execCommand('copy'); done(); } catch (err) {} ta.remove();
      }
      if (navigator.clipboard) navigator.clipboard.writeText(text).then(done, fallback); else fallback();
    });
  });
  function setAll(open) {
    document.querySelectorAll('details.cell, details.group').forEach(function (d) { d.open = open; });
  }
  var ex = document.getElementById('expand'), co = document.getElementById('collapse');
  if (ex) ex.addEventListener('click', function () { setAll(true); });
  if (co) co.addEventListener('click', function () { setAll(false); });
})();
"""


def header(matrix: Matrix) -> str:
    outcomes, verdicts = summary_parts(matrix)
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
        f' · seed <b>{e(matrix.seed)}</b>'
        f' · {e(matrix.created)} · harness {e(matrix.harness_version)}</p>'
        f'<div class="counts">{"".join(chips)}</div></div></header>'
    )


def grid_cell(cell: Cell | None) -> str:
    if cell is None:
        return '<td><span class="missing" title="not run">·</span></td>'
    title = f"{cell_name(cell)}: {cell.outcome}, {cell.verdict} (expected {cell.expected}). {cell.detail}"
    return (f'<td><a class="gc {outcome_class(cell.outcome)} {verdict_class(cell.verdict)}" '
            f'href="#{e(anchor(cell))}" title="{e(title)}"><span>{e(cell.outcome)}</span>'
            f"{verdict_badge(cell.verdict)}</a></td>")


def grid(matrix: Matrix) -> str:
    head = "".join(f'<th scope="col">{e(t)}</th>' for t in matrix.targets)
    rows = []
    for scenario in matrix.scenarios:
        cells = "".join(grid_cell(matrix.cell(scenario, t)) for t in matrix.targets)
        rows.append(f'<tr><th scope="row">{e(scenario)}</th>{cells}</tr>')
    legend = (
        '<div class="legend"><span>colour: the outcome</span>'
        f"<span>{verdict_badge(OK)} meets its expectation</span>"
        f"<span>{verdict_badge(KNOWN)} a recorded known failure</span>"
        f"<span>{verdict_badge(UNEXPECTED)} a new failure, or a known one that now passes</span>"
        "<span>click a cell for its detail</span></div>"
    )
    return (f'<section><h2>Matrix</h2><div class="scroll"><table class="matrix"><thead><tr>'
            f'<th scope="col">scenario \\ target</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            f"</table></div>{legend}</section>")


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


def ranks_table(cell: Cell) -> str:
    rows = []
    for g in rank_groups(cell):
        rows.append(f'<tr><td class="mono">{e(g.rank_text)}</td><td class="mono">{e(g.host_text)}</td>'
                    f"<td>{outcome_pill(g.outcome)}</td><td class=\"mono\">{e(g.exit)}</td>"
                    f'<td class="wrap mono">{e(g.result)}</td></tr>')
    return table(("rank", "host", "outcome", "exit / signal", "error or result"), rows)


def traces(cell: Cell) -> str:
    """Tracebacks and stacks, one block per distinct text, the first one open."""
    parts = []
    for attr, title in (("stack", "Stack (still blocked at the deadline)"), ("traceback", "Traceback")):
        for ranks, text in text_groups(cell, attr):
            parts.append(sub(f"{title} · {ranks_label(ranks)}", "", f"<pre>{e(text.rstrip())}</pre>",
                             open_=not parts))
    return "".join(parts)


def faults_table(cell: Cell) -> str:
    rows = [f'<tr><td class="num">{e(ms(f.t))}</td><td>{e("all" if f.rank is None else f.rank)}</td>'
            f'<td class="mono">{e(f.fault)}</td><td class="mono">{e(f.op or "")}</td>'
            f'<td class="wrap mono">{e(f.path or "")}</td><td class="wrap">{e(f.message)}</td></tr>'
            for f in cell.faults_fired]
    return table(("t (ms)", "rank", "fault", "op", "path", "message"), rows)


def history_table(cell: Cell) -> str:
    events = sorted_history(cell)
    rows = []
    for ev in events[:MAX_HISTORY_ROWS]:
        kind = str(ev.get("kind", ""))
        rank = ev.get("rank")
        step = ev.get("step")
        rows.append(
            f'<tr class="k-{e(kind)}"><td class="num">{e(ms(ev.get("t")))}</td>'
            f'<td>{e("world" if rank is None else rank)}</td><td>{e(kind)}</td>'
            f'<td class="mono">{e(ev.get("op") or "")}</td><td class="mono">{e(ev.get("tag") or "")}</td>'
            f'<td class="num">{e("" if step is None else step)}</td>'
            f'<td class="wrap mono">{e(ev.get("site") or "")}</td>'
            f'<td class="wrap">{e(event_message(ev))}</td></tr>')
    more = ""
    if len(events) > MAX_HISTORY_ROWS:
        more = (f'<p class="none">{len(events) - MAX_HISTORY_ROWS} more events are in the JSON report '
                "(matrix.json).</p>")
    return table(("t (ms)", "rank", "kind", "op", "tag", "step", "site", "message"), rows) + more


def output_blocks(cell: Cell) -> str:
    parts = []
    for attr in ("stdout", "stderr"):
        for ranks, text in text_groups(cell, attr):
            parts.append(sub(f"{attr} · {ranks_label(ranks)}", "", f"<pre>{e(text.rstrip())}</pre>"))
    return "".join(parts)


def cell_detail(cell: Cell) -> str:
    """One cell as a <details>: closed, its summary says enough to decide whether to open it."""
    facts = [("scenario", cell.scenario), ("target", cell.target), ("topology", cell.topology),
             ("seed", cell.seed), ("expected", cell.expected),
             ("outcome", f"{cell.outcome} ({cell.verdict})"), ("duration", seconds(cell.duration_s))]
    if cell.workload:
        facts.append(("workload", cell.workload))
    body = []
    if cell.detail or cell.outcome != "PASS":
        body.append(f'<p class="detail">{e(cell.detail or "(no detail recorded)")}</p>')
    if cell.finding:
        body.append(f'<div class="finding"><b>Seed finding:</b> {e(cell.finding)}</div>')
    items = "".join(f"<li><span>{e(k)}</span>{e(v)}</li>" for k, v in facts)
    body.append(f'<ul class="facts">{items}</ul>')
    body.append('<h4>Replay</h4><div class="replay"><pre><code>'
                f'{e(cell.replay or "(none)")}</code></pre>'
                '<button class="copy js" type="button" hidden>Copy</button></div>')
    ranks = ranks_table(cell) if cell.ranks else '<p class="none">no rank recorded</p>'
    body.append("<h4>Ranks</h4>" + ranks)
    body.append(traces(cell))
    if cell.faults_fired:
        body.append(f"<h4>Faults fired ({len(cell.faults_fired)})</h4>" + faults_table(cell))
    if cell.mismatches:
        body.append(f"<h4>Mismatches ({len(cell.mismatches)})</h4><ul>"
                    + "".join(f'<li class="mono">{e(m)}</li>' for m in cell.mismatches) + "</ul>")
    if cell.history:
        body.append(sub("History", f"({len(cell.history)} events, in time order)", history_table(cell),
                        open_=cell.outcome != "PASS" and len(cell.history) <= 60))
    output = output_blocks(cell)
    if output:
        body.append(sub("Captured output", "", output))
    name = cell_name(cell)
    return (f'<details class="cell {verdict_class(cell.verdict)}">'
            f'<summary>{outcome_pill(cell.outcome)}{verdict_badge(cell.verdict)}'
            f'<code class="name">{e(name)}</code><span class="line">{e(cell.detail)}</span></summary>'
            f'<div class="body" id="{e(anchor(cell))}">{"".join(body)}</div></details>')


def cells_section(matrix: Matrix) -> str:
    attention = attention_cells(matrix)
    others = [c for c in matrix.cells if not needs_attention(c)]
    toolbar = ('<div class="toolbar js" hidden><button id="expand" type="button">Expand all</button>'
               '<button id="collapse" type="button">Collapse all</button></div>')
    parts = [f"<section><h2>Cells that need a look ({len(attention)})</h2>{toolbar}"]
    if attention:
        parts += [cell_detail(c) for c in attention]
    else:
        parts.append('<p class="none">every cell passed and met its expectation</p>')
    if others:
        parts.append(f'<details class="group"><summary>Passing cells ({len(others)})</summary>'
                     + "".join(cell_detail(c) for c in others) + "</details>")
    parts.append("</section>")
    return "".join(parts)


def to_html(matrix: Matrix) -> str:
    """The whole page: header, grid, then every cell's detail; inline CSS and JS only."""
    unexpected = len(matrix.unexpected)
    title = f"harness matrix · {unexpected} unexpected · seed {matrix.seed}"
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
