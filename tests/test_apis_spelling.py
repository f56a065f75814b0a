"""PLS007 (a Pallas name the installed jax lacks) finds the attribute however it is spelled:
``analysis/rules/apis.check_apis`` reads only the attributes whose text starts with a Pallas alias, and
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


def test_passing_over_exported_names_changes_no_finding(monkeypatch):
    """``_alias_attributes`` passes over ``alias.NAME`` when NAME is exported: the PLS007 findings of
    jax's own Pallas files and of the spellings above are those of reading every such attribute."""
    import glob
    import os

    from pallasite.analysis.rules import apis
    from pallasite.analysis.rules.apis import jax_root

    texts = [HEAD + "a = pl.BlockSpec\nb = pl.NotAThing\nc = pltpu.TPUCompilerParams.x\nd = 'pl.Gone'\n"
             "e = pl.BlockSpecé\nf = pl.pl.BlockSpec\ng = pltpu.CompilerParams(pltpu.TPUCompilerParams)\n"]
    root = jax_root()
    if root is not None:
        for path in sorted(glob.glob(os.path.join(root, "experimental", "pallas", "ops", "**", "*.py"), recursive=True)):
            with open(path, encoding="utf-8") as handle:
                texts.append(handle.read())
    passed_over = 0
    real = apis._alias_attributes

    def every(source, aliases, table=None):
        nonlocal passed_over
        passed_over += len(real(source, aliases)) - len(real(source, aliases, table))
        return real(source, aliases)

    for text in texts:
        quick = [f for f in analyze(text, None).findings if f.code == "PLS007"]
        monkeypatch.setattr(apis, "_alias_attributes", every)
        slow = [f for f in analyze(text, None).findings if f.code == "PLS007"]
        monkeypatch.setattr(apis, "_alias_attributes", real)
        assert quick == slow
    assert passed_over > 0  # names were passed over, and the findings stayed
    assert [f.span.line - HEAD.count("\n") for f in analyze(texts[0], None).findings if f.code == "PLS007"] == [1, 2, 4, 5, 6]
