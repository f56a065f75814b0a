"""PLS007 (a Pallas name the installed jax lacks) finds the attribute however it is spelled:
``analysis/apis.check_apis`` reads only the attributes whose text starts with a Pallas alias, and
a space, a line continuation or a longer name that starts like the alias must not fool it."""

from __future__ import annotations

from pallasite.analysis.tier0 import analyze

HEAD = '''import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import tpu as ptü


def neg_kernel(x_ref, o_ref):
    o_ref[...] = -x_ref[...]


def neg(x):
    return pl.pallas_call(neg_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

'''


def _lines(body: str) -> list[int]:
    found = analyze(HEAD + body, None).findings
    return sorted(f.span.line - HEAD.count("\n") for f in found if f.code == "PLS007")


def test_every_spelling_of_an_old_name_is_found():
    body = ("a = pltpu.TPUCompilerParams\n"
            "b = pltpu . TPUCompilerParams\n"
            "c = (pltpu\n     .TPUCompilerParams)\n"
            "d = pltpu.\\\n    TPUCompilerParams\n"
            "e = ptü.TPUCompilerParams\n"
            "f = pltpux.TPUCompilerParams\n"  # another name: not Pallas
            "g = x.pltpu.TPUCompilerParams\n")  # pltpu of something else
    assert _lines(body) == [0, 1, 2, 4, 6]
