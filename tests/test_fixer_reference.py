"""Tier 3 against reference(): a proposal that compiles but computes the wrong numbers is rejected
(its mismatch fed back); the right one is offered as matching the reference in interpret mode.

Marked slow: two interpret-mode runs take 20-30 s on a loaded 2-core machine
(`pytest -m slow tests/test_fixer_reference.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pallasite.agents.fix_action import FixJob, fix_file
from pallasite.agents.fixer import Budgets
from pallasite.agents.llm.providers import ProviderConfig
from pallasite.agents.llm.providers_scripted import ScriptedProvider
from pallasite.engine.checker import CheckOptions, Checker
from pallasite.engine.judge import Judge, Trusted

KERNEL = Path(__file__).parent / "data" / "agents" / "add_reference_bad_tiling.py"
GRID = "        grid=(x.shape[0] // BLOCK_ROWS, pl.cdiv(x.shape[1], BLOCK_COLS)),\n"
# compiles (128 lanes) but only the first column block is ever written
COMPILES_BUT_WRONG = json.dumps({"explanation": "128 lanes, one column step", "edits": [
    {"search": "BLOCK_COLS = 100\n", "replace": "BLOCK_COLS = 128\n"},
    {"search": GRID, "replace": "        grid=(x.shape[0] // BLOCK_ROWS, 1),\n"}]})
RIGHT = json.dumps({"explanation": "128 lanes", "edits": [{"search": "BLOCK_COLS = 100\n", "replace": "BLOCK_COLS = 128\n"}]})


@pytest.mark.slow
async def test_a_fix_that_compiles_but_is_wrong_is_rejected_by_the_reference():
    text = KERNEL.read_text()
    checker = Checker(CheckOptions(tiers=(0, 1), time_limit_s=120), untrusted=True)
    try:
        report = await checker.check(str(KERNEL), text, tiers=(0, 1))
        provider = ScriptedProvider(ProviderConfig(name="scripted"), [COMPILES_BUT_WRONG, RIGHT])
        outcome = await fix_file(FixJob(str(KERNEL), text, report, "v6e", (0, 1), docs_passages=0),
                                 provider.config, Budgets(),
                                 Judge(None, checker.options, Trusted(str(KERNEL), text), checker=checker),
                                 provider=provider)
    finally:
        await checker.close()
    assert outcome.tiers == (0, 1, 3)  # tier 3 added: the file has reference()
    assert [a.verdict for a in outcome.attempts] == ["still failing", "verified"], outcome.attempts
    assert "tier 3" in outcome.attempts[0].detail  # the interpret-mode verdict, fed back
    assert "tier 3" in provider.requests[1].prompt
    assert outcome.ok and outcome.label == ("not compiled for the chip: tier 2 was not run (tiers 0,1 passed); "
                                            "correct: matches reference() in TPU interpret mode (CPU)")
