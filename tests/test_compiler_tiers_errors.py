"""Raw error records (runner/errors.py): plain exception walking and message parsing, no jax."""

from __future__ import annotations

import os

from pallasite.runner import errors

HERE = os.path.abspath(__file__)


def _user_code_that_fails():
    raise ValueError("Invalid shape for `swap`. Ref shape: (8, 128). Value shape: (8, 64).")


def _wrapper():
    try:
        _user_code_that_fails()
    except ValueError as exc:
        raise RuntimeError("lowering failed") from exc


def test_frames_in_the_user_file_cover_the_whole_cause_chain():
    try:
        _wrapper()
    except RuntimeError as exc:
        rec = errors.record(exc, HERE, stage="tier 1")
    functions = [f["function"] for f in rec["frames"]]
    assert "_user_code_that_fails" in functions and "_wrapper" in functions
    inner = rec["frames"][functions.index("_user_code_that_fails")]
    with open(HERE, encoding="utf-8") as f:
        assert "raise ValueError" in f.read().splitlines()[inner["line"] - 1]
    assert inner["column"] is not None and inner["end_column"] > inner["column"]
    assert rec["type"] == "RuntimeError" and "Invalid shape for `swap`" in rec["message"]


def test_frames_outside_the_user_file_are_left_out():
    try:
        _wrapper()
    except RuntimeError as exc:
        rec = errors.record(exc, "/somewhere/else/kernel.py")
    assert rec["frames"] == []


def test_mentions_read_plain_and_mlir_locations_of_the_user_file_only():
    text = ('Index map function <lambda> at /src/k.py:20 for args[1] must return integer scalars.\n'
            'at location: loc("reshape"(callsite("kern"("/src/k.py":13:8 to :25) at "x"("/other/lib.py":4:1))))')
    assert errors.mentions(text, "/src/k.py") == [{"line": 20, "column": None}, {"line": 13, "column": 8}]
    assert errors.refs(text) == [{"kind": "args", "index": 1, "with_prefetch": True}]  # args[i] counts prefetched operands
    assert errors.refs("Failed to set window params for output 2: E2002") == [{"kind": "outs", "index": 2}]
    assert errors.mosaic_codes("E2002: CompileTimeMosaicMisalignedBlockAndTiling; also E1001") == ["E2002", "E1001"]


def test_vmem_figures_from_the_compilers_out_of_memory_messages():
    assert errors.vmem_figures("Ran out of memory in memory space vmem. Used 256.00M of 128.00M vmem.") == {
        "requested": 256 * 2**20, "limit": 128 * 2**20}
    assert errors.vmem_figures(
        "RESOURCE_EXHAUSTED: Allocation (size=268435456) would exceed memory (size=134217728) :: space=vmem") == {
        "requested": 268435456, "limit": 134217728}
    assert errors.vmem_figures("Invalid shape for `swap`") is None


def test_mlir_dumps_are_split_from_the_message_and_the_sentence_is_clean():
    text = ("INTERNAL: Mosaic failed to compile TPU kernel: infer-vector-layout: unsupported shape cast\n"
            "\n"
            "The MLIR operation involved:\n"
            '  %5 = "tpu.reshape"(%4) : (vector<8x128xf32>) -> vector<32x32xf32>\n'
            "\n"
            "Please report a bug at: https://github.com/jax-ml/jax/issues/new/choose\n")
    message, dump = errors.split_dumps(text)
    assert "tpu.reshape" in dump and "tpu.reshape" not in message
    assert errors.sentence(text) == "infer-vector-layout: unsupported shape cast"
    joined = errors.sentence("INVALID_ARGUMENT: Failed to set window params for input 0: E2002: Name:\n"
                             "Operand of shape (..., 64, 256) has tiling (32, 128)\n")
    assert joined == "Failed to set window params for input 0: E2002: Name: Operand of shape (..., 64, 256) has tiling (32, 128)"


def test_syntax_errors_keep_their_position():
    try:
        compile("def f(:\n    pass\n", HERE, "exec")
    except SyntaxError as exc:
        rec = errors.record(exc, HERE, stage="import")
    assert rec["syntax"]["line"] == 1 and rec["syntax"]["column"] >= 1


def test_vmem_window_allocation_names_the_operand():
    text = ("RESOURCE_EXHAUSTED: Allocation (size=134217728) would exceed memory (size=16777216) :: #allocation2 "
            "[space=vmem, scoped, tag = 'input window allocation for operator input 0. The window shape is "
            "f32[16384,1024]'")
    assert errors.refs(text) == [{"kind": "args", "index": 0, "with_prefetch": True}]  # the custom call's operands
    assert errors.refs("Failed to set window params for input 1: E2002") == [{"kind": "args", "index": 1}]
    assert errors.vmem_figures(text) == {"requested": 134217728, "limit": 16777216}
