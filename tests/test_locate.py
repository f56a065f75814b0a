"""Locating compiler errors in the user's file (engine/findings/locate.py, engine/findings/classify.py and
engine/findings/reply_failures.py), without jax or libtpu.

The records replayed here are the worker's real raw records for the corpus of
tests/data/compiler (recorded by tests/data/compiler/record_errors.py from jax 0.10.2 + libtpu),
so the message patterns and spans are tested on the compiler's actual words.
"""

from __future__ import annotations

import json
import os

import pytest

from pallasite.analysis import tier0
from pallasite.analysis.codes import CODES
from pallasite.engine.findings import locate, reply_failures
from pallasite.wire.messages import Progress, Stage, check_result_from_plain

CORPUS = os.path.join(os.path.dirname(__file__), "data", "compiler")
EXPECTED = json.load(open(os.path.join(CORPUS, "expected.json")))
RECORDS = json.load(open(os.path.join(CORPUS, "records.json")))["cases"]


def _source(name: str) -> tuple[str, object]:
    with open(os.path.join(CORPUS, f"{name}_broken.py"), encoding="utf-8") as f:
        text = f.read()
    return text, tier0.analyze(text, f"{name}_broken.py", target=EXPECTED["target"])


@pytest.mark.parametrize("name", sorted(EXPECTED["cases"]))
def test_recorded_error_is_located_at_the_expected_line(name):
    case = EXPECTED["cases"][name]
    text, analysis = _source(name)
    located = locate.locate_result(check_result_from_plain(RECORDS[name]), text, analysis, EXPECTED["target"])
    errors = [f for f in located.findings if f.severity in ("error", "warning")]
    assert [(f.code, f.span.line + 1) for f in errors] == [(case["code"], case["line"])]
    assert errors[0].severity == ("warning" if case["code"].startswith("PLS9") else "error")  # could not check
    finding = errors[0]
    assert finding.tier == case["tier"]
    assert finding.chip == EXPECTED["target"]
    assert CODES[case["code"]].hint not in finding.message  # presentation adds the registry hint, once
    assert "/home/user/corpus" not in finding.message  # folders are cut from paths in the sentence


def test_tiling_error_names_args_index_and_lands_on_that_blockspec():
    text, analysis = _source("tiling_lanes")
    rec = next(r for e in RECORDS["tiling_lanes"]["entries"] for r in e["errors"])
    assert {"kind": "args", "index": 0} in rec["refs"]
    finding = locate.locate_record(rec, text, analysis, "v5e", tier=1, entry="scale")
    spec = analysis.sites[0].in_specs[0]
    assert finding.span == spec.span  # the BlockSpec(...) call, not the whole line
    assert "block shape (8, 100), array shape (32, 256)" in finding.message  # in user terms
    assert "Blocked(" not in finding.message and "lambda" not in finding.message
    assert finding.origin == locate.ORIGIN_LOWERING
    # the kernel def and the pallas_call come along as related locations
    messages = [r.message for r in finding.related]
    assert any("scale_kernel" in m for m in messages)
    assert any("pallas_call" in m for m in messages)


def test_same_record_pointed_at_another_args_index_moves_to_that_spec():
    text, analysis = _source("tiling_lanes")
    rec = dict(next(r for e in RECORDS["tiling_lanes"]["entries"] for r in e["errors"]))
    rec["refs"] = [{"kind": "outs", "index": 0}]
    finding = locate.locate_record(rec, text, analysis, "v5e", tier=1, entry="scale")
    assert finding.span == analysis.sites[0].out_specs[0].span


def test_vmem_oom_lands_on_pallas_call_with_bytes_in_the_message():
    text, analysis = _source("vmem_oom_blocks")
    rec = next(r for e in RECORDS["vmem_oom_blocks"]["entries"] for r in e["errors"])
    assert rec["frames"] == []  # the compiler gives no user line
    finding = locate.locate_record(rec, text, analysis, "v5e", tier=2, entry="big_copy")
    assert finding.code == "PLS201"
    assert finding.span == analysis.sites[0].call_span
    assert "256.0 MiB requested, limit 128.0 MiB" in finding.message
    assert finding.origin == locate.ORIGIN_COMPILER


