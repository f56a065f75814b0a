"""The verified fixer with the scripted provider, verified by the real checker's tier 0 (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pallasite.agents.edits import EditError, SearchReplace, apply_edits, hunks, parse_proposal
from pallasite.agents.fix_action import FixJob, fix_file
from pallasite.agents.prompts.fix_prompt import FixContext
from pallasite.agents.fixer import Budgets, Fixer
from pallasite.agents.llm.providers import ProviderConfig, ProviderError, make_provider
from pallasite.agents.llm.providers_scripted import ScriptedProvider
from pallasite.agents.llm.recording import StoreRecorder
from pallasite.analysis.types import FileReport
from pallasite.engine.checker import CheckOptions, Checker
from pallasite.engine.judge import Judge, Trusted
from pallasite.knowledge.store import ResultsStore

DATA = Path(__file__).parent / "data" / "agents"
BROKEN = DATA / "add_bad_tiling.py"


def proposal(search: str, replace: str, explanation: str = "fix the block") -> str:
    return json.dumps({"explanation": explanation, "edits": [{"search": search, "replace": replace}]})


WRONG = proposal("BLOCK_COLS = 100", "BLOCK_COLS = 120", "120 columns")
RIGHT = proposal("BLOCK_COLS = 100", "BLOCK_COLS = 128", "the lane dim must be a multiple of 128")
DELETES_CALL = proposal(
    """    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // BLOCK_ROWS, pl.cdiv(x.shape[1], BLOCK_COLS)),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)""", "    return x + y", "no kernel, no error")


async def run_fix(responses, tmp_path=None, budgets=Budgets(), line=None, path=BROKEN):
    text = path.read_text()
    checker = Checker(CheckOptions(tiers=(0,)), untrusted=True)
    report = await checker.check(str(path), text, tiers=(0,))
    provider = ScriptedProvider(ProviderConfig(name="scripted"), list(responses))
    job = FixJob(path=str(path), text=text, report=report, chip="v6e", tiers=(0,), line=line, docs_passages=0)
    judge = Judge(None, checker.options, Trusted(str(path), text), checker=checker)
    outcome = await fix_file(job, ProviderConfig(name="scripted"), budgets, judge, workspace=tmp_path,
                             provider=provider)
    await checker.close()
    return outcome, provider, text


async def test_wrong_fix_is_rejected_with_its_error_fed_back_then_the_right_one_is_verified(tmp_path):
    outcome, provider, text = await run_fix([WRONG, RIGHT], tmp_path)
    assert outcome.ok and [a.verdict for a in outcome.attempts] == ["still failing", "verified"]
    assert "PLS001" in outcome.attempts[0].detail and "120" in outcome.attempts[0].detail
    # round 2's prompt carries round 1's proposal and the checker's words about it
    second = provider.requests[1].prompt
    assert "BLOCK_COLS = 120" in second and "rejected (still failing)" in second and "PLS001" in second
    # the minimal edit: exactly the constant's line
    (hunk,) = outcome.hunks
    assert (hunk.start, hunk.end, hunk.lines) == (8, 9, ("BLOCK_COLS = 128\n",))
    assert outcome.fixed_text == text.replace("BLOCK_COLS = 100", "BLOCK_COLS = 128")
    assert outcome.label == "not compiled for the chip: tier 2 was not run (tier 0 passed); not verified: no reference()"
    assert outcome.usage.calls == 2 and outcome.usage.input_tokens > 0


async def test_garbage_gives_no_edit_and_says_what_was_tried(tmp_path):
    outcome, _, _ = await run_fix(["I think the kernel is fine!", "```\nstill nothing\n```", "{}"], tmp_path)
    assert not outcome.ok and outcome.fixed_text is None and outcome.hunks == () and outcome.diff == ""
    assert [a.verdict for a in outcome.attempts] == ["unreadable"] * 3
    assert outcome.message.startswith("no verified fix: round 1: unreadable; round 2: unreadable; round 3: unreadable")


async def test_deleting_the_pallas_call_is_rejected(tmp_path):
    outcome, provider, _ = await run_fix([DELETES_CALL], tmp_path, budgets=Budgets(max_rounds=1))
    assert not outcome.ok and outcome.attempts[0].verdict == "removed pallas_call"
    assert "pallas_call of add_kernel in add" in outcome.attempts[0].detail


