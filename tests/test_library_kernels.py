"""A library kernel called from the user's file is the user's kernel (issue 50).

tests/data/library/ holds wrappers of jax's own ``flash_attention`` (jax.experimental.pallas.ops.tpu)
with the user's ``BlockSizes``, ``example_inputs``, ``reference`` and ``TUNABLES``. Before: tier 0 read
"not run" for the entry (the file writes no pallas_call), so `check` said "not compiled for v6e: attn:
tier 0 not run" with tiers 1-2 passed and `tune` found no configuration compiled; a ``block_q = 100``
the lowering rejects landed at 1:1, and a ``block_k_major`` the library's own check rejects at the call.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pallasite.analysis.verdict import TIER0_NOT_APPLICABLE, CompileResult, compile_result
from pallasite.analysis.types import FileReport, KernelVerdict, Span
from pallasite.engine.findings import reach
from pallasite.engine.checker import CheckOptions, Checker

DATA = Path(__file__).parent / "data" / "library"
LIBRARY = "jax.experimental.pallas.ops.tpu.flash_attention"


def _check(name: str, tiers=(0, 1, 2)) -> FileReport:
    async def run() -> FileReport:
        checker = Checker(CheckOptions(target="v6e", tiers=tiers))
        try:
            return await checker.check(str(DATA / name))
        finally:
            await checker.close()

    return asyncio.run(run())


def _literal(path: Path, needle: str) -> tuple[int, int]:
    for i, line in enumerate(path.read_text().splitlines()):
        if needle in line:
            return i, line.index(needle.split("= ")[-1], line.index(needle))
    raise AssertionError(needle)


def test_the_wrapper_of_a_library_kernel_is_compiled_for_the_chip():
    report = _check("flash_wrapper.py")
    assert not [f for f in report.findings if f.severity == "error"], report.findings
    (kernel,) = report.kernels
    states = dict(kernel.tiers)
    assert states[0] == f"{TIER0_NOT_APPLICABLE}: the site is in {LIBRARY}"
    assert states[1] == states[2] == "ok"
    result = compile_result(report, (0, 1, 2), "v6e")
    assert result.ok is True and result.text() == "compiled for v6e (tiers 0,1,2)"


def test_a_block_size_the_lowering_rejects_lands_at_the_users_literal_with_the_librarys_line():
    report = _check("flash_wrapper_100.py", (0, 1))
    (error,) = [f for f in report.findings if f.severity == "error"]
    line, column = _literal(DATA / "flash_wrapper_100.py", "block_q: int = 100")
    assert error.code == "PLS101" and (error.span.line, error.span.column) == (line, column)
    assert "100 written here" in error.message
    library = [r for r in error.related if r.path is not None]
    assert library and all(os.path.basename(r.path) == "flash_attention.py" for r in library)
    # the file's own call into the library is related too
    call = next(i for i, text in enumerate((DATA / "flash_wrapper_100.py").read_text().splitlines())
                if "return flash_attention(" in text)
    assert any(r.path is None and r.span.line == call for r in error.related)
    assert dict(report.kernels[0].tiers)[0].startswith(TIER0_NOT_APPLICABLE)


def test_a_block_size_the_librarys_own_check_rejects_lands_at_the_users_literal():
    report = _check("flash_wrapper_kmajor.py", (0, 1))
    (error,) = [f for f in report.findings if f.severity == "error"]
    line, column = _literal(DATA / "flash_wrapper_kmajor.py", "block_k_major: int = 384")
    assert (error.span.line, error.span.column) == (line, column), error
    assert "should be divisible by block_k_major=384" in error.message
    # the trace failed before any pallas_call: tier 0 still has no site of the file to read
    assert dict(report.kernels[0].tiers)[0] == reach.LIBRARY_UNKNOWN


def test_compiled_needs_tier_0_passed_or_not_applicable_never_not_run():
    def report(state0: str) -> FileReport:
        return FileReport(path="k.py", kernels=(KernelVerdict("attn", Span.point(0),
                                                              ((0, state0), (1, "ok"), (2, "ok"))),))

    assert compile_result(report(f"{TIER0_NOT_APPLICABLE}: the site is in {LIBRARY}"), (0, 1, 2), "v6e").ok is True
    assert compile_result(report("ok"), (0, 1, 2), "v6e").ok is True
    missing = compile_result(report("not run"), (0, 1, 2), "v6e")
    assert missing.ok is None and "tier 0 not run" in missing.why
    assert compile_result(report("error"), (0, 1, 2), "v6e").ok is None  # (errors come as findings)
    assert CompileResult.passed("v6e").ok is True


def test_library_site_names_the_module_only_when_every_call_is_elsewhere():
    library = {"lines": [13], "kernel": "_flash_attention_kernel", "kernel_module": LIBRARY,
               "site": ["/site-packages/jax/flash_attention.py", 758]}
    own = {"lines": [20], "kernel": "add_kernel", "kernel_line": 8}
    assert reach.library_site([library]) == f"{TIER0_NOT_APPLICABLE}: the site is in {LIBRARY}"
    assert reach.library_site([library, own]) is None
    assert reach.library_site([]) is None and reach.library_site(None) is None
    # a kernel of the file given to a library's pallas_call: the library file is named
    wrapped = {"lines": [13], "kernel": "body", "kernel_line": 5, "site": ["/lib/tokamax/pallas.py", 40]}
    assert reach.library_site([wrapped]) == f"{TIER0_NOT_APPLICABLE}: the site is in pallas.py"


def test_a_module_whose_package_rebinds_its_siblings_name_imports_as_in_its_package():
    """jax's megablox ``ops.py`` imports its sibling with ``from ...megablox import gmm as backend``; the
    package's ``__init__`` then rebinds ``gmm`` to ``ops.gmm``. Loaded on its own, the file got that
    function and failed at ``backend.gmm`` (PLS901 "AttributeError: AttributeError")."""
    report = _check("shadow/mblx/ops.py", (0, 1))
    assert not [f for f in report.findings if f.code == "PLS901"], report.findings


def test_an_exception_without_text_says_which_statement_raised_it_and_where():
    report = _check("empty_message.py", (0, 1))
    (failed,) = [f for f in report.findings if f.code == "PLS901"]
    assert "AttributeError: AttributeError" not in failed.message
    assert "raised with no message by `value = Forwarder().missing`" in failed.message
    assert "at line 9 (__getattr__)" in failed.message


# --------------------------------------------------------------------------- tune moves the user's arguments


def test_the_fields_of_a_library_config_the_file_builds_are_tunables():
    from pallasite.analysis.source import Source
    from pallasite.analysis.tunables import apply_config, find_tunables, kinds

    text = (DATA / "flash_blocksizes.py").read_text()
    tunables = {t.name: t for t in find_tunables(Source(text), "flash_blocksizes.py")}
    assert {"block_q", "block_k_major", "block_k", "block_b"} <= set(tunables)
    q = tunables["block_q"]
    assert (q.default, q.kind, q.callee, q.candidates) == (128, "call", "BlockSizes", (128, 256, 512))
    assert kinds([q]) == {"block_q": "call:BlockSizes"}
    (edit,) = apply_config([q], {"block_q": 512})
    line = text.splitlines()[edit.span.line]
    assert line[edit.span.column:edit.span.end_column] == "128" and "block_q=128" in line


def test_block_keywords_of_library_calls_are_tunables_and_other_literals_are_not():
    from pallasite.analysis.source import Source
    from pallasite.analysis.tunables import find_tunables

    text = '''
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.tpu.megablox import gmm
from mylib import BlockSizes


def mm(lhs, rhs, sizes):
    x = jnp.zeros((8, 128), dtype=jnp.float32)
    spec = pl.BlockSpec(block_shape=(8, 128))
    a = BlockSizes(block_q=256, block_b=1, causal=1)
    b = BlockSizes(block_q=512)
    c = Tiles(block_b=2)
    return gmm(lhs, rhs, sizes, tiling=(128, 256, 512), preferred_element_type=jnp.float32)
'''
    text = text.replace("from mylib import BlockSizes", "from mylib import BlockSizes, Tiles")
    found = {t.name: (t.default, t.callee) for t in find_tunables(Source(text), "k.py")}
    assert found == {"BlockSizes.block_b": (1, "BlockSizes"), "Tiles.block_b": (2, "Tiles"),
                     "tiling[0]": (128, "gmm"), "tiling[1]": (256, "gmm"), "tiling[2]": (512, "gmm")}
    # block_q is written in two calls of BlockSizes: the worker would move both, so neither is a tunable


def test_the_worker_changes_a_keyword_in_every_call_and_in_configs_built_at_import():
    import dataclasses
    import types

    from pallasite.runner.tune_ops import call_patches

    @dataclasses.dataclass(frozen=True)
    class BlockSizes:
        block_q: int
        block_k: int = 128

    def gmm(x, tiling=(128, 128, 128)):
        return tiling

    module = types.ModuleType("user")
    module.BlockSizes, module.gmm = BlockSizes, gmm
    module.SIZES = BlockSizes(block_q=128)
    patched = call_patches(module, "BlockSizes", {"block_q": 512, "BlockSizes.block_k": 256})
    assert patched["SIZES"] == BlockSizes(block_q=512, block_k=256)
    assert patched["BlockSizes"](block_q=64) == BlockSizes(block_q=512, block_k=256)
    assert patched["BlockSizes"].__name__ == "BlockSizes"  # every other attribute is the original's
    assert call_patches(module, "gmm", {"tiling[1]": 256})["gmm"](1, tiling=(8, 8, 8)) == (8, 256, 8)
    assert call_patches(module, "missing", {"x": 1}) == {}


@pytest.mark.slow  # two tunes of flash attention with tier-2 compiles: about a minute each here
@pytest.mark.parametrize("name", ["flash_wrapper.py", "flash_blocksizes.py"])
def test_tune_finds_a_configuration_of_the_library_kernel_the_compiler_accepts(name, tmp_path, capsys):
    """Before: "best: none", every configuration "not compiled for the chip: tier 0 not run"."""
    import json
    import shutil

    from pallasite.server.cli import main

    path = tmp_path / name
    shutil.copy(DATA / name, path)
    before = path.read_text()
    assert main(["tune", str(path), "--target", "v6e", "--verify", "0", "--no-store", "--apply"]) == 0
    out = capsys.readouterr().out
    assert "best: none" not in out and "the current configuration: compiled for v6e (tiers 0,1,2)" in out
    best = out[out.index("best: "):].splitlines()[0]
    assert "(compiled, not verified" in best and "block_q=512" in best  # the largest q block, by estimate
    after = path.read_text()
    assert after != before and ("block_q: int = 512" in after or "BlockSizes(block_q=512" in after)


def test_a_kernel_in_a_namespace_subpackage_imports_its_own_project():
    """tokamax's ``_src/ops/experimental/tpu/`` has no ``__init__.py``: its splash kernel's ``from
    tokamax._src... import base`` failed (PLS909 "No module named 'tokamax'")."""
    report = _check("nsroot/proj/sub/kern.py", (0, 1))
    assert not [f for f in report.findings if f.code in ("PLS909", "PLS901")], report.findings
    assert dict(report.kernels[0].tiers)[1] == "ok"
