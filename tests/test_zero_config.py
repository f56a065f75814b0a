"""Zero-configuration shapes (analysis/inferred_inputs.py + runner/tasks/tasks_inferred.py): a kernel
file with no example_inputs() gets tiers 1-2 at the shapes its own code makes, and each inferred
task names the line they came from. Fixtures in tests/data/zero_config/ are real Pallas files.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os

import pytest

from pallasite.analysis.inferred_inputs import infer_tasks
from pallasite.analysis.source import Source
from pallasite.engine.checker import Checker, CheckOptions
from pallasite.engine.workers.client import WorkerClient, WorkerConfig

DATA = os.path.join(os.path.dirname(__file__), "data", "zero_config")
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None


def _source(name: str) -> Source:
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return Source(f.read())


def _line_of(name: str, needle: str) -> int:
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return next(i + 1 for i, line in enumerate(f) if needle in line)


# --------------------------------------------------------------------------- static reading


@pytest.mark.parametrize("name, entry, needle, shapes", [
    ("ones_main.py", "add", "out = add(x, y)", "add(float32[1024,512], float32[1024,512])"),
    ("sds_helper.py", "matmul", "show_lowering(matmul, a_spec, b_spec)",
     "matmul(bfloat16[1024,2048], bfloat16[2048,512])"),
    ("tpu_branch.py", "softmax", "y = softmax(x, 256)", "softmax(float32[2048,1024], 256)"),
])
def test_shapes_are_read_from_the_files_own_calls(name, entry, needle, shapes):
    found = infer_tasks(_source(name))
    assert [(t.entry, t.line, t.describe()) for t in found.tasks] == [(entry, _line_of(name, needle), shapes)]


def _infer(text: str):
    return infer_tasks(Source(text))


KERNEL = '''
import functools
import jax, numpy as np
import jax.numpy as jnp
from jax.experimental import pallas as pl

def k(x_ref, o_ref):
    o_ref[...] = x_ref[...]

def copy(x, scale=1.0):
    return pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
'''


@pytest.mark.parametrize("tail, expected", [
    ("x = jnp.zeros((8, 128), dtype=jnp.bfloat16)\ncopy(x)", "copy(bfloat16[8,128])"),
    ("x = np.random.randn(16, 256).astype(np.float32)\ncopy(x)", "copy(float32[16,256])"),
    ("x = np.random.randn(16, 256)\ncopy(x)", "copy(float32[16,256])"),  # float64 becomes float32 without x64
    ("k1, k2 = jax.random.split(jax.random.key(0))\nx = jax.random.uniform(k1, (4, 8, 128))\ncopy(x, 0.5)",
     "copy(float32[4,8,128], 0.5)"),
    ("N = 64\nx = jnp.arange(N * 128, dtype=jnp.int32).reshape(N, 128)\ncopy(x)", "copy(int32[64,128])"),
    ("x = jnp.ones((128, 256)).T\njax.jit(copy)(x)", "copy(float32[256,128])"),
    ("f = jax.jit(copy)\nshape = (32, 128)\nx = jnp.empty(shape, jnp.int8)\nf(x)", "copy(int8[32,128])"),
    ("rng = np.random.default_rng(0)\nx = rng.standard_normal((8, 128), dtype=np.float32)\ncopy(x)",
     "copy(float32[8,128])"),
    ("def main(rows=512):\n    x = jnp.ones((rows, 128))\n    copy(x)\n", "copy(float32[512,128])"),
])
def test_constructors_and_bindings(tail, expected):
    found = _infer(KERNEL + tail)
    assert [t.describe() for t in found.tasks] == [expected], found.notes


def test_the_latest_binding_above_the_call_counts():
    text = KERNEL + "x = jnp.ones((8, 128))\ncopy(x)\nx = jnp.ones((16, 256))\n"
    assert [t.describe() for t in _infer(text).tasks] == ["copy(float32[8,128])"]


@pytest.mark.parametrize("tail, why", [
    ("for n in (128, 256):\n    x = jnp.ones((n, 128))\n    copy(x)", "`n` is not a static int"),
    ("x = load_from_disk()\ncopy(x)", "not an array constructor"),
    ("import sys\nx = jnp.ones((int(sys.argv[1]), 128))\ncopy(x)", "not a static int"),
])
def test_ambiguity_falls_back_with_a_note_that_names_the_argument(tail, why):
    found = _infer(KERNEL + tail)
    assert found.tasks == ()
    assert len(found.notes) == 1 and found.notes[0].startswith("shapes not inferred for copy: argument 1")
    assert why in found.notes[0]


def test_calls_inside_kernel_code_are_not_example_inputs():
    text = KERNEL + "def wrapper(y):\n    return copy(y)\n"
    found = _infer(text)
    assert found.tasks == () and "no call of copy, wrapper" in found.notes[0]


# --------------------------------------------------------------------------- through the worker


@pytest.fixture(scope="module")
def check():
    loop = asyncio.new_event_loop()
    client = WorkerClient(WorkerConfig(timeout_s=120.0, memory_mb=3072))
    tiers = (0, 1, 2) if HAS_LIBTPU else (0, 1)
    checker = Checker(CheckOptions(target="v5e", tiers=tiers, time_limit_s=120.0), client=client)
    yield lambda name: loop.run_until_complete(checker.check(os.path.join(DATA, name)))
    loop.run_until_complete(client.close())
    loop.close()


@pytest.mark.tpu_compiler
@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
@pytest.mark.parametrize("name, needle", [
    ("ones_main.py", "out = add(x, y)"),
    ("sds_helper.py", "show_lowering(matmul, a_spec, b_spec)"),
    ("tpu_branch.py", "y = softmax(x, 256)"),
])
def test_a_file_without_a_task_gets_tiers_1_and_2_with_the_inferred_from_line(check, name, needle):
    report = check(name)
    assert not [f for f in report.findings if f.severity in ("error", "warning")], report.findings
    assert not [f for f in report.findings if f.code == "PLS900"]
    assert [dict(k.tiers)[1] for k in report.kernels] == ["ok"] and [dict(k.tiers)[2] for k in report.kernels] == ["ok"]
    line = _line_of(name, needle)
    assert any(f"shapes from line {line}:" in n for n in report.notes), report.notes


def test_the_broken_twin_is_caught_at_the_kernel_body_line(check):
    report = check("ones_main_bad.py")
    errors = [(f.code, f.span.line + 1) for f in report.findings if f.severity == "error"]
    assert errors == [("PLS104", _line_of("ones_main_bad.py", "o_ref[...] = jnp.sum("))]
    assert any("shapes from line" in n for n in report.notes)


def test_a_kernelbench_model_file_is_a_task_as_it_is(check):
    report = check("kernelbench_model.py")
    assert not [f for f in report.findings if f.severity in ("error", "warning") or f.code == "PLS900"], report.findings
    assert [dict(k.tiers)[1] for k in report.kernels] == ["ok"]
