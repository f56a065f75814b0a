"""Tier 1 and tier 2 share one lowering where libtpu describes the target (runner/tiers.compiler_tiers):
the entry is traced and lowered once, for the target topology's device, and tier 2 compiles that
module. The lowered module's hash (the key tier 2's verdict is stored under) must not depend on
whether tier 2 was asked in the same request: the editor asks tier 1 alone first for code it has
seen and looks tier 2 up by that hash."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("jax")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                reason="libtpu is not installed (pip install 'pallasite[tpu]')")

DATA = Path(__file__).parent / "data"


def _entry(fn, args, tiers):
    from pallasite.runner import tiers as tiers_mod

    entry = {"tiers": {}, "errors": []}
    tiers_mod.compiler_tiers(entry, fn, args, "v5e", tiers, {}, lambda *a, **k: None, "add",
                             lambda exc, tier: {"tier": tier, "message": str(exc)})
    return entry


def _add_module():
    spec = importlib.util.spec_from_file_location("add_ok_for_tiers", DATA / "lsp" / "add_ok.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiers_1_and_2_trace_the_entry_once_and_key_it_alike():
    module = _add_module()
    traced = []

    def entry(x, y):
        traced.append(1)
        return module.add(x, y)

    both = _entry(entry, module.example_inputs(), (1, 2))
    assert both["tiers"] == {"1": "ok", "2": "ok"}, both["errors"]
    assert len(traced) == 1  # tier 2 compiled tier 1's module; it traced and lowered a second time before
    assert both["mosaic_calls"] == 1 and both["memory"]["argument_size_in_bytes"] == 2 * 4096 * 512 * 4
    alone = _entry(entry, module.example_inputs(), (1,))
    assert alone["tiers"] == {"1": "ok"}
    assert alone["lowered_hash"] == both["lowered_hash"] and both["lowered_hash"].startswith("lowered:")


def test_a_wrapper_that_prints_with_jax_debug_print_compiles_for_tpu():
    """Tier 1 used to lower such a file for the CPU backend's callback and call it an error ("the
    platform for the specified backend cpu is different from the lowering platform tpu")."""
    from pallasite.engine.checker import CheckOptions
    from pallasite.engine.engine import check_paths

    report = check_paths([str(DATA / "tiers" / "debug_print_wrapper.py")], CheckOptions(target="v5e", tiers=(1, 2)))[0]
    assert [f.message for f in report.findings if f.severity == "error"] == []
    assert [dict(k.tiers) for k in report.kernels] == [{0: "not run", 1: "ok", 2: "ok", 3: "not run"}]
