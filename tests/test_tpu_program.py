"""The judge's interpreter of the TPU program (runner/tpu_program): real Pallas kernels exported for the
TPU on this CPU machine, their ``tpu_custom_call`` run by ``run_call``, compared with a plain-jax
reference (exact for integers, within float tolerance otherwise) or with jax's own TPU interpret mode;
planted bugs must give the fault (or NaN in the output), an op the interpreter does not cover
Unsupported naming it.

Fixture kernels: tests/data/tpu_program/ (``CASES``: name -> (entry, inputs, reference)). The entries
call their ``pallas_call`` on their own inputs, so the custom call's operands are the inputs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

import jax  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import tpu_program_check as harness  # noqa: E402

from pallasite.runner import tpu_program  # noqa: E402
from pallasite.runner.tpu_program import KernelFault, Unsupported, run_call  # noqa: E402

DATA = Path(__file__).parent / "data" / "tpu_program"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"tpu_program_{name}", DATA / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODULES = {name: _module(name) for name in ("elementwise", "vector_ops", "control", "memory", "bad")}
ALL_CASES = [(m, c) for m, module in MODULES.items() for c in module.CASES if not c.startswith("bad")]


def run_case(module_name: str, case: str):
    """(our outputs, the reference's, the inputs) of one fixture case."""
    module = MODULES[module_name]
    entry, inputs, reference = module.CASES[case]
    fn = getattr(module, entry)
    args = list(getattr(module, inputs)())
    (spec,) = harness.exported_calls(fn, args)
    ours = run_call(spec.config, spec.name, [np.asarray(a) for a in args], spec.results, spec.aliases)
    if reference is None:
        want = None
    elif getattr(reference, "__name__", "").endswith("_numpy"):
        want = reference(*args)
    else:
        want = jax.jit(reference)(*args)
    if want is not None:
        want = [np.asarray(w) for w in (want if isinstance(want, (list, tuple)) else [want])]
    return ours, want, args


def assert_agree(ours, want):
    assert len(ours) == len(want)
    for i, (a, b) in enumerate(zip(ours, want)):
        assert a.shape == b.shape and a.dtype == b.dtype, (i, a.shape, a.dtype, b.shape, b.dtype)
        if b.dtype.kind in "iub":
            np.testing.assert_array_equal(a, b, err_msg=f"output {i}")
        else:
            tol = 1e-2 if b.dtype.itemsize < 4 else 2e-5
            np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol,
                                       err_msg=f"output {i}")


@pytest.mark.parametrize("module_name, case", ALL_CASES, ids=[f"{m}: {c}" for m, c in ALL_CASES])
def test_a_fixture_kernel_agrees_with_its_reference(module_name, case):
    ours, want, _ = run_case(module_name, case)
    assert_agree(ours, want)


# --------------------------------------------------------------------------- planted bugs


