"""The executor of TPU programs (runner/tpu_program/hlo_exec.py): a module's TPU program run on the CPU,
its XLA ops by the op table, its Mosaic kernels handed to ``run_call``.

Modules are exported by runner/program/program_export.export_program for ``platforms=("tpu",)`` (and for
("tpu", "cpu") where the test is about the branches) from plain jax functions and from the Pallas kernels
in tests/data/tpu_program/kernels.py; results are compared with the same function run by jax on the CPU
(exact for integers and booleans, a tolerance for floats). The stand-in for the Mosaic interpreter runs the
fixture's own pallas_call in jax's interpret mode on the operands it is handed, and records them.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from pallasite.runner.program.program_export import export_program
from pallasite.runner.tpu_program import hlo_exec
from pallasite.runner.tpu_program.hlo_exec import (KernelResultError, ShapeAssertion, Unsupported, op_table,
                                                   tpu_program)

HERE = Path(__file__).parent / "data" / "tpu_program"
KIND = "TPU v6 lite"


def _fixture():
    spec = importlib.util.spec_from_file_location("tpu_program_kernels", HERE / "kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


K = _fixture()


def _inputs(signature, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for dims, dtype in signature:
        dt = np.dtype(jnp.dtype(dtype))
        if dt == np.bool_:
            out.append(rng.random(dims) > 0.5)
        elif dt.kind in "iu":
            out.append(rng.integers(-50 if dt.kind == "i" else 0, 50, dims).astype(dt))
        else:
            out.append(rng.standard_normal(dims).astype(dt))
    return out


def _same(got, want, rtol=2e-5, atol=2e-5):
    want = [np.asarray(w) for w in jax.tree.leaves(want)]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), f"output {i}"
        if w.dtype.kind in "fcV":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")


def _interpreting(record=None):
    """A stand-in for the Mosaic interpreter: the fixture kernel named by the call, in interpret mode."""
    def run_call(backend_config, kernel_name, operands, results, aliases):
        assert '"custom_call_config"' in backend_config
        if record is not None:
            record.append({"name": kernel_name, "operands": [np.array(o) for o in operands], "results": results,
                           "aliases": aliases})
        if kernel_name == "scale_kernel":
            return [np.asarray(K.scale(operands[-1], interpret=True))]
        if kernel_name == "accumulate_kernel":
            return [np.asarray(K.accumulate(*operands[-2:], interpret=True))]
        if kernel_name == "gather_kernel":
            return [np.asarray(K.gather_blocks(operands[0], operands[1], interpret=True))]
        raise AssertionError(f"no stand-in for {kernel_name}")

    return run_call


def _prepared(fn, signature, platforms=("tpu",), at=None):
    exported = export_program(fn, signature, KIND, platforms=platforms)
    return exported, tpu_program(exported, at or signature)


# --------------------------------------------------------------------------- plain jax op families


def _gathers(x, i):
    return x[i], x.at[i].add(1.0), x.at[i].set(2.0), x.at[i, 2].max(3.0), jnp.take_along_axis(x, jnp.abs(i[:, None]) % 16, 1)


PLAIN = {
    "matmul bf16->f32, int8->int32": (
        lambda a, b, c: (jnp.matmul(a, b, preferred_element_type=jnp.float32),
                         lax.dot_general(c, c.T, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32)),
        [[[16, 32], "bfloat16"], [[32, 8], "bfloat16"], [[8, 32], "int8"]]),
    "softmax, reductions": (
        lambda x: (jax.nn.softmax(x, axis=-1), x.sum(0), x.max(1), x.min(), jnp.prod(x[:2], 1), jnp.argmax(x, 1),
                   jnp.any(x > 1), jax.nn.logsumexp(x, 1), jnp.var(x, 0)),
        [[[8, 16], "float32"]]),
    "cumsum, sort, top_k": (
        lambda x, n: (jnp.cumsum(x, 0), jnp.sort(x, 1), jnp.argsort(x[:, 0]), lax.top_k(x, 3),
                      jnp.sort(jnp.where(x > 1, jnp.nan, x), 0), jnp.argsort(n, axis=1, stable=True),
                      jnp.sort(n, axis=0, descending=True)),
        [[[8, 16], "float32"], [[8, 16], "int32"]]),
    "gather, scatter": (_gathers, [[[8, 16], "float32"], [[8], "int32"]]),
    "while with a dynamic bound, cond, switch": (
        lambda x, n: (lax.fori_loop(0, n[0] % 7, lambda i, c: c * 1.5 + i, x),
                      lax.cond(n[0] > 0, lambda: x + 1, lambda: x * 2),
                      lax.switch(n[1] % 3, [lambda: x + 1, lambda: x * 2, lambda: x - 3]),
                      lax.while_loop(lambda c: c[1] < 5, lambda c: (c[0] * 2, c[1] + 1), (x, 0))[0]),
        [[[8], "float32"], [[2], "int32"]]),
    "dynamic_slice (negative and past the end), dynamic_update_slice": (
        lambda x, n: (lax.dynamic_slice(x, (n[0], 0), (4, 16)), lax.dynamic_update_slice(x, jnp.ones((2, 16)), (n[0], 0)),
                      lax.dynamic_slice_in_dim(x, n[0] - 60, 3), lax.dynamic_index_in_dim(x, n[0] + 60, 0)),
        [[[8, 16], "float32"], [[1], "int32"]]),
    "convolution, reduce_window": (
        lambda x, w: (lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
                      lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")),
        [[[2, 8, 8, 3], "float32"], [[3, 3, 3, 4], "float32"]]),
    "bf16, int8, bool, constants": (
        lambda x, y, b: ((x * 2).astype(jnp.bfloat16) + jnp.arange(16, dtype=jnp.bfloat16) / 3,
                         (y >> 2) ^ y, jnp.where(b, x, -x), b & (y > 0), y.astype(jnp.uint8) // 3,
                         x.astype(jnp.int32), jnp.asarray(np.linspace(-2, 2, 16), jnp.float32) * x,
                         lax.bitcast_convert_type(x, jnp.int32), lax.reduce_precision(x, 5, 10)),
        [[[8, 16], "float32"], [[8, 16], "int8"], [[8, 16], "bool"]]),
    "element-wise math": (
        lambda x: (jnp.exp(x), jnp.log1p(jnp.abs(x)), jnp.tanh(x), jax.nn.sigmoid(x), lax.rsqrt(jnp.abs(x) + 1),
                   jnp.sin(x), jnp.floor(x), jnp.round(x), jnp.sign(x), jax.nn.gelu(x, approximate=False),
                   jnp.arctan2(x, x + 1), jnp.power(jnp.abs(x), 1.5), jnp.clip(x, -0.5, 0.5),
                   jnp.isfinite(x / 0), jnp.remainder(x, 0.7), jnp.sinh(x), jnp.cbrt(x)),
        [[[8, 16], "float32"]]),
    "shapes": (
        lambda x: (x.T, x.reshape(4, 32), jnp.concatenate([x, x], 0), jnp.pad(x, ((1, 2), (0, 3))), x[::2, 1:5],
                   jnp.flip(x, 1), jnp.tile(x, (2, 1)), jnp.stack([x, x]), jnp.einsum("ij,kj->ik", x, x)),
        [[[8, 16], "float32"]]),
    "integers": (
        lambda a, b: (a // (jnp.abs(b) + 1), a % (jnp.abs(b) + 1), jnp.maximum(a, b), a * b, -a,
                      lax.population_count(a), lax.clz(a), a << 2, lax.shift_right_logical(a, 3),
                      a.astype(jnp.uint32) * 3 > 7),
        [[[8, 16], "int32"], [[8, 16], "int32"]]),
}


@pytest.mark.parametrize("name", list(PLAIN))
def test_plain_jax_runs_as_jax_runs_it(name):
    fn, signature = PLAIN[name]
    _, program = _prepared(fn, signature)
    assert program.unsupported == []
    assert program.kernels == 0
    xs = _inputs(signature)
    _same(program(*xs), jax.jit(fn)(*xs))


def test_ragged_dot():
    signature = [[[64, 32], "float32"], [[4, 32, 16], "float32"], [[4], "int32"]]
    fn = lambda a, b, g: lax.ragged_dot(a, b, g)  # noqa: E731
    _, program = _prepared(fn, signature)
    assert "chlo.ragged_dot" in program.op_names
    a, b, _ = _inputs(signature)
    groups = np.array([10, 0, 30, 17], np.int32)  # 7 rows in no group
    _same(program(a, b, groups), jax.jit(fn)(a, b, groups), rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- modules with kernels


def test_kernel_inside_xla_ops_at_two_symbolic_sizes():
    """One module with symbolic rows, run at two sizes the judge picks; the dynamic grid size reaches the kernel."""
    exported = export_program(K.scaled_softmax, [[["8*b", 128], "float32"], [[128, 128], "float32"]], KIND,
                              platforms=("tpu",))
    for rows in (16, 40):
        signature = [[[rows, 128], "float32"], [[128, 128], "float32"]]
        program = tpu_program(exported, signature)
        assert program is tpu_program(exported, signature)  # prepared once per module and size
        assert "stablehlo.custom_call @tpu_custom_call" in program.op_names
        record: list = []
        x, w = _inputs(signature, seed=rows)
        _same(program(x, w, run_call=_interpreting(record)), K.scaled_softmax_reference(x, w), rtol=1e-4, atol=1e-4)
        (call,) = record
        assert int(call["operands"][0]) == rows // 8  # the grid size, refined to a constant
        assert [(o.shape, o.dtype) for o in call["operands"][1:]] == [((rows, 128), np.float32)]
        assert call["results"] == [((rows, 128), np.dtype(np.float32))]
    assert tpu_program(exported, [[[16, 128], "float32"], [[128, 128], "float32"]]) is not program


def test_sizes_that_break_a_shape_assertion_are_an_error_naming_it():
    exported = export_program(K.scaled_softmax, [[["8*b", 128], "float32"], [[128, 128], "float32"]], KIND,
                              platforms=("tpu",))
    with pytest.raises(ShapeAssertion, match="Division had remainder 4 when computing the value of 'b'"):
        tpu_program(exported, [[[12, 128], "float32"], [[128, 128], "float32"]])


def test_kernel_in_a_loop_with_a_dynamic_bound():
    signature = [[[16, 128], "float32"], [[1], "int32"]]
    _, program = _prepared(K.looped, signature)
    record: list = []
    x = _inputs(signature)[0]
    n = np.array([3], np.int32)
    _same(program(x, n, run_call=_interpreting(record)), K.looped_reference(x, n))
    assert len(record) == 3


def test_bf16_in_int8_and_bool_out_around_a_kernel():
    signature = [[[16, 128], "bfloat16"], [[], "float32"]]
    _, program = _prepared(K.mixed_dtypes, signature)
    x = _inputs(signature)[0]
    s = np.float32(7.5)
    got = program(x, s, run_call=_interpreting())
    want = jax.jit(lambda x, s: (lambda y: (y.astype(jnp.bfloat16), jnp.clip(y, -100, 100).astype(jnp.int8), y > 0))(
        (x.astype(jnp.float32) * 2 + 1) * s))(x, s)
    _same(got, want)


def test_run_call_gets_the_aliases_of_input_output_aliases():
    signature = [[[16, 128], "float32"], [[16, 128], "float32"]]
    _, program = _prepared(lambda x, acc: K.accumulate(x, acc) * 2.0, signature)
    record: list = []
    x, acc = _inputs(signature)
    _same(program(x, acc, run_call=_interpreting(record)), (acc + x) * 2.0)
    (call,) = record
    assert call["name"] == "accumulate_kernel"
    assert call["aliases"] == {0: 1}  # output 0 is written into operand 1 (acc)
    np.testing.assert_array_equal(call["operands"][0], x)
    np.testing.assert_array_equal(call["operands"][1], acc)
    assert call["results"] == [((16, 128), np.dtype(np.float32))]


def test_run_call_gets_the_scalar_prefetch_operand_first():
    signature = [[[4], "int32"], [[32, 128], "float32"]]
    _, program = _prepared(lambda ids, x: K.gather_blocks((ids + 1) % 4, x), signature)
    record: list = []
    ids = np.array([3, 0, 2, 2], np.int32)
    x = _inputs(signature)[1]
    got = program(ids, x, run_call=_interpreting(record))
    want = np.concatenate([x[b * 8:(b + 1) * 8] * 3.0 for b in (ids + 1) % 4])
    _same(got, [want])
    (call,) = record
    assert call["aliases"] == {}
    np.testing.assert_array_equal(call["operands"][0], (ids + 1) % 4)  # computed by the XLA ops before the kernel
    assert call["operands"][0].dtype == np.int32
    np.testing.assert_array_equal(call["operands"][1], x)
    assert call["results"] == [((32, 128), np.dtype(np.float32))]


class _KernelFault(Exception):
    pass


def test_an_exception_of_run_call_reaches_the_caller_as_itself():
    signature = [[[16, 128], "float32"], [[128, 128], "float32"]]
    _, program = _prepared(K.scaled_softmax, signature)
    fault = _KernelFault("out-of-bounds DMA in scale_kernel")

    def failing(*_):
        raise fault

    with pytest.raises(_KernelFault) as caught:
        program(*_inputs(signature), run_call=failing)
    assert caught.value is fault
    x, w = _inputs(signature)  # the program is usable again afterwards
    _same(program(x, w, run_call=_interpreting()), K.scaled_softmax_reference(x, w), rtol=1e-4, atol=1e-4)


def test_run_call_results_of_the_wrong_type_are_refused():
    signature = [[[16, 128], "float32"], [[128, 128], "float32"]]
    _, program = _prepared(K.scaled_softmax, signature)
    with pytest.raises(KernelResultError, match=r"float64\[16, 128\] for result 0 of kernel 'scale_kernel'"):
        program(*_inputs(signature), run_call=lambda c, n, ops, res, al: [np.zeros((16, 128))])
    with pytest.raises(ValueError, match="give run_call"):
        program(*_inputs(signature))


def test_a_kernel_with_side_effects_runs_when_nothing_reads_it():
    signature = [[[16, 128], "float32"]]
    _, program = _prepared(lambda x: (K.scale(x, side_effects=True), x * 3.0)[1], signature)
    record: list = []
    x = _inputs(signature)[0]
    _same(program(x, run_call=_interpreting(record)), [x * 3.0])
    assert [c["name"] for c in record] == ["scale_kernel"]


def test_unused_inputs_and_64_bit_types():
    from jax._src import config

    signature = [[[8], "int64"], [[3], "float32"], [[8], "float64"]]
    with config.enable_x64(True):
        fn = lambda a, unused, b: (a * 3_000_000_000 + 1, b / 3.0, jnp.argmax(b))  # noqa: E731
        exported, program = _prepared(fn, signature)
        assert list(exported.module_kept_var_idx) == [0, 2]
        a, unused, b = _inputs(signature)
        got = program(a, unused, b)
        _same(got, jax.jit(fn)(a, unused, b), rtol=0, atol=0)
    assert got[0].dtype == np.int64 and got[1].dtype == np.float64
    with pytest.raises(ValueError, match="input 1 is float64"):
        program(a, b, b)


@pytest.mark.parametrize("text, want", [
    ('dense<[1.5, -2.0, 3.0e+00, 0x7FC0]> : tensor<4xbf16>', np.array([1.5, -2.0, 3.0, np.nan], "bfloat16")),
    ('dense<"0x0000C03F000020C1"> : tensor<2xf32>', np.array([1.5, -10.0], np.float32)),
    ('dense<"0xC03F20C1"> : tensor<2xbf16>', np.array([1.5, -10.0], "bfloat16")),
    ('dense<0xFF80> : tensor<2x2xbf16>', np.full((2, 2), -np.inf, "bfloat16")),
    ('dense<[[1, -2], [7, -8]]> : tensor<2x2xi4>', np.array([[1, -2], [7, -8]], "int4")),
    ('dense<[true, false, true]> : tensor<3xi1>', np.array([True, False, True])),
    ('dense<[1.0, 0.5]> : tensor<2xf8E4M3FN>', np.array([1.0, 0.5], "float8_e4m3fn")),
    ('dense<[4294967295, 1]> : tensor<2xui32>', np.array([4294967295, 1], np.uint32)),
    ('dense<-1.25> : tensor<f16>', np.array(-1.25, np.float16)),
])
def test_dense_constants_are_read_exactly(text, want):
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    from pallasite.runner.tpu_program.hlo_attrs import constant

    dtype = np.dtype(jnp.dtype(want.dtype))
    with mlir.make_ir_context():
        got = constant(ir.Attribute.parse(text), want.shape, dtype)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{dtype.itemsize}") if dtype.itemsize > 1 else got.astype(np.float64),
                                  want.view(f"u{dtype.itemsize}") if dtype.itemsize > 1 else want.astype(np.float64))


def test_sharding_annotations_are_identities_on_one_device():
    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    fn = lambda x: jax.shard_map(lambda a: a * 3 + lax.psum(a, "x"), in_specs=jax.sharding.PartitionSpec("x"),  # noqa: E731
                                 out_specs=jax.sharding.PartitionSpec("x"))(lax.with_sharding_constraint(x * 2, sharding))
    _, program = _prepared(fn, [[[8, 128], "float32"]])
    assert {"sdy.sharding_constraint", "stablehlo.all_reduce"} <= set(program.op_names)
    x = _inputs([[[8, 128], "float32"]])[0]
    _same(program(x), [x * 2 * 4])


# --------------------------------------------------------------------------- only the TPU branch


def _two_faced():
    """A primitive whose TPU lowering is the ``scale`` kernel (2x + 1) and whose CPU lowering is cos(x) * 3."""
    from jax._src import core
    from jax._src.interpreters import mlir

    prim = core.Primitive("pallasite_test_two_faced")
    prim.def_abstract_eval(lambda x: core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(prim, mlir.lower_fun(lambda x: K.scale(x), multiple_results=False), platform="tpu")
    mlir.register_lowering(prim, mlir.lower_fun(lambda x: jnp.cos(x) * 3.0, multiple_results=False), platform="cpu")
    return prim


def test_only_the_tpu_branch_of_a_two_platform_module_runs():
    prim = _two_faced()
    signature = [[[16, 128], "float32"]]
    exported, program = _prepared(lambda x: jnp.tanh(prim.bind(x)) @ x.T, signature, platforms=("tpu", "cpu"))
    x = _inputs(signature)[0]
    cpu_branch = np.asarray(jax.jit(exported.call)(x))  # jax runs the CPU branch on this host
    np.testing.assert_allclose(cpu_branch, np.tanh(np.cos(x) * 3) @ x.T, rtol=1e-4, atol=1e-4)
    got = program(x, run_call=_interpreting())
    np.testing.assert_allclose(got[0], np.tanh(x * 2 + 1) @ x.T, rtol=1e-4, atol=1e-4)
    assert np.abs(got[0] - cpu_branch).max() > 1.0
    assert "stablehlo.custom_call @tpu_custom_call" in program.op_names
    assert "stablehlo.cosine" not in program.op_names  # the CPU branch was never planned


@pytest.mark.parametrize("platforms", [("tpu", "cpu"), ("cpu", "tpu")])
def test_a_two_platform_module_without_kernels_runs_its_tpu_lowering(platforms):
    from jax._src import core
    from jax._src.interpreters import mlir

    prim = core.Primitive("pallasite_test_two_faced_plain")
    prim.def_abstract_eval(lambda x: core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(prim, mlir.lower_fun(lambda x: x - 5.0, multiple_results=False), platform="tpu")
    mlir.register_lowering(prim, mlir.lower_fun(lambda x: x + 5.0, multiple_results=False), platform="cpu")
    exported, program = _prepared(lambda x: prim.bind(x) * 2.0, [[[8], "float32"]], platforms=platforms)
    assert exported.platforms == platforms
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(program(x)[0], (x - 5.0) * 2.0)


# --------------------------------------------------------------------------- what it cannot run


def test_an_op_without_a_translation_is_reported_with_its_location_before_running():
    line = inspect.currentframe().f_lineno + 1
    fn = lambda x: jnp.fft.fft(K.scale(x)).real  # noqa: E731
    _, program = _prepared(fn, [[[16, 128], "float32"]])
    (u,) = program.unsupported
    assert u.op == "stablehlo.fft"
    assert u.where == f"{__file__}:{line}"
    assert "stablehlo.fft" in str(u) and f"test_tpu_program_hlo.py:{line}" in str(u)
    record: list = []
    with pytest.raises(Unsupported) as caught:
        program(*_inputs([[[16, 128], "float32"]]), run_call=_interpreting(record))
    assert caught.value is u and record == []  # refused before anything ran


def test_an_attribute_without_a_translation_is_reported():
    fn = lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),  # noqa: E731
                                      precision=lax.DotAlgorithmPreset.BF16_BF16_F32)
    _, program = _prepared(fn, [[[8, 16], "float32"], [[16, 8], "float32"]])
    assert [u.op for u in program.unsupported] == ["stablehlo.dot_general"]
    assert "algorithm" in program.unsupported[0].why


def test_a_translation_whose_result_is_not_the_declared_type_is_refused(monkeypatch):
    """A step whose value is not the type the module declares never feeds the next op (here a sine translated
    to float64 where the module says f32)."""
    from pallasite.runner.tpu_program.hlo_plan import Entry

    table = op_table()
    table["stablehlo.sine"] = Entry(frozenset(), lambda op, plan: lambda env, x: (lax.convert_element_type(
        lax.sin(x), np.float64),))
    monkeypatch.setattr(hlo_exec, "op_table", lambda: table)
    _, program = _prepared(lambda x: jnp.sin(x) * 2.0, [[[8], "float32"]])
    (u,) = program.unsupported
    assert u.op == "stablehlo.sine" and "gives float64[8] where the module declares float32[8]" in u.why


def test_a_module_not_lowered_for_the_tpu_is_refused():
    exported = export_program(lambda x: x + 1.0, [[[8], "float32"]], KIND, platforms=("cpu",))
    with pytest.raises(ValueError, match="lowered for cpu, not for the TPU"):
        tpu_program(exported, [[[8], "float32"]])


def test_every_op_is_listed_with_where_it_comes_from():
    line = inspect.currentframe().f_lineno + 1
    fn = lambda x: jnp.sin(x) + 1.0  # noqa: E731
    _, program = _prepared(fn, [[[8], "float32"]])
    wheres = {u.op: u.where for u in program.ops_used}
    assert wheres["stablehlo.sine"] == f"{__file__}:{line}"
    assert {"stablehlo.sine", "stablehlo.add", "stablehlo.constant"} <= set(program.op_names)


def test_the_op_table_holds_what_the_brief_names():
    table = op_table()
    for name in ("add", "dot_general", "broadcast_in_dim", "reshape", "transpose", "convert", "slice", "dynamic_slice",
                 "dynamic_update_slice", "concatenate", "pad", "iota", "compare", "select", "reduce", "reduce_window",
                 "while", "case", "if", "gather", "scatter", "sort", "clamp", "bitcast_convert", "reduce_precision",
                 "constant", "tuple", "get_tuple_element", "optimization_barrier", "custom_call", "convolution"):
        assert f"stablehlo.{name}" in table, name
    assert "func.call" in table
    assert "stablehlo.fft" not in table and "stablehlo.rng" not in table
    assert os.path.basename(hlo_exec.__file__) == "hlo_exec.py"
