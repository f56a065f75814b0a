"""Tier-0 rule PLS016 (analysis/rules/megacore.py): a grid axis whose first step initialises a ref
the kernel reads on its other steps, marked "parallel". Found on the generalisation benchmark's
development half, where tier 3 could not run those kernels' two-core split (their blocks exceed
v5p's scoped VMEM, or the parallel axes are no grid prefix) and nothing said it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pallasite.analysis.tier0 import analyze

DATA = Path(__file__).parent / "data" / "megacore"
TEXT = (DATA / "row_sums.py").read_text()
LINES = TEXT.splitlines()
ENTRY = next(i for i, t in enumerate(LINES) if "# expect: PLS016" in t)


def _pls016(text: str, target: str):
    return [f for f in analyze(text, "row_sums.py", target=target).findings if f.code == "PLS016"]


def test_carried_axis_marked_parallel_is_said_at_its_entry_on_a_megacore_chip():
    [found] = _pls016(TEXT, "v5p")
    assert found.severity == "error" and found.span.line == ENTRY  # wrong on the target chip: an error (issue 57)
    assert 'grid axis 1 is marked "parallel"' in found.message and "acc_ref" in found.message
    assert found.message.count("On v5p the device's two TensorCores split") == 1
    zero = next(i for i, t in enumerate(LINES) if "@pl.when(k == 0)" in t)
    assert any(r.span.line == zero for r in found.related)
    [edit] = found.fix.edits
    assert edit.new_text == '"arbitrary"' and edit.span.line == ENTRY


def test_one_core_chips_get_the_warning_for_the_two_core_ones():
    [found] = _pls016(TEXT, "v6e")
    assert found.severity == "warning"  # harmless on the target: a warning
    assert "Harmless on v6e (one TensorCore per device), but on two-core chips such as v4/v5p" in found.message


@pytest.mark.parametrize("change", [
    ('"parallel"),  # expect', '"arbitrary"),  # expect'),  # the carried axis is sequential: right
    ("acc_ref[...] += ", "acc_ref[...] = "),  # nothing read on the other steps: not carried
    ("@pl.when(k == 0)", "@pl.when(i == 0)"),  # initialised on the first row step instead: said for axis 0
])
def test_nothing_is_said_when_the_axis_carries_nothing_or_runs_in_order(change):
    text = TEXT.replace(*change)
    if change[1] == "@pl.when(i == 0)":  # axis 0 carries acc_ref now, and axis 0 is "parallel": said there
        [found] = _pls016(text, "v5p")
        assert 'grid axis 0 is marked "parallel"' in found.message
        return
    assert _pls016(text, "v5p") == []


def test_megacore_chips_are_the_ones_tier3_simulates_with_two_cores():
    from pallasite.analysis.rules.megacore import MEGACORE
    from pallasite.analysis.types import CHIP_TARGETS
    from pallasite.runner.tier3.interpret import target_cores

    assert tuple(t.name for t in CHIP_TARGETS if target_cores(t.name) == 2) == MEGACORE