def _bug_line(entry: str) -> int:
    """The line of the ``# BUG`` comment in ``entry`` of tests/data/tpu_program/bad.py."""
    lines = (DATA / "bad.py").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {entry}("))
    return next(i for i in range(start, len(lines)) if "# BUG" in lines[i]) + 1


FAULTS = {  # case -> (words the fault must say, the op it names)
    "bad: read before wait": ("while a DMA into it is in flight", "vector.load"),
    "bad: wrong semaphore": ("no DMA in flight signals", "tpu.wait_dma2"),
    "bad: DMA out of bounds": ("out-of-bounds access: elements 12..19 of axis 0", "tpu.memref_slice"),
    "bad: index out of bounds": ("out-of-bounds access: elements 12..19 of axis 0", "vector.load"),
    "bad: source written in flight": ("while a DMA out of it is in flight", "tpu.vector_store"),
    "bad: DMA never waited": ("is never waited by the kernel's end", "tpu.enqueue_dma"),
    "bad: semaphore hang": ("a TPU would hang here", "tpu.sem_wait"),
    "bad: runaway loop": ("a loop of 1,073,741,824 trips", "scf.for"),
}


@pytest.mark.parametrize("case", list(FAULTS))
def test_a_planted_bug_is_a_fault_at_its_line(case):
    words, op_name = FAULTS[case]
    entry = MODULES["bad"].CASES[case][0]
    with pytest.raises(KernelFault) as caught:
        run_case("bad", case)
    message = caught.value.message
    assert words in message and f"{op_name} at " in message, message
    assert f"bad.py:{_bug_line(entry)}, kernel 'kernel'" in message, message


def test_an_endless_loop_stops_at_the_step_budget(monkeypatch):
    monkeypatch.setattr(tpu_program.mosaic_plan, "LIMITS", tpu_program.mosaic_plan.Limits(max_ops=50_000))
    monkeypatch.setattr(tpu_program.mosaic_grid, "LIMITS", tpu_program.mosaic_plan.LIMITS)
    with pytest.raises(KernelFault, match="ran past the interpreter's budget of 50,000 executed ops"):
        run_case("bad", "bad: endless while")


def test_a_scratch_larger_than_any_vmem_is_refused_before_it_is_allocated():
    with pytest.raises(KernelFault, match=r"scratch operand 0 \(memref<32768x32768xf32.*larger than any TPU's VMEM"):
        run_case("bad", "bad: huge scratch")


def test_a_split_across_cores_is_unsupported_naming_it():
    with pytest.raises(Unsupported, match="dimension semantics core_parallel"):
        run_case("bad", "bad: core_parallel")


# Mosaic written by hand (serialized as jax serializes it), for what jax's lowering does not emit on this chip
SIMPLE = """module attributes {stable_mosaic.version = 11 : i64} {
  func.func @k(%arg0: memref<8x128xi32, #tpu.memory_space<vmem>>, %arg1: memref<8x128xi32, #tpu.memory_space<vmem>>)
      attributes {dimension_semantics = [], scalar_prefetch = 0 : i64, scratch_operands = 0 : i64,
                  tpu.core_type = #tpu.core_type<CORE>} {
    %c0 = arith.constant 0 : index
    %0 = vector.load %arg0[%c0, %c0] : memref<8x128xi32, #tpu.memory_space<vmem>>, vector<8x128xi32>
    %1 = func.call @twice(%0) : (vector<8x128xi32>) -> vector<8x128xi32>
    tpu.vector_store %arg1[%c0, %c0], %1 {strides = array<i32>} : memref<8x128xi32, #tpu.memory_space<vmem>>, vector<8x128xi32>,
    return
  }
  func.func @twice(%x: vector<8x128xi32>) -> vector<8x128xi32> {
    %z = arith.constant dense<0> : vector<8x128xi32>
    %s = arith.constant dense<40> : vector<8x128xi32>
    %q = arith.divsi %x, %z : vector<8x128xi32>
    %r = arith.remsi %x, %z : vector<8x128xi32>
    %h = arith.shrsi %x, %s : vector<8x128xi32>
    %a = arith.addi %q, %r : vector<8x128xi32>
    %b = arith.addi %a, %h : vector<8x128xi32>
    return %b : vector<8x128xi32>
  }
}"""


def _config_of(text: str) -> str:
    """A tpu_custom_call backend config holding ``text`` serialized as jax's lowering serializes it."""
    import base64
    import io
    import json

    from jaxlib.mlir import ir
    from jaxlib.mlir.passmanager import PassManager

    from pallasite.runner.program import mosaic_ir

    with mosaic_ir.mosaic_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        PassManager.parse("builtin.module(mosaic-serde{serialize=true})").run(module.operation)
        out = io.BytesIO()
        module.operation.write_bytecode(out)
    return json.dumps({"custom_call_config": {"body": base64.b64encode(out.getvalue()).decode()}})


def test_a_called_function_with_xla_division_and_shift_rules():
    x = np.arange(-512, 512, dtype=np.int32).reshape(8, 128)
    (out,) = run_call(_config_of(SIMPLE.replace("CORE", "tc")), "k", [x], [((8, 128), np.dtype(np.int32))], {})
    # x / 0 = -1 and x % 0 = x (XLA's definitions), x >> 40 = the sign (an arithmetic shift past the width)
    np.testing.assert_array_equal(out, -1 + x + np.where(x < 0, -1, 0))


def test_a_sparsecore_kernel_is_unsupported_naming_it():
    with pytest.raises(Unsupported, match="a SparseCore kernel"):
        run_call(_config_of(SIMPLE.replace("CORE", "sc_vector_subcore")), "k", [np.zeros((8, 128), np.int32)],
                 [((8, 128), np.dtype(np.int32))], {})


def test_the_seam_raises_only_its_two_kinds(monkeypatch):
    """An error inside the interpreter (here a numpy ValueError from a handler) is Unsupported, never a
    crash of the judge nor a pass; the wrong number of operands is a KernelFault that says so."""
    from pallasite.runner.tpu_program import mosaic_vector

    module = MODULES["vector_ops"]
    args = list(module.shape_inputs())
    (spec,) = harness.exported_calls(module.shapes, args)
    with pytest.raises(KernelFault, match="takes 7 operands; the call passes 1 inputs and 5 outputs"):
        run_call(spec.config, spec.name, args[:1], spec.results, spec.aliases)

    def broken(x, axis):
        raise ValueError("all the input array dimensions except for the concatenation axis must match")

    monkeypatch.setattr(mosaic_vector.np, "concatenate", broken)
    with pytest.raises(Unsupported, match="ValueError: all the input array dimensions"):
        run_call(spec.config, spec.name, args, spec.results, spec.aliases)


def test_an_output_block_never_written_stays_nan():
    (out,), _, (x,) = run_case("bad", "bad: unwritten output")
    np.testing.assert_array_equal(out[:8], x[:8])
    assert np.isnan(out[8:]).all()


def test_an_op_outside_the_table_is_unsupported_naming_it_and_its_line():
    with pytest.raises(Unsupported) as caught:
        run_case("bad", "bad: hardware PRNG")
    assert caught.value.op_name == "tpu.prng_set_seed_32"
    line = next(i for i, text in enumerate((DATA / "bad.py").read_text().splitlines(), 1) if "prng_seed(7)" in text)
    assert caught.value.where == f"{DATA / 'bad.py'}:{line}, kernel 'kernel'"
    assert str(caught.value).startswith("the TPU program uses tpu.prng_set_seed_32 (")


def test_a_kernel_is_decoded_and_compiled_once_and_so_is_its_unsupported_op():
    from pallasite.runner.tpu_program import mosaic_grid

    module = MODULES["bad"]
    (spec,) = harness.exported_calls(module.hardware_prng, list(module._inputs()))
    with pytest.raises(Unsupported):
        mosaic_grid.program(spec.config, spec.name)
    cached = mosaic_grid._programs[(spec.name, spec.config)]
    with pytest.raises(Unsupported) as again:
        mosaic_grid.program(spec.config, spec.name)
    assert again.value is cached.error
    module = MODULES["elementwise"]
    (spec,) = harness.exported_calls(module.bf16_math, list(module.bf16_inputs()))
    assert mosaic_grid.program(spec.config, spec.name) is mosaic_grid.program(spec.config, spec.name)


# --------------------------------------------------------------------------- against jax's TPU interpret mode


def test_manual_dmas_agree_with_jax_tpu_interpret_mode():
    module = MODULES["memory"]
    (row,) = harness.check(module.chunk_sums, list(module.chunk_inputs()))
    assert row.outcome == "ok" and row.against == "TPU interpret mode", (row.outcome, row.against)
    assert row.max_diff < 1e-5


def _jax_kernel(label):
    bench = pytest.importorskip("bench_tpu_program_coverage")
    return dict(bench.jax_kernels())[label]()


def test_jax_flash_attention_agrees_with_jax_tpu_interpret_mode():
    fn, args = _jax_kernel("jax flash_attention (causal)")
    rows = harness.check(fn, args)
    assert [r.outcome for r in rows] == ["ok"], [r.outcome for r in rows]
    assert rows[0].against == "TPU interpret mode"


@pytest.mark.slow
@pytest.mark.parametrize("label", ["jax splash_attention (causal)", "jax paged_attention", "jax megablox gmm",
                                   "jax ragged_paged_attention"])
def test_a_jax_kernel_agrees_with_jax_interpret_mode(label):
    fn, args = _jax_kernel(label)
    rows = harness.check(fn, args)
    assert rows and all(r.outcome == "ok" for r in rows), [(r.name, r.outcome, r.against) for r in rows]