async def test_an_edit_that_does_not_apply_is_fed_back(tmp_path):
    missing = proposal("BLOCK_COLUMNS = 100", "BLOCK_COLUMNS = 128")
    outcome, provider, _ = await run_fix([missing, RIGHT], tmp_path)
    assert outcome.ok and outcome.attempts[0].verdict == "not applicable"
    assert "closest line in the file is 'BLOCK_COLS = 100'" in provider.requests[1].prompt


async def test_too_large_an_edit_is_not_minimal(tmp_path):
    text = BROKEN.read_text()
    rewrite = proposal(text, text.replace("BLOCK_COLS = 100", "BLOCK_COLS = 128").replace("    ", "  "))
    outcome, _, _ = await run_fix([rewrite], tmp_path, budgets=Budgets(max_rounds=1, max_changed_lines=5))
    assert not outcome.ok and outcome.attempts[0].verdict == "too large"


async def test_token_budget_stops_the_rounds(tmp_path):
    big = {"text": WRONG, "input_tokens": 5000, "output_tokens": 10}
    outcome, provider, _ = await run_fix([big, RIGHT], tmp_path, budgets=Budgets(max_tokens=4000))
    assert not outcome.ok and len(provider.requests) == 1 and "token budget spent" in outcome.message


async def test_provider_errors_are_attempts_and_auth_stops(tmp_path):
    outcome, provider, _ = await run_fix([{"error": "rate_limit", "message": "quota"}, RIGHT], tmp_path)
    assert outcome.ok and outcome.attempts[0].verdict == "model error"
    outcome, provider, _ = await run_fix([{"error": "auth", "message": "bad key"}, RIGHT], tmp_path)
    assert not outcome.ok and len(provider.requests) == 1 and "bad key" in outcome.message


async def test_line_selects_the_findings_and_nothing_there_is_nothing_to_fix(tmp_path):
    outcome, provider, _ = await run_fix([RIGHT], tmp_path, line=0)
    assert not outcome.ok and outcome.message.startswith("nothing to fix: no error on line 1") and not provider.requests


async def test_calls_are_recorded_and_a_run_replays(tmp_path):
    outcome, _, _ = await run_fix([WRONG, RIGHT], tmp_path)
    with ResultsStore.open(tmp_path) as store:
        calls = store.llm_calls(outcome.run_id)
        (step,) = store.agent_steps(outcome.run_id)
    assert [c.step for c in calls] == [1, 2] and calls[1].response == RIGHT
    assert "BLOCK_COLS = 100" in calls[0].prompt and calls[0].system.startswith("You fix JAX Pallas kernels")
    assert step.kind == "fix" and step.payload["ok"] and step.payload["rounds"] == 2
    replay = make_provider(ProviderConfig(name=f"replay:{outcome.run_id}",
                                          store_path=str(tmp_path / ".pallasite" / "results.sqlite")))
    text = BROKEN.read_text()
    checker = Checker(CheckOptions(tiers=(0,)), untrusted=True)
    report = await checker.check(str(BROKEN), text, tiers=(0,))
    again = await fix_file(FixJob(str(BROKEN), text, report, "v6e", (0,), docs_passages=0), replay.config,
                           Budgets(), Judge(None, checker.options, Trusted(str(BROKEN), text), checker=checker),
                           provider=replay)
    assert again.ok and again.fixed_text == outcome.fixed_text and len(again.attempts) == 2


def test_replay_of_an_unknown_run_is_a_config_error(tmp_path):
    StoreRecorder(tmp_path).close()  # creates the store
    with pytest.raises(ProviderError, match="no calls for this run id"):
        make_provider(ProviderConfig(name="replay:nope", store_path=str(tmp_path / ".pallasite" / "results.sqlite")))


