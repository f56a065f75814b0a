"""Tier-0 rules PLS017 (an output ref the kernel writes on no path) and PLS018 (a scratch ref read on
the first grid step before anything writes it), analysis/rules/writes.py: several shapes of each
mistake, the correct kernels they must stay silent on, and no finding on jax's own TPU kernels
(the installed jax's ``jax/experimental/pallas/ops/tpu``) or on the project's fixed fixtures."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pallasite.analysis.source import apply_edits
from pallasite.analysis.tier0 import analyze

DATA = Path(__file__).parent / "data"
CODES = ("PLS017", "PLS018")

HEADER = """\
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


"""


def matmul_file(body: str, *, params: str = "x_ref, y_ref, o_ref, acc_ref",
                scratch: str = "[pltpu.VMEM((128, 128), jnp.float32)]", extra: str = "", helpers: str = "") -> str:
    """A tiled matmul whose kernel body is ``body`` (grid (m, n, k), one output, ``scratch``)."""
    return HEADER + f"def matmul_kernel({params}):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + \
        "\n\n\n" + textwrap.dedent(helpers) + f"""
def matmul(x, y):
    m, kk = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // 128, n // 128, kk // 128),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                  pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes={scratch},{extra}
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)
"""


def read_in_full(text: str) -> bool:
    """The rules read the file's one kernel (its refs placed, its body visible)."""
    return _scan_text(text) == 1


def found(text: str) -> list[tuple[str, str]]:
    """(code, the text of the line it is said at) for this file's PLS017/PLS018 findings."""
    result = analyze(text)
    assert result.syntax_ok, text
    lines = text.splitlines()
    return [(f.code, lines[f.span.line].strip()) for f in analyze(text).findings if f.code in CODES]


INIT = """
@pl.when(pl.program_id(2) == 0)
def _init():
    acc_ref[...] = jnp.zeros_like(acc_ref)
"""
ACCUMULATE = "acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)"
FINISH = """
@pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
def _done():
    o_ref[...] = acc_ref[...].astype(o_ref.dtype)
"""


# ------------------------------------------------------------------------------ PLS017


@pytest.mark.parametrize("body, helpers, param", [
    # the output is only read
    ("acc_ref[...] = x_ref[...] + o_ref[...]", "", "o_ref"),
    # the result is stored into an input instead of the output
    ("acc_ref[...] = jnp.dot(x_ref[...], y_ref[...])\nx_ref[...] = acc_ref[...]", "", "o_ref"),
    # passed to a helper of the file that only looks at its shape
    ("acc_ref[...] = jnp.dot(x_ref[...], y_ref[...])\nshow(acc_ref, o_ref)",
     "def show(a_ref, out_ref):\n    print(out_ref.shape, a_ref[...])\n\n", "o_ref"),
    # a closure that reads it, in a lax loop
    ("def body(i, c):\n    return c + o_ref[i]\n\nacc_ref[0] = jax.lax.fori_loop(0, 8, body, x_ref[0])", "", "o_ref"),
])
def test_an_output_written_on_no_path_is_said_at_its_parameter(body, helpers, param):
    text = matmul_file(body, helpers=helpers)
    [finding] = [f for f in analyze(text).findings if f.code == "PLS017"]
    line = text.splitlines()[finding.span.line]
    assert line.startswith("def matmul_kernel(") and line[finding.span.column:finding.span.end_column] == param
    assert finding.severity == "error"
    assert f"never writes its output {param}" in finding.message and "whatever was in memory" in finding.message
    assert "pl.pallas_call(" in text.splitlines()[finding.related[0].span.line]


def test_the_fixture_names_the_second_output():
    text = (DATA / "tier0" / "pls017_output_unwritten_bad.py").read_text()
    [finding] = analyze(text).findings
    assert "neg_ref (output 1 of the pallas_call)" in finding.message


