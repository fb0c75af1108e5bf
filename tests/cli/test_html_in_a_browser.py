"""The HTML report as a person sees it: headless Chromium opens it, at a phone's width and a
desktop's, with every cell open, and says what it laid out.

Chromium is a system package (`apt-get install chromium`); without it these tests skip,
saying so. `.ci/run` installs it where the machine lets it.
"""

from __future__ import annotations

import gzip
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.reports.html import to_html
from harness.reports.json_report import load

from support import TESTS

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium on this machine "
                                "(apt-get install chromium)")

#: Run after the page's own script: opens what is asked, then writes what the layout came to
#: into an attribute of <body>, which --dump-dom prints.
PROBE = """<script>
(function () {
  if (OPEN_ALL) document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  var target = location.hash && document.getElementById(location.hash.slice(1));
  var wide = [];
  function clipped(node) {  // inside a box that scrolls or clips what it holds
    for (var a = node.parentElement; a && a !== document.body; a = a.parentElement)
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    return false;
  }
  document.querySelectorAll('body *').forEach(function (el) {  // what widens the page itself
    if (el.getBoundingClientRect().right > window.innerWidth + 1 && !clipped(el))
      wide.push(el.tagName + '.' + el.className + ': ' + el.textContent.slice(0, 40));
  });
  var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), node;
  while ((node = walker.nextNode())) {  // a word too long for its box sticks out of it
    var range = document.createRange(); range.selectNodeContents(node);
    var el = node.parentElement;
    if (range.getBoundingClientRect().right > window.innerWidth + 1 && !clipped(node))
      wide.push('text in ' + el.tagName + '.' + el.className + ': ' + node.data.slice(0, 40));
  }
  document.body.setAttribute('data-probe', JSON.stringify({
    inner: window.innerWidth, scroll: document.documentElement.scrollWidth,
    wide: wide.slice(0, 5), replays: document.querySelectorAll('div.replay').length,
    copies: document.querySelectorAll('div.replay > button.copy').length,
    grids: document.querySelectorAll('table.matrix').length,
    opened: target ? target.closest('details.cell').open : null,
    fontPx: parseFloat(getComputedStyle(document.querySelector('summary .name')).fontSize)
  }));
})();
</script>"""


def look(page: str, tmp_path: Path, width: int, open_all: bool = True, hash_: str = "") -> dict:
    """What Chromium laid out for ``page`` in a frame ``width`` pixels wide (a headless
    window is at least 500 px wide, so the page is framed, as a phone's screen frames it)."""
    path = tmp_path / f"report-{width}.html"
    probe = PROBE.replace("OPEN_ALL", "true" if open_all else "false")
    path.write_text(page.replace("</body></html>", probe + "</body></html>"), encoding="utf-8")
    frame = tmp_path / f"frame-{width}.html"
    frame.write_text(
        f'<html><body style="margin:0"><iframe id="f" src="{path.as_uri() + hash_}" '
        f'style="width:{width}px;height:900px;border:0"></iframe><script>'
        "document.getElementById('f').onload = function () {"
        "  var b = this.contentDocument.body;"
        "  document.body.setAttribute('data-probe', b.getAttribute('data-probe')); };"
        "</script></body></html>", encoding="utf-8")
    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--allow-file-access-from-files", "--window-size=1400,1000",
         "--virtual-time-budget=5000", "--dump-dom", frame.as_uri()],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "HOME": str(tmp_path)})  # Chromium's profile, not the user's
    match = re.search(r'<body[^>]*data-probe="([^"]*)"', out.stdout)
    assert match, f"Chromium printed no probe (exit {out.returncode}): {out.stderr[-2000:]}"
    return json.loads(html.unescape(match[1]))


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The report of the golden matrix: 14 real cells, one per outcome, verdict and workload."""
    path = tmp_path_factory.mktemp("golden") / "matrix.json"
    path.write_bytes(gzip.decompress((TESTS / "unit" / "golden" / "matrix.json.gz").read_bytes()))
    return to_html(load(str(path)))


def test_on_a_phone_nothing_makes_the_page_scroll_sideways(page: str, tmp_path: Path) -> None:
    """At 420 px with every cell open: grids, histories and tracebacks scroll inside their
    own boxes, the page itself does not."""
    seen = look(page, tmp_path, 420)
    assert seen["scroll"] <= seen["inner"] == 420, seen
    assert seen["wide"] == [], seen
    assert seen["fontPx"] >= 12


def test_on_a_desktop_every_replay_has_its_copy_button_and_a_grid_per_workload(
        page: str, tmp_path: Path) -> None:
    seen = look(page, tmp_path, 1280, open_all=False)
    assert seen["scroll"] <= seen["inner"], seen
    assert seen["replays"] == seen["copies"] > 0, seen  # the page's script made them
    assert seen["grids"] == 3, seen  # config-sync, data-sharding, checkpoint-resume


def test_a_link_to_a_cell_opens_it(page: str, tmp_path: Path) -> None:
    anchor = re.search(r'<div class="body" id="([^"]+)"', page)[1]
    assert look(page, tmp_path, 1280, open_all=False, hash_="#" + anchor)["opened"] is True
