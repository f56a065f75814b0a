"""Tiers 1 and 3 run the user's file exactly as written, and a failed entry is located by a second
run (runner/carried_pass.py).

Before, the checked run itself executed the file with its literals replaced by ``OInt``/``OFloat``:
``type(ROWS) is int`` was False, ``HALF * 2 is LANES`` was False, ``type(3.0)`` was ``OFloat``, so
``tests/data/as_written/type_dispatch.py`` raised TypeError in tier 1 (its block shape differed
too). A kernel's own check of its block sizes (``if bkv % bkv_compute: raise ...``) was found at
the ``raise`` (``own_check.py``; JAXBench's splash and flash attention with a block size changed in
their ``TUNED_PARAMS``); now at the literals that fed the check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "as_written"
SEED = Path("/work/seed/accelerator-agents/JAXBench/benchmark")


def _check(path: str, tiers: tuple[int, ...]):
    from pallasite.analysis import tier0
    from pallasite.engine.findings import locate
    from pallasite.engine.sources import sources_for
    from pallasite.runner import checks
    from pallasite.wire.messages import CheckParams

    text = Path(path).read_text()
    result = checks.handle_check(CheckParams(source=sources_for(path), chip="v6e", tiers=tiers))
    return text, result, locate.locate_result(result, text, tier0.analyze(text, path, target="v6e"), "v6e")


def _marked(text: str, mark: str = "# origin") -> int:
    [line] = [i for i, t in enumerate(text.splitlines()) if t.rstrip().endswith(mark)]
    return line


def test_type_identity_repr_and_dispatch_are_plain_python_in_tiers_1_and_3():
    _, result, located = _check(str(DATA / "type_dispatch.py"), (1, 3))
    [entry] = result.entries
    assert entry.state(1).display() == "ok" and entry.state(3).display() == "ok", [f.message for f in located.findings]
    assert not [f for f in located.findings if f.severity == "error"]
    assert entry.reached[0].buffers[0].shape == (8, 128)


def test_the_type_fixture_fails_when_the_program_is_changed():
    """The fixture can fail: run with carried literals (what tiers 1 and 3 did before), its own
    questions answer otherwise and it raises."""
    from pallasite.runner.loader import user_module

    with user_module(str(DATA / "type_dispatch.py"), carry_origins=True) as module:
        with pytest.raises(TypeError, match="plain numbers"):
            module.block_shape()
    with user_module(str(DATA / "type_dispatch.py")) as module:
        assert module.block_shape() == (8, 128)


def test_a_locating_run_that_took_another_branch_places_nothing():
    """The carried run builds a (8, 128) block from a 128 that never ran in the checked run: its
    places are not believed (the blocks differ), the finding stays at the BlockSpec."""
    text, _, located = _check(str(DATA / "dispatch_mistake.py"), (1,))
    [finding] = [f for f in located.findings if f.code == "PLS101"]
    never = _marked(text, "# not the place: this 128 never ran")
    assert finding.span.line != never
    assert "pl.BlockSpec" in text.splitlines()[finding.span.line]


def test_a_kernels_own_check_lands_on_the_literals_that_fed_it():
    text, result, located = _check(str(DATA / "own_check.py"), (1,))
    [finding] = [f for f in located.findings if f.severity == "error"]
    lines = text.splitlines()
    assert finding.code == "PLS100" and "bkv=512 must be a multiple of bkv_compute=384" in finding.message
    assert finding.span.line == _marked(text) and lines[finding.span.line][finding.span.column:finding.span.end_column] == "512"
    raise_line = next(i for i, t in enumerate(lines) if "raise ValueError" in t)
    other = _marked(text, "# fed the check")
    assert any(r.span.line == raise_line and "the check that rejected bkv = 512" in r.message for r in finding.related)
    assert any(r.span.line == other and "bkv_compute = 384" in r.message for r in finding.related)
    assert any("reached through this call" in r.message and "make_kernel(sizes)(q, k)" in lines[r.span.line]
               for r in finding.related)  # the path the values took
    [record] = result.entries[0].errors
    assert {c.name: c.value for c in record.checked} == {"bkv": 512, "bkv_compute": 384}


def _mutated(tmp_path: Path, task: str, old: str, new: str) -> tuple[str, int]:
    source = SEED / task / "optimized.py"
    if not source.exists():
        pytest.skip("JAXBench is not here")
    text = source.read_text()
    assert text.count(old) == 1
    path = tmp_path / f"{task}.py"
    path.write_text(text.replace(old, new))
    return str(path), text[:text.index(old)].count("\n")


@pytest.mark.parametrize("task, old, new, literal, said", [
    ("4p_Sparse_Attention", "'block_kv_compute': 1024,", "'block_kv_compute': 1000,", "1000",
     "bkv=2048 must be a multiple of bkv_compute=1000"),
    ("1p_Flash_Attention", "'block_k': 1024,", "'block_k': 768,", "768", "block_k=768 should divide block_k_major=2048"),
])
def test_jaxbench_attention_checks_land_on_the_tuned_literal(tmp_path, task, old, new, literal, said):
    path, line = _mutated(tmp_path, task, old, new)
    text, _, located = _check(path, (1,))
    errors = [f for f in located.findings if f.severity == "error" and said in f.message]
    assert errors
    for finding in errors:
        assert finding.span.line == line
        assert text.splitlines()[line][finding.span.column:finding.span.end_column] == literal
        assert any("the check that rejected" in r.message for r in finding.related)


def test_vmem_exhausted_by_an_untiled_contraction_dim_lands_on_the_blockspec_that_keeps_it_whole():
    """Before, the finding went to BLOCK_N = 256 (the largest block's other dim, the only one with a
    literal); K = 32768 comes from x.shape, so the place is the ``k`` of the BlockSpec."""
    from pallasite.runner.tiers import tier2_unavailable

    if tier2_unavailable("v6e"):
        pytest.skip("tier 2 needs libtpu")
    text, _, located = _check(str(DATA / "untiled_k.py"), (1, 2))
    [finding] = [f for f in located.findings if f.code == "PLS201"]
    line = _marked(text)
    assert finding.span.line == line
    assert text.splitlines()[line][finding.span.column:finding.span.end_column] == "k"
    assert "keeps dim 0 whole" in finding.message


def test_an_output_aliased_to_an_input_of_another_dtype_lands_on_the_alias_entry():
    """Before, at the store the lowering rejects (floats into floats: the store's own choice); then at the
    bfloat16 written in out_shape; issue 50: at the alias entry that joins the f32 input's buffer to the
    bfloat16 output, with the out_shape dtype and the store related."""
    text, _, located = _check(str(DATA / "alias_dtype.py"), (1,))
    [finding] = [f for f in located.findings if f.code == "PLS104"]
    line = _marked(text)
    assert finding.span.line == line
    assert text.splitlines()[line][finding.span.column:finding.span.end_column] == "1: 0"
    assert "input 1 (float32) is aliased to output 0 here" in finding.message
    dtype_line = next(i for i, t in enumerate(text.splitlines()) if "jnp.bfloat16)," in t)
    assert any(r.span.line == dtype_line and "output 0's dtype is set here" in r.message for r in finding.related)
    store_line = next(i for i, t in enumerate(text.splitlines()) if "o_ref[...] =" in t)
    assert any(r.span.line == store_line for r in finding.related)


def test_an_alias_of_the_right_buffer_declared_with_another_dtype_is_said_at_the_dtype():
    """Before: PLS100 at the pallas_call (jax's ValueError names no line of the alias); issue 50: at the alias
    entry; issue 57: the alias joins two arrays of one shape, so the declared dtype is the odd one: there, with
    the alias entry related."""
    text, _, located = _check(str(DATA / "alias_mismatch.py"), (1,))
    [finding] = [f for f in located.findings if f.severity == "error"]
    assert (finding.code, finding.span.line) == ("PLS117", _marked(text))
    assert text.splitlines()[finding.span.line][finding.span.column:finding.span.end_column] == "jnp.bfloat16"
    assert "declare the output with the input's dtype" in finding.message
    entry_line = next(i for i, t in enumerate(text.splitlines()) if "input_output_aliases={1: 0}" in t)
    assert any(r.span.line == entry_line and "aliased to output 0 here" in r.message for r in finding.related)


def test_an_alias_of_the_wrong_input_is_said_at_its_entry_with_the_declaration_related():
    """The shapes differ: the entry names the wrong buffer, so it is the odd one."""
    text, _, located = _check(str(DATA / "alias_wrong_input.py"), (1,))
    [finding] = [f for f in located.findings if f.severity == "error"]
    assert (finding.code, finding.span.line) == ("PLS117", _marked(text))
    dtype_line = next(i for i, t in enumerate(text.splitlines()) if "jnp.float32)," in t and "out_shape" in t)
    assert any(r.span.line == dtype_line and "output 0 is declared here" in r.message for r in finding.related)


def test_a_float_store_into_a_narrower_unaliased_output_stays_at_the_store(tmp_path):
    """Without the alias the same store is the kernel's own choice (a missing cast): it stays there."""
    text = (DATA / "alias_dtype.py").read_text().replace("        input_output_aliases={1: 0},  # origin\n", "")
    path = tmp_path / "no_alias.py"
    path.write_text(text)
    _, _, located = _check(str(path), (1,))
    [finding] = [f for f in located.findings if f.code == "PLS104"]
    assert "o_ref[...] =" in text.splitlines()[finding.span.line]


def test_a_kernel_closing_over_an_array_lands_on_its_read_in_the_kernel():
    """Before, at the pallas_call (jax names the kernel's def); the kernel's read of the captured
    array is what must change, where the array is made is related."""
    text, _, located = _check(str(DATA / "captured_array.py"), (1,))
    [finding] = [f for f in located.findings if f.severity == "error"]
    lines = text.splitlines()
    assert "captures constants" in finding.message
    read = next(i for i, t in enumerate(lines) if "* scale[None, :]" in t)
    assert finding.span.line == read and lines[read][finding.span.column:finding.span.end_column] == "scale"
    assert any(r.span.line == _marked(text) and "scale is made here, outside the kernel" in r.message
               for r in finding.related)


def test_a_tiling_error_in_a_library_kernel_lands_on_the_literal_of_this_file():
    """jax's megablox gmm builds its BlockSpec from the file's tk = 96; before, with no pallas_call
    of its own in the file, the finding was at line 1."""
    text, _, located = _check(str(DATA / "library_tiles.py"), (1,))
    [finding] = [f for f in located.findings if f.code == "PLS101"]
    line = _marked(text)
    assert finding.span.line == line
    assert text.splitlines()[line][finding.span.column:finding.span.end_column] == "96"
    call = next(i for i, t in enumerate(text.splitlines()) if "return megablox_gmm(" in t)
    assert any(r.span.line == call for r in finding.related)


def test_an_alias_of_a_later_output_is_read_and_said_at_its_dtype():
    """jax writes ``output[1]`` for any output but the first: before, that message was not read, and the finding
    stayed where jax's trace left it."""
    text, _, located = _check(str(DATA / "alias_second_output.py"), (1,))
    [finding] = [f for f in located.findings if f.severity == "error"]
    assert (finding.code, finding.span.line) == ("PLS117", _marked(text))
    assert text.splitlines()[finding.span.line][finding.span.column:finding.span.end_column] == "jnp.int32"
    assert "output 1 is declared int32[64,128] but aliased to input 1 (float32[64,128])" in finding.message


def test_an_alias_whose_input_is_an_expression_is_read_through_its_output(tmp_path):
    """gdn decode's ``6 + n_b + n_gate: 1``: the key is no constant, but an output has one alias, so the entry
    for output 1 is that one (before: said where jax's trace left it, the entry unread)."""
    text = (DATA / "alias_second_output.py").read_text()
    path = tmp_path / "alias_expression_key.py"
    path.write_text(text.replace("input_output_aliases={1: 1},", "input_output_aliases={n_x + 0: 1},")
                    .replace("    spec = pl.BlockSpec", "    n_x = 1\n    spec = pl.BlockSpec"))
    text, _, located = _check(str(path), (1,))
    [finding] = [f for f in located.findings if f.severity == "error"]
    assert (finding.code, finding.span.line) == ("PLS117", _marked(text))
    assert text.splitlines()[finding.span.line][finding.span.column:finding.span.end_column] == "jnp.int32"
    entry_line = next(i for i, t in enumerate(text.splitlines()) if "n_x + 0: 1" in t)
    assert any(r.span.line == entry_line for r in finding.related)