@pytest.mark.parametrize("body, helpers, extra", [
    # written through a helper of the file (positional and keyword)
    (f"{ACCUMULATE}\nfinish(acc_ref, o_ref)", "def finish(a_ref, out_ref):\n    out_ref[...] = a_ref[...]\n\n", ""),
    (f"{ACCUMULATE}\nfinish(acc_ref, out_ref=o_ref)", "def finish(a_ref, out_ref):\n    out_ref[...] = a_ref[...]\n\n", ""),
    # through a helper that passes it on to another one
    (f"{ACCUMULATE}\nfinish(o_ref)", "def finish(r):\n    store(r)\n\n\ndef store(r):\n    r[...] = jnp.zeros(r.shape, r.dtype)\n\n", ""),
    # by an async copy, and by a DMA descriptor
    ("pltpu.async_copy(acc_ref, o_ref, sem).wait()", "", ""),
    ("copy = pltpu.make_async_copy(acc_ref, o_ref.at[0:8], sem)\ncopy.start()\ncopy.wait()", "", ""),
    # pl.store / pltpu.store
    ("pltpu.store(o_ref, acc_ref[...])", "", ""),
    # in a lax.fori_loop body
    ("def body(i, c):\n    o_ref[i] = x_ref[i]\n    return c\n\njax.lax.fori_loop(0, 8, body, 0)\nacc_ref[...] = x_ref[...]", "", ""),
    # under pl.when branches that cover every step
    ("@pl.when(pl.program_id(2) == 0)\ndef _first():\n    o_ref[...] = x_ref[...]\n\n"
     "@pl.when(pl.program_id(2) > 0)\ndef _rest():\n    o_ref[...] += x_ref[...]\nacc_ref[...] = x_ref[...]", "", ""),
    # the pl.when(cond)(f) form
    ("def _store():\n    o_ref[...] = x_ref[...]\n\npl.when(pl.program_id(2) == 0)(_store)\nacc_ref[...] = x_ref[...]", "", ""),
    # aliased to an input: the output holds the input's contents
    ("acc_ref[...] = x_ref[...]", "", "\n        input_output_aliases={0: 0},"),
    # aliases the rule cannot read, and keywords it cannot see
    ("acc_ref[...] = x_ref[...]", "", "\n        input_output_aliases=ALIASES,"),
    ("acc_ref[...] = x_ref[...]", "", "\n        **OPTIONS,"),
    # reached in ways the rule does not follow
    ("setattr(o_ref, 'x', 1)\nacc_ref[...] = x_ref[...]", "", ""),
    ("r = o_ref\nr[...] = x_ref[...]\nacc_ref[...] = x_ref[...]", "", ""),
    ("unknown_helper(o_ref)\nacc_ref[...] = x_ref[...]", "", ""),
])
def test_outputs_written_some_way_are_not_said(body, helpers, extra):
    text = matmul_file(body, helpers=helpers, extra=extra,
                       params="x_ref, y_ref, o_ref, acc_ref, sem" if "sem" in body else "x_ref, y_ref, o_ref, acc_ref",
                       scratch="[pltpu.VMEM((128, 128), jnp.float32), pltpu.SemaphoreType.DMA]" if "sem" in body
                       else "[pltpu.VMEM((128, 128), jnp.float32)]")
    assert [f for f in analyze(text).findings if f.code == "PLS017"] == []
    assert read_in_full(text) == ("setattr" not in body)  # silent because it read the writes, not for lack of reading


def test_dummy_outputs_nobody_reads_are_not_said():
    text = matmul_file("acc_ref[...] = x_ref[...]")
    assert [f.code for f in analyze(text).findings] == ["PLS017"]
    dropped = text.replace("    return pl.pallas_call(", "    pl.pallas_call(")
    assert found(dropped) == []
    waited = text.replace("    return pl.pallas_call(", "    jax.block_until_ready(pl.pallas_call(").replace("    )(x, y)\n", "    )(x, y))\n")
    assert found(waited) == []
    unpacked = text.replace("    return pl.pallas_call(", "    _, = pl.pallas_call(")
    assert found(unpacked) == []
    named = matmul_file("acc_ref[...] = x_ref[...]", params="x_ref, y_ref, _, acc_ref")
    assert found(named) == []


def test_kernels_not_fully_visible_are_not_said():
    text = matmul_file("acc_ref[...] = x_ref[...]", params="x_ref, y_ref, o_ref, acc_ref, **kwargs")
    assert found(text) == []
    starred = matmul_file("acc_ref[...] = x_ref[...]", params="x_ref, *refs")
    assert found(starred) == []
    defaulted = matmul_file("acc_ref[...] = x_ref[...]", params="x_ref, y_ref, o_ref, acc_ref=None")
    assert found(defaulted) == []


def test_a_kernel_returning_its_result_gets_pls009_only():
    text = (DATA / "tier0" / "pls009_kernel_returns_bad.py").read_text()
    assert [f.code for f in analyze(text).findings] == ["PLS009"]