async def test_a_file_with_reference_is_verified_with_tier_3():
    asked = []

    async def verify(text, tiers):
        asked.append(tiers)
        return FileReport(path="k.py")

    text = (Path(__file__).parent / "data" / "tier0" / "pls001_tiling_bad.py").read_text()
    from pallasite.analysis.tier0 import analyze

    findings = tuple(f for f in analyze(text, "k.py").findings if f.severity == "error")
    context = FixContext("k.py", text, findings, "v6e", has_reference=True)
    right = proposal("BLOCK_COLS = 100\n", "BLOCK_COLS = 128\n")  # (its docstring mentions "BLOCK_COLS = 100)")
    outcome = await Fixer(ScriptedProvider(ProviderConfig(name="scripted"), [right]), verify).fix(context, (0, 1, 2))
    assert asked == [(0, 1, 2, 3)] and outcome.ok


async def test_the_judge_s_check_does_not_record_candidates_in_the_store(tmp_path):
    class Cache:
        def __getattr__(self, name):
            raise AssertionError(f"the candidate's check used the results cache ({name})")

    checker = Checker(CheckOptions(tiers=(0,)), cache=Cache(), untrusted=True)
    verify = Judge(None, checker.options, Trusted(str(BROKEN), BROKEN.read_text()), checker=checker).check
    report = await verify(BROKEN.read_text().replace("= 100", "= 128"), (0,))
    assert not [f for f in report.findings if f.severity == "error"]


# --------------------------------------------------------------------------- the edit format


def test_parse_json_fenced_json_and_search_replace_blocks():
    assert parse_proposal(RIGHT).edits == (SearchReplace("BLOCK_COLS = 100", "BLOCK_COLS = 128"),)
    assert parse_proposal("Here:\n```json\n" + RIGHT + "\n```").explanation.startswith("the lane dim")
    text = "Use 128.\n<<<<<<< SEARCH\nBLOCK_COLS = 100\n=======\nBLOCK_COLS = 128\n>>>>>>> REPLACE\n"
    parsed = parse_proposal(text)
    assert parsed.edits == (SearchReplace("BLOCK_COLS = 100", "BLOCK_COLS = 128"),) and parsed.explanation == "Use 128."
    with pytest.raises(EditError, match="holds no edit"):
        parse_proposal("no idea")
    with pytest.raises(EditError, match="edit 1 is not an object"):
        parse_proposal('{"edits": ["x"]}')


def test_apply_edits_exact_loose_ambiguous_and_no_op():
    text = "a = 1\nb = 2   \nc = 3\na = 1\n"
    assert apply_edits(text, [SearchReplace("c = 3", "c = 4")]) == "a = 1\nb = 2   \nc = 4\na = 1\n"
    assert apply_edits(text, [SearchReplace("b = 2\nc = 3", "b = 5\nc = 6")]) == "a = 1\nb = 5\nc = 6\na = 1\n"
    with pytest.raises(EditError, match="occurs 2 times"):
        apply_edits(text, [SearchReplace("a = 1", "a = 2")])
    with pytest.raises(EditError, match="changes nothing"):
        apply_edits(text, [SearchReplace("c = 3", "c = 3")])
    with pytest.raises(EditError, match="empty"):
        apply_edits(text, [SearchReplace("  ", "x")])
    assert [(h.start, h.end) for h in hunks(text, "a = 1\nb = 2   \nc = 9\na = 1\n")] == [(2, 3)]


def test_the_prompt_holds_the_findings_catalog_docs_chip_and_vmem_and_only_the_file_name():
    from pallasite.agents.fix_action import catalog_texts, docs_texts
    from pallasite.agents.prompts.fix_prompt import prompt
    from pallasite.analysis.tier0 import analyze

    text = BROKEN.read_text()
    findings = tuple(f for f in analyze(text, str(BROKEN)).findings if f.severity == "error")
    context = FixContext(str(BROKEN), text, findings, "v5e", vmem_limit_bytes=16 * 2**20,
                         vmem_source="libtpu probe", catalog=catalog_texts(findings), docs=("[guide/x] tiling",))
    asked = prompt(context, ["Round 1: you proposed: X\nIt was rejected (still failing): PLS001"])
    assert "File `add_bad_tiling.py` (target chip: TPU v5e, scoped VMEM limit 16 MiB (libtpu probe))" in asked
    assert str(BROKEN.parent) not in asked  # the file's name, not where it lives
    # the finding sits where the bad value was written (the constant), not at the BlockSpec using it
    assert "line 9 (`BLOCK_COLS = 100`): PLS001 [tier 0, pallasite rules]: Block dim 100" in asked
    assert "PLS001: Block shape breaks the TPU (8, 128) tiling rule" in asked  # the catalog entry
    assert "[guide/x] tiling" in asked and "Earlier proposals were rejected" in asked
    assert all(not d.startswith("[catalog/") for d in docs_texts(findings, 2))  # no repeat of the catalog


