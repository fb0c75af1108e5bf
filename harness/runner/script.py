"""The verdict of a whole script's world (``harness exec``): what the world's outcome says,
read with what the script says of itself.

Two things a world's outcome alone gets wrong for a script:

- A script that started no rank (a test file that skipped itself, a ``--help``) tested
  nothing: NOT-EXERCISED with its reason, never PASS.
- A test file judges its own ranks: one that expects a rank to raise (``assertRaises``
  around ``xmp.spawn``) catches what the spawn re-raises and reports OK. Its verdict is
  read from what its runner printed last (unittest and absltest's ``Ran N tests`` then
  ``OK``, pytest's closing ``N passed``): when every launcher exited 0 and says so, the
  ranks' errors were what it expected, and the world is a PASS that says it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.history import ranks_phrase
from harness.vocabulary import NOT_EXERCISED, PASS
from harness.world.result import RankResult, WorldResult

#: unittest (and absltest, which prints through it): the last "Ran N tests" and its verdict
_UNITTEST = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*\n\s*\n(OK|FAILED)\b(.*)$", re.M)
#: pytest's closing line: "==== 3 passed, 1 skipped in 0.52s ====" (bare with -q)
_PYTEST = re.compile(r"^=*\s*((?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|"
                     r"warnings?|deselected|rerun)(?:, )?)+) in [\d.]+s\b.*$", re.M)


@dataclass(frozen=True)
class Verdict:
    outcome: str
    detail: str


def reported(launcher: RankResult) -> tuple[bool, str] | None:
    """What a test runner said of its own run in this launcher's output: (passed, its
    words), or None if it printed no verdict a runner prints."""
    text = f"{launcher.stdout}\n{launcher.stderr}"
    found = list(_UNITTEST.finditer(text))
    if found:
        last = found[-1]
        words = f"unittest: ran {last.group(1)}, {last.group(2)}{last.group(3).rstrip()}"
        return last.group(2) == "OK", words
    found = list(_PYTEST.finditer(text))
    if found:
        summary = found[-1].group(1)
        bad = re.search(r"\b\d+ (failed|errors?)\b", summary)
        return bad is None and re.search(r"\b\d+ passed\b", summary) is not None, \
            f"pytest: {summary}"
    return None


def judge(result: WorldResult) -> Verdict:
    """The verdict of a script's world (``result``, from ``run_world(argv=...)``)."""
    launchers = result.hosts
    if not launchers or any(h.outcome != PASS for h in launchers):
        return Verdict(result.outcome, result.detail())
    if not result.single_hosts and all(r.never_started for r in result.ranks):
        said = [r for r in (reported(h) for h in launchers) if r is not None]
        why = f" ({said[0][1]})" if said else ""
        return Verdict(NOT_EXERCISED, f"{result.detail()}{why}: nothing of the world was "
                                      "tested")
    if result.outcome == PASS:
        return Verdict(PASS, result.detail())
    said = [reported(h) for h in launchers]
    if all(s is not None and s[0] for s in said):
        failed = [r.rank for r in result.ranks if r.outcome != PASS]
        words = said[0][1] if said[0] else ""
        return Verdict(PASS, f"the test file reported its own run passed ({words}): "
                             f"{ranks_phrase(failed)} ended {result.outcome} as it expected "
                             f"({result.detail()})")
    return Verdict(result.outcome, result.detail())