# ------------------------------------------------------------------------------ PLS018


@pytest.mark.parametrize("body, scratch, at", [
    # the accumulator never zeroed
    (f"{ACCUMULATE}\n{FINISH}", None, ACCUMULATE),
    ("acc_ref[...] = acc_ref[...] + x_ref[...]\n" + FINISH, None, "acc_ref[...] = acc_ref[...] + x_ref[...]"),
    # a running max never set to -inf
    ("acc_ref[...] = jnp.maximum(acc_ref[...], x_ref[...])\n" + FINISH, None,
     "acc_ref[...] = jnp.maximum(acc_ref[...], x_ref[...])"),
    # initialised after the first accumulation
    (f"{ACCUMULATE}\n{INIT}\n{FINISH}", None, ACCUMULATE),
    # the first-step block reads before it writes
    ("k = pl.program_id(2)\n\n@pl.when(k == 0)\ndef _first():\n    acc_ref[...] += x_ref[...]\n\n" + FINISH, None,
     "acc_ref[...] += x_ref[...]"),
    # a scalar counter in SMEM
    ("cnt_ref[0] += 1\nacc_ref[...] = x_ref[...]\n" + FINISH, "[pltpu.VMEM((128, 128), jnp.float32), pltpu.SMEM((1,), jnp.int32)]",
     "cnt_ref[0] += 1"),
])
def test_a_scratch_read_on_the_first_step_before_any_write_is_said_at_the_read(body, scratch, at):
    params = "x_ref, y_ref, o_ref, acc_ref, cnt_ref" if scratch else "x_ref, y_ref, o_ref, acc_ref"
    text = matmul_file(body, params=params, scratch=scratch or "[pltpu.VMEM((128, 128), jnp.float32)]")
    [finding] = [f for f in analyze(text).findings if f.code == "PLS018"]
    lines = text.splitlines()
    assert lines[finding.span.line].strip() == at and finding.severity == "error"
    assert "pl.when(pl.program_id(2) == 0)" in finding.message
    assert "scratch_shapes=" in lines[finding.related[0].span.line]


@pytest.mark.parametrize("body, condition", [
    # initialised on the wrong steps only (an inverted init)
    ("@pl.when(pl.program_id(2) > 0)\ndef _init():\n    acc_ref[...] = jnp.zeros_like(acc_ref)\n\n"
     f"{ACCUMULATE}\n{FINISH}", "pl.program_id(2) > 0"),
    # initialised on a flattened step count that is not 0 on the first step
    ("step = pl.program_id(1) * pl.num_programs(2) + pl.program_id(2)\n\n@pl.when(step > 0)\ndef _init():\n"
     f"    acc_ref[...] = jnp.zeros_like(acc_ref)\n\n{ACCUMULATE}\n{FINISH}", "step > 0"),
])
def test_an_init_under_a_condition_false_on_the_first_step_is_said_at_the_condition(body, condition):
    """Before (issue 57's corpus: an init's ``pl.when`` inverted), at the read two lines below; the read related."""
    text = matmul_file(body, scratch="[pltpu.VMEM((128, 128), jnp.float32)]")
    [finding] = [f for f in analyze(text).findings if f.code == "PLS018"]
    lines = text.splitlines()
    assert lines[finding.span.line][finding.span.column:finding.span.end_column] == condition
    assert "false on the first grid step" in finding.message and "pl.when(pl.program_id(2) == 0)" in finding.message
    assert lines[finding.related[0].span.line].strip() == ACCUMULATE


def test_a_first_step_block_that_no_longer_writes_the_scratch_is_where_its_init_went():
    """An init removed from its first-step block (the block stays, with other work or ``pass``): said at the
    block's ``pl.when``, the read related (before: at the read)."""
    body = f"@pl.when(pl.program_id(2) == 0)\ndef _init():\n    pass\n\n{ACCUMULATE}\n{FINISH}"
    text = matmul_file(body, scratch="[pltpu.VMEM((128, 128), jnp.float32)]")
    [finding] = [f for f in analyze(text).findings if f.code == "PLS018"]
    lines = text.splitlines()
    assert lines[finding.span.line].strip() == "@pl.when(pl.program_id(2) == 0)"
    assert "writes nothing of acc_ref" in finding.message
    assert lines[finding.related[0].span.line].strip() == ACCUMULATE


