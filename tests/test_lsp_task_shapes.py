"""Grid sizes evaluated at a task's example input shapes (server/editor/task_shapes.py), from source only."""

from __future__ import annotations

from pallasite.server.editor.task_shapes import evaluate, grid_at_inputs

KERNEL = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 256


def matmul(x, y, *, bm: int = 128, bk: int = 512):
    return pl.pallas_call(kernel, grid=(x.shape[0] // bm, pl.cdiv(y.shape[1], BLOCK), x.shape[1] // bk))(x, y)


def matmul_inputs():
    a = jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16)
    return (a, jax.ShapeDtypeStruct((2048, 1000), jnp.bfloat16))
'''


def test_grid_dims_evaluate_with_shapes_constants_and_tunable_defaults():
    grid = ("x.shape[0] // bm", "pl.cdiv(y.shape[1], BLOCK)", "x.shape[1] // bk")
    assert grid_at_inputs(KERNEL, grid, "matmul", "matmul_inputs") == (8, 4, 4)
    assert grid_at_inputs(KERNEL, (2, "x.shape[0] // bm"), "matmul", "matmul_inputs") == (2, 8)


def test_anything_unreadable_gives_none():
    assert grid_at_inputs(KERNEL, ("x.shape[0] // unknown",), "matmul", "matmul_inputs") is None
    assert grid_at_inputs(KERNEL, ("len(x)",), "matmul", "matmul_inputs") is None
    assert grid_at_inputs(KERNEL, ("x.shape[0] // bm",), "matmul", "no_such_inputs") is None
    assert grid_at_inputs("def broken(:\n", ("x.shape[0]",), "matmul", "matmul_inputs") is None
    assert evaluate("x.shape[5]", {"x": (1, 2)}, {}) is None
    assert evaluate("8 // 0", {}, {}) is None
    assert evaluate("-(-7 // 2) * 3 % 5", {}, {}) == 2
