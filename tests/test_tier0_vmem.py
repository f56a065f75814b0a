"""Tier 0's VMEM rule (PLS015), pinned to the TPU compiler at the threshold.

The rule adds each VMEM block twice and the scratch once and compares with the scoped limit; the
compiler needs at least that much, so a PLS015 must always come with the compile failing (PLS201).
tests/data/vmem/copy_blocks.py's blocks take ROWS x 16 KiB: just over the measured limit the rule
fires and the deviceless compile fails; just under it the rule is silent; with vmem_limit_bytes
raised it is silent and the compile passes, and with vmem_limit_bytes lowered it fires and the
compile fails. The limit is the one the libtpu probe measures (``pallasite chips``), not a typed-in
number. Before the rule, tier 0 said nothing and the user waited for the compile.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pallasite.analysis.tier0 import analyze
from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths

DATA = Path(__file__).parent / "data" / "vmem"
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
PER_ROW = 2 * 2 * 1024 * 4  # two (ROWS, 1024) float32 blocks, double-buffered
TARGET = "v5e"
pytestmark = [pytest.mark.tpu_compiler, pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")]


@pytest.fixture(scope="module")
def limit() -> int:
    from pallasite.engine import chip_table

    specs, error = chip_table.table_sync(probe=True)
    assert error is None, error
    [spec] = [s for s in specs if s.name == TARGET]
    assert spec.scoped_vmem_limit_bytes
    return spec.scoped_vmem_limit_bytes


def _variant(tmp_path: Path, rows: int, vmem_limit: int | None = None) -> Path:
    text = (DATA / "copy_blocks.py").read_text().replace("ROWS = 256", f"ROWS = {rows}")
    if vmem_limit is not None:
        text = text.replace("from jax.experimental import pallas as pl",
                            "from jax.experimental import pallas as pl\nfrom jax.experimental.pallas import tpu as pltpu")
        text = text.replace("        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n",
                            "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
                            f"        compiler_params=pltpu.CompilerParams(vmem_limit_bytes={vmem_limit}),\n")
    path = tmp_path / f"copy_{rows}_{vmem_limit}.py"
    path.write_text(text)
    return path


def _tier0(path: Path, limit: int) -> list:
    return [f for f in analyze(path.read_text(), str(path), target=TARGET, scoped_vmem=limit).findings if f.code == "PLS015"]


def _compile_fails(paths: list[Path]) -> dict[str, bool]:
    reports = check_paths([str(p) for p in paths], CheckOptions(target=TARGET, tiers=(1, 2), time_limit_s=300))
    return {Path(r.path).name: any(f.code == "PLS201" for f in r.findings) for r in reports}


def test_rule_fires_exactly_where_the_compiler_runs_out_of_scoped_vmem(tmp_path, limit):
    rows = limit // PER_ROW
    over, under = _variant(tmp_path, rows + 8), _variant(tmp_path, rows - 64)
    raised = _variant(tmp_path, rows + 8, vmem_limit=2 * limit)
    lowered = _variant(tmp_path, rows // 2 + 8, vmem_limit=limit // 2)
    fails = _compile_fails([over, under, raised, lowered])
    assert fails == {over.name: True, under.name: False, raised.name: False, lowered.name: True}
    [finding] = _tier0(over, limit)
    assert _tier0(under, limit) == [] and _tier0(raised, limit) == []
    [low] = _tier0(lowered, limit)
    assert "its vmem_limit_bytes" in low.message
    # at the line that set the size (the ROWS constant), with the BlockSpec and the call related
    line = over.read_text().splitlines()[finding.span.line]
    assert line.startswith("ROWS = ") and finding.severity == "error"
    assert any("the BlockSpec of the largest block" in r.message for r in finding.related)


def test_rule_is_silent_without_a_measured_limit():
    text = (DATA / "copy_blocks.py").read_text().replace("ROWS = 256", "ROWS = 65536")
    assert [f for f in analyze(text, "copy.py", target=TARGET).findings if f.code == "PLS015"] == []
