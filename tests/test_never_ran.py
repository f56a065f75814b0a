"""Kernel code no check ran (issue 57, PLS308): a variant the task's shapes never take and a kernel no task
calls are said, with their lines, by `pallasite check` and by the hover over any of those lines. Before,
nothing said which lines tier 3 had not run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pallasite.analysis.types import Finding, Span
from pallasite.engine.findings import never_ran
from pallasite.server.editor import hover

DATA = Path(__file__).parent / "data" / "locate"


def test_check_says_the_lines_no_check_ran():
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", str(DATA / "never_ran.py"),
                           "--tiers", "0,3", "--no-store", "--format", "json"], capture_output=True, text=True,
                          timeout=280)
    (file,) = json.loads(proc.stdout)["files"]
    found = [(f["line"], f["severity"], f["message"].split(";")[0]) for f in file["findings"] if f["code"] == "PLS308"]
    assert found == [(16, "information", "never ran in any check: line 16 (kernel double_kernel)"),
                     (22, "information", "never ran in any check: lines 22-23 (kernel double_backward_kernel)")]
    assert not [f for f in file["findings"] if f["severity"] == "error"]


def test_units_that_ran_are_not_said_and_a_unit_is_said_once_at_its_outermost():
    text = (DATA / "never_ran.py").read_text()
    ran = frozenset({14, 18})  # the kernel's first statement and its else branch
    found = never_ran.never_ran_findings(text, (), ran)
    assert [(f.span.line + 1, f.related[0].span.end_line + 1) for f in found] == [(16, 16), (22, 23)]
    assert never_ran.never_ran_findings(text, (), None) == []  # tier 3 did not run: nothing is said
    everything = frozenset(range(1, 60))
    assert never_ran.never_ran_findings(text, (), everything) == []


def test_the_hover_over_any_line_of_the_range_says_it():
    found = Finding(code="PLS308", message="never ran in any check: lines 22-23 (kernel k); add a call",
                    span=Span(21, 4, 21, 20), severity="information", tier=3,
                    related=(never_ran.Related(Span(21, 0, 22, 24), "never ran in any check: lines 22-23"),))
    said = never_ran.range_at([found], 22)
    assert said == found.message and never_ran.range_at([found], 23) is None
    text, _ = hover.with_never_ran(("the kernel's own hover", Span(22, 0, 22, 5)), said, 22)
    assert text.startswith("**Never ran in any check: lines 22-23") and "the kernel's own hover" in text
