"""The HTML report's inline style sheet and script, kept apart from the markup they serve.

Inline because the page must open offline, from a zip, years later; the script
only opens the clicked cell and copies a replay command (the page works without it).
"""

import re

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
.o-NOT-EXERCISED { color: #7d4e00; background: #fff8c5; }
.badge { display: inline-block; font-size: 11.5px; font-weight: 600; padding: 0 7px; border-radius: 999px;
  border: 1px solid transparent; white-space: nowrap; }
.badge.v-ok { color: var(--PASS); border-color: #aceebb; }
.badge.v-known { color: var(--muted); border: 1px dashed #9aa4ad; }
.badge.v-unexpected { color: #fff; background: var(--bad); }
.badge.v-unexercised { color: #7d4e00; border: 1px dashed #d4a72c; }
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
details.cell.v-unexercised { border-left: 5px dashed #d4a72c; }
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
details.cell[open] > summary .line { white-space: normal; }  /* the whole detail, when it fits */
details.cell[open] > summary .line.cut { visibility: hidden; }  /* else the body shows it whole */
@media (max-width: 640px) {  /* a phone: the summary wraps rather than the page scrolling */
  details.cell > summary { flex-wrap: wrap; }
  summary .name { white-space: normal; overflow-wrap: anywhere; }
  .wrap { padding: 0 10px; }
}
.body { padding: 4px 16px 14px; scroll-margin-top: 60px; }
.body:target { outline: 3px solid #54aeff; outline-offset: 2px; }
p.detail { font-size: 15px; font-weight: 600; margin: 10px 0 8px; }
.body, .finding { overflow-wrap: anywhere; }  /* a long dotted name or path wraps on a phone */
.facts { margin: 0 0 6px; overflow-wrap: anywhere; }
.facts i { color: var(--muted); font-style: normal; }
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
/* the faults' columns by place (no class on each cell) */
table.faults td:nth-child(3), table.faults td:nth-child(4) {
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; }
table.faults td:nth-child(1) { text-align: right; font-variant-numeric: tabular-nums; }
ul.ranks { list-style: none; padding: 0; margin: 2px 0 8px; font-size: 13px; }
ul.ranks li { margin: 3px 0; overflow-wrap: anywhere; }
ul.ranks .pill { margin-right: 8px; }
table.faults td:nth-child(5) {
  white-space: normal; overflow-wrap: anywhere; min-width: 16em; }
pre.history { white-space: pre; overflow-wrap: normal; font-size: 12px; line-height: 1.45; }
pre.history .h { color: var(--muted); font-weight: 600; }
pre.history .k-fault { background: #fff0f1; } pre.history .k-hang { background: #ebe5ff; }
pre.history .k-mismatch { background: #ffe3f4; }
details.sub { margin: 4px 0; }
details.sub > summary { cursor: pointer; color: var(--fg); font-weight: 600; padding: 2px 0; }
details.sub > summary .n { color: var(--muted); font-weight: 400; }
details.group > summary { cursor: pointer; font-size: 15px; font-weight: 600; margin: 26px 0 10px; }
.toolbar { margin: 0 0 10px; display: flex; gap: 6px; }
.none { color: var(--muted); font-style: italic; }
footer { color: var(--muted); font-size: 12px; padding: 24px 0 40px; }
@media (max-width: 700px) { summary .line { display: none; } .wrap { padding: 0 12px; }
  details.cell[open] > summary .line:not(.cut) { display: block; flex-basis: 100%; } }
"""

def minified(css: str) -> str:
    """The stylesheet without its comments and indentation: the page carries it once per
    report, and its comments are for whoever edits it here."""

    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    return re.sub(r"\s*\n\s*", " ", css).strip()


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
  document.querySelectorAll('div.replay').forEach(function (div) {
    var b = document.createElement('button'); b.type = 'button'; b.className = 'copy';
    b.textContent = 'Copy'; div.appendChild(b);
  });
  document.querySelectorAll('button.copy').forEach(function (b) {
    b.addEventListener('click', function () {
      var text = b.parentElement.querySelector('pre').textContent;
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