def test_mlir_dump_goes_to_detail_not_message():
    text, analysis = _source("reshape_relayout")
    rec = next(r for e in RECORDS["reshape_relayout"]["entries"] for r in e["errors"])
    finding = locate.locate_record(rec, text, analysis, "v5e", tier=2, entry="regroup")
    assert finding.message.startswith("infer-vector-layout: unsupported shape cast")
    assert "tpu.reshape" not in finding.message
    assert "tpu.reshape" in (finding.detail or "")


def test_store_mismatch_prefers_the_line_inside_the_kernel():
    text, analysis = _source("store_shape")
    rec = next(r for e in RECORDS["store_shape"]["entries"] for r in e["errors"])
    lines = [f["line"] for f in rec["frames"]]
    assert len(lines) >= 2  # the pallas_call line and the store line are both user frames
    finding = locate.locate_record(rec, text, analysis, "v5e", tier=1, entry="left_half")
    assert text.splitlines()[finding.span.line].strip().startswith("o_ref[...] = x[:, :64]")
    # the span covers the statement (CPython's columns), not the trailing comment
    assert "#" not in text.splitlines()[finding.span.line][finding.span.column:finding.span.end_column]


def test_dimension_semantics_lands_on_the_keyword_not_the_call():
    text, analysis = _source("dimension_semantics_length")
    rec = next(r for e in RECORDS["dimension_semantics_length"]["entries"] for r in e["errors"])
    assert {f["line"] for f in rec["frames"]} == {analysis.sites[0].span.line + 1}  # only the call line
    finding = locate.locate_record(rec, text, analysis, "v5e", tier=1, entry="exp")
    assert "dimension_semantics" in text.splitlines()[finding.span.line]


@pytest.mark.parametrize(
    ("message", "tier", "code"),
    [
        ("Used 256.00M of 16.00M vmem. Exceeded vmem capacity", 2, "PLS201"),
        ("E2002: CompileTimeMosaicMisalignedBlockAndTiling: Operand of shape", 2, "PLS204"),
        ("E2003: cannot statically prove that index in dimension 1 is a multiple of 128", 2, "PLS203"),
        ("Unimplemented primitive in Pallas TPU lowering for tc: sort.", 1, "PLS103"),
        ("Can only load scalars from SMEM", 1, "PLS108"),
        ("64-bit types are not supported", 1, "PLS107"),
        ("something nobody has seen", 1, "PLS100"),
    ],
)
def test_classify_by_message(message, tier, code):
    assert locate.classify({"stage": f"tier {tier}", "type": "ValueError", "sentence": message, "message": message}, tier) == code


def test_classify_unknown_compiler_error_is_the_tier2_generic_code():
    rec = {"stage": "tier 2", "type": "MosaicError", "sentence": "verification failed", "message": "verification failed"}
    assert locate.classify(rec, 2) == "PLS200"


def test_arity_typeerror_from_a_kernel_is_a_signature_error_not_an_index_map_one():
    rec = {"stage": "tier 1", "type": "TypeError", "message": "clamp_kernel() missing 1 required positional argument: 'o_ref'"}
    assert locate.classify(rec, 1) == "PLS110"
    rec = {"stage": "tier 1", "type": "TypeError", "message": "f.<locals>.<lambda>() takes 1 positional argument but 2 were given"}
    assert locate.classify(rec, 1) == "PLS102"


# --------------------------------------------------------------------------- failed requests


def test_timeout_during_tier2_is_pls205_at_the_pallas_call():
    text, analysis = _source("vmem_oom_blocks")
    stage = reply_failures.stage_of(Progress(stage=Stage.TIER, message="tier 2: big_copy", tier=2, entry="big_copy"))
    finding = reply_failures.reply_failure("timed_out", "no result after 60 s", text, analysis, stage, "v5e")
    assert finding.code == "PLS205" and finding.tier == 2
    assert finding.span == analysis.sites[0].call_span
    assert "big_copy" in finding.message and "60 s" in finding.message


def test_timeout_while_importing_is_pls903_and_crash_is_pls902():
    text, analysis = _source("import_error")
    stage = reply_failures.stage_of(Progress(stage=Stage.IMPORT, message="importing import_error_broken.py"))
    hang = reply_failures.reply_failure("timed_out", "no result after 5 s", text, analysis, stage, "v5e")
    assert hang.code == "PLS903" and "while importing" in hang.message
    crash = reply_failures.reply_failure("crashed", "the worker was killed by SIGKILL (9)", text, analysis, {}, "v5e")
    assert crash.code == "PLS902" and "SIGKILL" in crash.message
    assert reply_failures.reply_failure("cancelled", "", text, analysis, {}, "v5e") is None