def test_the_fix_zeroes_an_accumulation_on_the_first_step():
    text = (DATA / "tier0" / "pls018_scratch_uninit_bad.py").read_text()
    [finding] = analyze(text).findings
    fixed = apply_edits(text, finding.fix.edits)
    assert "    @pl.when(pl.program_id(2) == 0)\n    def _init_acc_ref():\n" \
           "        acc_ref[...] = jnp.zeros(acc_ref.shape, acc_ref.dtype)\n\n    acc_ref[...] += jnp.dot(" in fixed
    assert analyze(fixed).findings == ()
    compile(fixed, "fixed.py", "exec")
    running_max = matmul_file("acc_ref[...] = jnp.maximum(acc_ref[...], x_ref[...])\n" + FINISH)
    [finding] = analyze(running_max).findings
    assert finding.fix is None  # zeros would be the wrong identity there


@pytest.mark.parametrize("body", [
    # accumulate with the init block, in each spelling
    f"{INIT}\n{ACCUMULATE}\n{FINISH}",
    f"k = pl.program_id(2)\n\n@pl.when(k == 0)\ndef _init():\n    acc_ref[...] = jnp.zeros_like(acc_ref)\n\n{ACCUMULATE}\n{FINISH}",
    f"i, k = pl.program_id(0), pl.program_id(2)\nfirst = jnp.logical_and(i == 0, k == 0)\n\n@pl.when(first)\n"
    f"def _init():\n    acc_ref[...] = jnp.zeros_like(acc_ref)\n\n{ACCUMULATE}\n{FINISH}",
    f"@pl.when((pl.program_id(1) == 0) & (pl.program_id(2) * 128 == 0))\ndef _init():\n"
    f"    acc_ref[...] = jnp.zeros_like(acc_ref)\n\n{ACCUMULATE}\n{FINISH}",
    f"def _init():\n    acc_ref[...] = jnp.zeros_like(acc_ref)\n\npl.when(pl.program_id(2) == 0)(_init)\n{ACCUMULATE}\n{FINISH}",
    "step = pl.program_id(1) * pl.num_programs(2) + pl.program_id(2)\n\n@pl.when(step == 0)\ndef _init():\n"
    f"    acc_ref[...] = jnp.zeros_like(acc_ref)\n\n{ACCUMULATE}\n{FINISH}",
    # an unconditional write before the read
    f"acc_ref[...] = jnp.dot(x_ref[...], y_ref[...])\nacc_ref[...] += x_ref[...]\n{FINISH}",
    # a first-step block that writes before it reads
    "@pl.when(pl.program_id(2) == 0)\ndef _first():\n    acc_ref[...] = x_ref[...]\n    acc_ref[...] += y_ref[...]\n\n" + FINISH,
    # the read's value dropped on the first step, or only its shape used
    f"acc_ref[...] = jnp.zeros_like(acc_ref[...])\n{ACCUMULATE}\n{FINISH}",
    f"k = pl.program_id(2)\nacc_ref[...] = jnp.where(k == 0, 0.0, acc_ref[...]) + x_ref[...]\n{FINISH}",
    # an init the rule cannot place on the first step: silent (precision over recall)
    f"@pl.when(pl.program_id(2) == pl.num_programs(2) - 1)\ndef _init():\n    acc_ref[...] = jnp.zeros_like(acc_ref)\n\n{ACCUMULATE}\n{FINISH}",
    f"if ZERO_FIRST:\n    acc_ref[...] = jnp.zeros_like(acc_ref)\n{ACCUMULATE}\n{FINISH}",
    f"def body(i, c):\n    acc_ref[...] = jnp.zeros_like(acc_ref)\n    return c\n\njax.lax.fori_loop(0, 1, body, 0)\n{ACCUMULATE}\n{FINISH}",
    f"init(acc_ref)\n{ACCUMULATE}\n{FINISH}",
    f"pltpu.sync_copy(x_ref, acc_ref)\n{ACCUMULATE}\n{FINISH}",
    # a return that may end the kernel before the read
    f"if SKIP:\n    return\n{ACCUMULATE}\n{FINISH}",
    f"with jax.named_scope('x'):\n    return\n{ACCUMULATE}\n{FINISH}",
    # reads only in code that may not run on the first step
    f"acc_ref[...] = x_ref[...]\n@pl.when(pl.program_id(2) > 0)\ndef _more():\n    acc_ref[...] += x_ref[...]\n\n{FINISH}",
])
def test_initialised_scratch_is_not_said(body):
    text = matmul_file(body)
    assert found(text) == [] and read_in_full(text)