def test_a_missing_sdk_says_which_extra_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "openai", None)  # as if the package were not installed
    monkeypatch.delitem(sys.modules, "pallasite.agents.llm.providers_openai", raising=False)
    with pytest.raises(ProviderError, match=r"needs its SDK .*pip install 'google-genai.*'openai") as err:
        make_provider(ProviderConfig(name="openai", base_url="http://127.0.0.1:1/v1"))
    assert err.value.kind == "config"


async def test_each_round_is_measured_against_the_original_errors(tmp_path):
    # the file has two errors of one code; the fix is asked for one line only, so one may remain.
    # A round that fails must not use up what the next round is allowed.
    two = BROKEN.read_text().replace("    spec = pl.BlockSpec((BLOCK_ROWS, BLOCK_COLS), lambda i, j: (i, j))\n",
                                     "    spec = pl.BlockSpec((BLOCK_ROWS, BLOCK_COLS), lambda i, j: (i, j))\n"
                                     "    spec2 = pl.BlockSpec((BLOCK_ROWS, 100), lambda i, j: (i, j))\n")
    two = two.replace("out_specs=spec,", "out_specs=spec2,")
    path = tmp_path / "two.py"
    path.write_text(two)
    fix_first = proposal("BLOCK_COLS = 100\n", "BLOCK_COLS = 128\n")
    outcome, _, _ = await run_fix(["garbage {", WRONG, fix_first], None, line=8, path=path)  # BLOCK_COLS
    assert [a.verdict for a in outcome.attempts] == ["unreadable", "still failing", "verified"], outcome.attempts


def test_the_judge_refuses_a_checker_for_the_users_own_code():
    """A proposal is model-written code: verifying it on the user's (unconfined) checker is refused."""
    import asyncio

    checker = Checker(CheckOptions(tiers=(0,)))
    judge = Judge(None, checker.options, Trusted(str(BROKEN), BROKEN.read_text()), checker=checker)
    with pytest.raises(ValueError, match="untrusted checker"):
        asyncio.run(judge.check(BROKEN.read_text(), (0,)))


async def test_a_proposal_whose_check_could_not_finish_is_not_verified():
    """A proposal with a top-level loop: the check stops that statement at its share of the import
    time (PLS903, a warning) and checks the rest, which passes; that is not a verified fix."""
    from pallasite.analysis.types import Finding, Span

    stopped = Finding(code="PLS903", severity="warning", tier=1, span=Span(9, 0, 9, 11),
                      message="importing the file: the top-level statement at line 10 was still running after "
                              "10.8 s, its share of the import's time, and was stopped")

    async def verify(text, tiers):
        return FileReport(path="k.py", findings=(stopped,) if "while True" in text else ())

    text = (Path(__file__).parent / "data" / "tier0" / "pls001_tiling_bad.py").read_text()
    from pallasite.analysis.tier0 import analyze

    findings = tuple(f for f in analyze(text, "k.py").findings if f.severity == "error")
    context = FixContext("k.py", text, findings, "v6e")
    looping = proposal("BLOCK_COLS = 100\n", "BLOCK_COLS = 128\nwhile True:\n    pass\n")
    right = proposal("BLOCK_COLS = 100\n", "BLOCK_COLS = 128\n")
    outcome = await Fixer(ScriptedProvider(ProviderConfig(name="scripted"), [looping, right]), verify).fix(context, (0, 1))
    assert [a.verdict for a in outcome.attempts] == ["still failing", "verified"] and outcome.ok
    assert "could not be fully checked: PLS903 at line 10" in outcome.attempts[0].detail
    assert "while True" not in outcome.fixed_text