def test_unavailable_tier2_is_one_note_not_a_finding():
    text, analysis = _source("tiling_lanes")
    result = {"tiers": [1, 2], "unavailable": {"2": "libtpu is not installed; pip install 'pallasite[tpu]'"},
              "errors": [], "entries": [{"name": "scale", "tiers": {"1": "ok", "2": "skipped: libtpu is not installed"},
                                         "errors": []}]}
    located = locate.locate_result(check_result_from_plain(result), text, analysis, "v6e")
    assert located.notes == ("tier 2 skipped: libtpu is not installed; pip install 'pallasite[tpu]' (PLS906)",)
    assert located.findings == ()
    assert located.verdicts[0].tiers == {1: "ok", 2: "skipped: libtpu is not installed"}


def test_tiling_error_is_placed_at_the_tunable_default_that_sets_the_block_size():
    text, analysis = _source("tiling_rows_tunable")
    rec = next(r for e in RECORDS["tiling_rows_tunable"]["entries"] for r in e["errors"])
    finding = locate.locate_record(rec, text, analysis, "v5e", tier=1, entry="add")
    # issue 14: at the keyword default where the bad value was written, the BlockSpec related
    assert "block_rows: int = 4" in text.splitlines()[finding.span.line]
    assert "a keyword default: block_rows=4" in finding.message
    [spec] = [r for r in finding.related if r.message == "the BlockSpec that uses this value"]
    assert text.splitlines()[spec.span.line].strip().startswith("spec = pl.BlockSpec((block_rows, 512)")


def test_tiling_error_is_placed_at_the_module_constant_that_sets_the_block_size():
    text, _ = _source("tiling_lanes")
    text = text.replace("in_specs=[pl.BlockSpec((8, 100)", "in_specs=[pl.BlockSpec((8, LANES)")
    text = text.replace("\n\ndef scale_kernel", "\nLANES = 100  # lanes per block\n\n\ndef scale_kernel")
    analysis = tier0.analyze(text, "tiling_lanes_broken.py", target="v5e")
    rec = next(r for e in RECORDS["tiling_lanes"]["entries"] for r in e["errors"])
    finding = locate.locate_record(rec, text, analysis, "v5e", tier=1, entry="scale")
    # issue 14: at the module constant where the bad value was written, the BlockSpec related
    assert text.splitlines()[finding.span.line].startswith("LANES = 100")
    assert "a module constant: LANES = 100" in finding.message
    [spec] = [r for r in finding.related if r.message == "the BlockSpec that uses this value"]
    assert "pl.BlockSpec((8, LANES)" in text.splitlines()[spec.span.line]


def test_vmem_oom_naming_an_operand_relates_its_blockspec():
    text, analysis = _source("vmem_oom_blocks")
    rec = dict(next(r for e in RECORDS["vmem_oom_blocks"]["entries"] for r in e["errors"]))
    rec["refs"] = [{"kind": "args", "index": 0}]  # as v4/v5p word it: "window allocation for operator input 0"
    finding = locate.locate_record(rec, text, analysis, "v4", tier=2, entry="big_copy")
    assert finding.span == analysis.sites[0].call_span
    assert finding.related[0].span == analysis.sites[0].in_specs[0].span
    assert "does not fit in VMEM" in finding.related[0].message


def test_a_line_said_near_the_time_limit_places_the_timeout_there():
    text, analysis = _source("import_error")
    stage = reply_failures.stage_of(Progress(stage=Stage.IMPORT, message="at line 14 of import_error_broken.py",
                                             line=14))
    assert stage == {"stage": "import", "line": 14}
    finding = reply_failures.reply_failure("timed_out", "no result after 5 s", text, analysis, stage, "v5e")
    assert (finding.code, finding.span.line + 1) == ("PLS903", 14)
    assert "while importing the file, at line 14" in finding.message
    assert finding.related == ()  # a hang at import is not about any pallas_call


# --------------------------------------------------------------------------- exceptions with no text


