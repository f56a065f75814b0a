"""Without a device, the optimize loop's frozen tests run in interpret mode at reduced shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from judging import file_evaluator
from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import Engine

DATA = Path(__file__).parent / "data" / "optimize"


@pytest.fixture
async def engine():
    e = Engine(use_store=False)
    yield e
    await e.close()


@pytest.mark.pipeline
async def test_a_kernel_too_big_for_interpret_mode_is_tested_at_reduced_shapes(engine):
    # three 1 GiB arrays, 2048 grid steps: at full size the interpret run exceeds the worker's limits
    path = DATA / "big_add.py"
    source = path.read_text()
    evaluator = file_evaluator(engine, str(path), source, CheckOptions(target="v6e", tiers=(0, 1), memory_mb=3072))
    result = await evaluator.test(source)
    assert result.ok, result
    checks = result.data["checks"]
    assert checks["full_inputs"] == [[[16384, 16384], "float32"]] * 2
    rows, cols = checks["inputs"][0][0]
    assert rows < 16384 and rows % 256 == 0 and cols % 512 == 0  # grid shrunk, blocks kept
    extra = checks["extra_shape"]
    assert extra["checked"] and extra["inputs"] != checks["inputs"]  # one more shape beyond the example
    assert "reduced from float32[16384, 16384]" in result.summary and "second shape" in result.summary
    assert result.data["timed"] is False  # correctness only: interpret-mode time would rank nothing
    # a wrong candidate is still caught at the reduced shapes
    wrong = await evaluator.test(source.replace("x_ref[...] + y_ref[...]", "x_ref[...] - y_ref[...]"))
    assert not wrong.ok and "wrong_result" in wrong.evidence


async def test_small_inputs_are_not_reduced(engine):
    path = DATA / "add.py"
    source = path.read_text()
    result = await file_evaluator(engine, str(path), source, CheckOptions(target="v6e", tiers=(0, 1))).test(source)
    assert result.ok and "reduced" not in result.summary and result.data["full_inputs"] is None
    assert result.data["inputs"] == [[[256, 128], "float32"]] * 2


async def test_inputs_too_large_that_cannot_be_reduced_are_refused_with_the_reason(engine):
    # before: the worker ran the 2 GiB interpret run and was killed at its memory limit, saying nothing useful
    path = DATA / "whole_block.py"
    source = path.read_text()
    result = await file_evaluator(engine, str(path), source, CheckOptions(target="v6e", tiers=(0, 1))).test(source)
    assert not result.ok
    assert "cannot be reduced" in result.evidence and "2.00 GiB" in result.evidence, result.evidence
    assert "no dim of the large inputs is cut into blocks" in result.evidence and "device backend" in result.evidence


async def test_inputs_still_too_large_after_reduction_are_refused(engine):
    # JAXBench's ragged paged attention: the q rows shrink, the 1 GiB pl.ANY page table cannot
    path = DATA / "whole_weight.py"
    source = path.read_text()
    result = await file_evaluator(engine, str(path), source, CheckOptions(target="v6e", tiers=(0, 1))).test(source)
    assert not result.ok and "even reduced, the inputs take 0.59 GiB" in result.evidence, result.evidence
