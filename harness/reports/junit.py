"""JUnit XML, for CI dashboards: one test case per cell.

An ``unexpected`` cell fails the build, so it is a <failure>; an ``unexercised`` one
(its fault could not happen to the target) is <skipped> with the reason; a ``known`` cell
is recorded but tolerated, as pytest reports a strict xfail, so it is
<skipped>; an ``ok`` cell passes (even an ERROR that meets ``fail-loudly``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from harness.reports._common import cell_name
from harness.reports.diagnosis import describe
from harness.runner.cells import Cell, Matrix
from harness.vocabulary import KNOWN, OK, UNEXERCISED, UNEXPECTED

# Characters XML 1.0 cannot carry at all, even escaped (ANSI escapes in a rank's stderr, NULs...).
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def clean(text: object) -> str:
    """Text XML can hold: ElementTree escapes <, > and &, this replaces what it cannot."""
    return _INVALID_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def testcase(cell: Cell, parent: ET.Element, seeded: bool = False) -> ET.Element:
    case = ET.SubElement(parent, "testcase", {
        "name": clean(cell_name(cell, seeded)),
        "classname": clean(f"harness.{cell.workload or 'matrix'}"),
        "time": f"{max(cell.duration_s, 0.0):.3f}",
    })
    if cell.verdict == UNEXPECTED:
        failure = ET.SubElement(case, "failure", {"message": clean(cell.detail), "type": clean(cell.outcome)})
        failure.text = clean(describe(cell) + "\n")
    elif cell.verdict == UNEXERCISED:  # as pytest shows it: skipped, with the reason
        ET.SubElement(case, "skipped", {"message": clean(cell.detail)})
    elif cell.verdict == KNOWN:
        ET.SubElement(case, "skipped", {"message": clean(f"known failure: {cell.outcome}: {cell.detail}")})
    elif cell.verdict != OK:
        error = ET.SubElement(case, "error", {"message": clean(f"unknown verdict {cell.verdict!r}")})
        error.text = clean(describe(cell) + "\n")
    if cell.verdict != UNEXPECTED and cell.outcome != "PASS":
        out = ET.SubElement(case, "system-out")
        out.text = clean(describe(cell) + "\n")
    return case


def to_junit(matrix: Matrix) -> str:
    """The matrix as one <testsuite>, with the seed and version as properties."""
    cells = matrix.cells
    suite = ET.Element("testsuite", {
        "name": "harness.matrix",
        "tests": str(len(cells)),
        "failures": str(sum(c.verdict == UNEXPECTED for c in cells)),
        "errors": str(sum(c.verdict not in (OK, KNOWN, UNEXPECTED) for c in cells)),
        "skipped": str(sum(c.verdict in (KNOWN, UNEXERCISED) for c in cells)),
        "time": f"{max(matrix.duration_s, 0.0):.3f}",
        "timestamp": clean(matrix.created),
    })
    props = ET.SubElement(suite, "properties")
    shown = [("seed", matrix.seed), ("harness_version", matrix.harness_version),
             ("created", matrix.created)] + ([("isolation", matrix.isolation)] if matrix.isolation
                                             else [])
    for name, value in shown:
        ET.SubElement(props, "property", {"name": name, "value": clean(value)})
    for cell in cells:
        testcase(cell, suite, matrix.several_seeds)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"