def test_semaphores_are_not_data():
    text = matmul_file("x = sem\nacc_ref[...] = x_ref[...]\n" + FINISH, params="x_ref, y_ref, o_ref, acc_ref, sem",
                       scratch="[pltpu.VMEM((128, 128), jnp.float32), pltpu.SemaphoreType.DMA]")
    assert found(text) == []


def test_tier3_finding_the_same_mistake_is_folded_into_the_tier0_one():
    from dataclasses import replace

    from pallasite.engine.findings.agreement import merge_agreeing

    for name in ("pls017_output_unwritten_bad.py", "pls018_scratch_uninit_bad.py"):
        result = analyze((DATA / "tier0" / name).read_text())
        [early] = result.findings
        late = replace(early, code="PLS303", tier=3, origin="TPU interpreter", chip="v5e", fix=None, related=(),
                       message="Output 1 holds NaN where the kernel never wrote. More.")
        [merged] = merge_agreeing([early, late], result.sites)
        assert merged.code == early.code and f"TPU interpreter (v5e) agrees with {early.code} (as PLS303)" in merged.related[-1].message


def test_tier3_nan_at_the_read_folds_into_pls018_said_where_the_init_went():
    """PLS018 now stands at the inverted ``pl.when``, far from the read; tier 3's NaN at the read it relates is
    the same mistake (before this, a second finding)."""
    from dataclasses import replace

    from pallasite.engine.findings.agreement import merge_agreeing

    body = ("@pl.when(pl.program_id(2) > 0)\ndef _init():\n    acc_ref[...] = jnp.zeros_like(acc_ref)\n\n"
            + "x = 1\n" * 6 + f"{ACCUMULATE}\n{FINISH}")
    result = analyze(matmul_file(body, scratch="[pltpu.VMEM((128, 128), jnp.float32)]"))
    [early] = [f for f in result.findings if f.code == "PLS018"]
    read = early.related[0].span
    assert read.line - early.span.line > 2
    late = replace(early, code="PLS303", tier=3, origin="TPU interpreter", chip="v5e", fix=None, related=(),
                   span=read, message="acc_ref holds NaN where it was read. More.")
    [merged] = merge_agreeing([early, late], result.sites)
    assert merged.code == "PLS018" and merged.span == early.span


# ------------------------------------------------------------------------------ no false findings


JAX_TPU_OPS = Path(__import__("jax").__file__).parent / "experimental" / "pallas" / "ops" / "tpu"


def _scan_text(text: str) -> int:
    """How many of the text's pallas_call sites the rules read in full."""
    from pallasite.analysis import sites as sites_mod
    from pallasite.analysis.rules import writes
    from pallasite.analysis.rules.context import RuleContext, python_tree
    from pallasite.analysis.source import Source

    source = Source(text)
    ctx = RuleContext(source=source, sites=sites_mod.find_sites(source), tasks=(), target="v6e")
    tree = python_tree(source)
    if tree is None:
        return 0
    return sum(writes._kernel_view(ctx, tree, site) is not None for site in ctx.sites)


def _scan(paths: list[Path]) -> tuple[int, int, list[str]]:
    """(files with a pallas_call, sites whose kernel the rules read in full, PLS017/PLS018 findings)."""
    files, read, said = 0, 0, []
    for path in paths:
        text = path.read_text(errors="replace")
        result = analyze(text, str(path))
        said += [f"{path}:{f.span.line + 1} {f.code} {f.message}" for f in result.findings if f.code in CODES]
        if not result.sites:
            continue
        files += 1
        read += _scan_text(text)
    return files, read, said


def test_no_finding_on_jax_own_tpu_kernels():
    files, read, said = _scan(sorted(JAX_TPU_OPS.rglob("*.py")))
    assert said == []
    # matmul, all_gather, megablox (twice), flash attention's dkv, ragged paged attention, threefry
    assert files >= 9 and read >= 7, (files, read)


def test_no_finding_on_the_project_fixed_fixtures_and_guides():
    paths = sorted(p for p in DATA.rglob("*.py") if p.stem.endswith(("_ok", "_fixed")) or "/guides/" in str(p)
                   or p.parent.name in ("real", "megacore"))
    paths += sorted((Path(__file__).parent.parent / "examples").glob("*.py"))
    files, read, said = _scan(paths)
    assert said == []
    assert files >= 40 and read >= 40, (files, read)