def _assert_record(raised_at):
    """jax's TPU lowering asserting on GPU compiler params: an AssertionError with no text (as recorded)."""
    return {"stage": "tier 1", "type": "AssertionError", "sentence": "AssertionError",
            "message": "AssertionError\n\nThe preceding stack trace is the source of the JAX operation that, once "
                       "transformed by JAX, triggered the following exception.\n\n--------------------",
            "detail": None, "frames": [{"file": "k.py", "line": 14, "function": "scale", "column": None,
                                        "end_line": 14, "end_column": None}],
            "mentions": [], "refs": [], "vmem": None, "mosaic_codes": [], "syntax": None, "raised_at": raised_at}


def test_an_exception_with_no_text_says_so_and_where_it_was_raised():
    text, analysis = _source("tiling_lanes")
    where = {"file": "jax/_src/pallas/mosaic/pallas_call_registration.py", "line": 393,
             "function": "pallas_call_tpu_lowering_rule",
             "code": "assert isinstance(compiler_params, tpu_core.CompilerParams)"}
    finding = locate.locate_record(_assert_record(where), text, analysis, "v5e", tier=1, entry="scale")
    assert finding.message == ("AssertionError with an empty message, raised at jax/_src/pallas/mosaic/"
                               "pallas_call_registration.py:393 in pallas_call_tpu_lowering_rule: "
                               "`assert isinstance(compiler_params, tpu_core.CompilerParams)`")
    assert "pallas_call_registration.py:393" in finding.detail
    bare = locate.locate_record(_assert_record(None), text, analysis, "v5e", tier=1, entry="scale")
    assert bare.message.startswith("AssertionError() with an empty message")


def test_the_worker_records_where_a_textless_exception_was_raised():
    from pallasite.runner import errors

    def lowering_rule(params):
        assert isinstance(params, int)

    try:
        lowering_rule("gpu params")
    except AssertionError as exc:
        rec = errors.record(exc, __file__, stage="tier 1")
    assert rec["raised_at"]["function"] == "lowering_rule"
    assert rec["raised_at"]["code"] == "assert isinstance(params, int)"
    assert rec["raised_at"]["file"] == "test_locate.py"


# --------------------------------------------------------------------------- a crash while importing

_DUMP = """Thread 0x00007f27f8a4f6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/work/main/runner/worker.py", line 360 in _memory_watchdog

Current thread 0x00007f281fe4bb80 (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/home/user/proj/import_error_broken.py", line 7 in <module>
  File "/work/main/runner/loader.py", line 100 in load_user_module
"""


def test_a_crash_while_importing_lands_on_the_line_the_fatal_signal_traceback_names():
    text, analysis = _source("import_error")
    assert reply_failures.crash_line(_DUMP, "import_error_broken.py") == 7
    finding = reply_failures.reply_failure("crashed", "the worker was killed by SIGSEGV (11)", text, analysis,
                                   {"stage": "import"}, "v5e", stderr=_DUMP, path="import_error_broken.py")
    assert (finding.code, finding.span.line + 1, finding.related) == ("PLS902", 7, ())
    assert "while importing the file, at line 7" in finding.message and "Current thread" in finding.detail
    silent = reply_failures.reply_failure("crashed", "the worker was killed by SIGKILL (9)", text, analysis,
                                  {"stage": "import"}, "v5e", stderr="", path="import_error_broken.py")
    assert (silent.span.line, silent.kernel, silent.detail) == (0, None, None)


def test_a_frame_of_the_function_around_the_pallas_call_is_not_taken_for_a_helper():
    text, analysis = _source("store_shape")
    site = analysis.sites[0]
    kernel_line = site.kernel_def_span.line + 2  # a line in the kernel body (1-based: +1)
    caller = site.enclosing_function
    rec = {"stage": "tier 1", "type": "ValueError", "sentence": "Invalid shape for `swap`.", "message": "Invalid shape for `swap`.",
           "frames": [{"file": "k.py", "line": site.span.line + 1, "function": caller},
                      {"file": "k.py", "line": kernel_line, "function": site.kernel_name},
                      # an outer exception's traceback: the entry again, at another of its lines
                      {"file": "k.py", "line": site.span.line + 1 + 50, "function": caller}],
           "mentions": [], "refs": []}
    finding = locate.locate_record(rec, text, analysis, "v5e", tier=1, entry=caller)
    assert finding.span.line == kernel_line - 1
    assert not any(r.message.startswith("called from the kernel") for r in finding.related)
