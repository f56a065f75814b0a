"""The error catalog: complete against the code registry, well-formed, and its message patterns
recognise the real jax/libtpu messages recorded in tests/data/retrieval/messages.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pallasite.analysis.codes import CODES
from pallasite.knowledge import catalog
from pallasite.server.cli import main

MESSAGES = json.loads((Path(__file__).parent / "data" / "retrieval" / "messages.json").read_text())["messages"]

# probe name (tests/data/retrieval/probe_messages.py) -> the code the checker must report
EXPECTED_CODE = {
    "block_not_divisible": "PLS101", "index_map_arity": "PLS102", "index_map_results": "PLS102",
    "index_map_float": "PLS106", "cumsum": "PLS103", "sort": "PLS103", "store_shape": "PLS104",
    "store_dtype": "PLS104", "dimension_semantics_length": "PLS105", "in_specs_count": "PLS109",
    "out_specs_count": "PLS109", "kernel_arity": "PLS110", "kernel_returns_value": "PLS110",
    "smem_vector_load": "PLS108", "float64": "PLS107", "block_rank": "PLS112", "grid_not_int": "PLS113",
    "missing_api": "PLS111", "vmem_oom_scratch": "PLS201", "vmem_oom_blocks": "PLS201",
    "shape_cast": "PLS202", "unaligned_lane_offset": "PLS203", "int8_tiling": "PLS204",
    "python_if_on_program_id": "PLS006", "interpret_oob_read": "PLS302",
}


def test_every_registry_code_has_a_catalog_entry():
    missing = catalog.missing_codes()
    assert not missing, f"codes without a catalog entry in knowledge/catalog/*.toml: {missing}"


def test_catalog_has_no_codes_outside_the_registry():
    extra = sorted({e.code for e in catalog.all_entries()} - set(CODES))
    assert not extra, f"catalog entries for codes not in analysis/codes.py: {extra}"


@pytest.mark.parametrize("code", sorted(CODES))
def test_entry_is_complete(code):
    e = catalog.entry(code)
    assert e.title == CODES[code].title
    assert len(e.explanation.split()) >= 15, "explanation should be a few sentences"
    assert e.fix.strip() and e.recognised_by.strip()
    assert e.references, "every entry points at docs passages"
    assert (e.before is None) == (e.after is None), "before/after come in pairs"
    if e.tier in (1, 2) and not code.endswith("00") and code != "PLS205":
        assert e.patterns, "compiler-tier codes are recognised from the message"


@pytest.mark.parametrize("probe", sorted(EXPECTED_CODE))
def test_real_messages_are_recognised(probe):
    record = MESSAGES[probe]
    found = catalog.recognise(record["type"], record["message"], tier=record["tier"])
    assert found, f"no catalog pattern matches the {probe} message"
    assert found[0].code == EXPECTED_CODE[probe], [e.code for e in found]


def test_generic_codes_rank_after_specific_ones():
    found = [e.code for e in catalog.recognise("MosaicError", MESSAGES["shape_cast"]["message"], tier=2)]
    assert found[0] == "PLS202" and found[-1] == "PLS200", found  # the catch-all after every specific code


def test_explain_text_and_markdown():
    text = catalog.explain("PLS203")
    assert text.startswith("PLS203: Dynamic lane offset not provably aligned")
    assert "pl.multiple_of" in text and "guide/tiling#aligned-dynamic-slices" in text
    md = catalog.explain("pls203", markdown=True)
    assert md.startswith("### PLS203") and "```python" in md


def test_short_and_lowercase_codes_resolve():
    assert catalog.entry("201").code == "PLS201"
    assert catalog.entry(" pls001 ").code == "PLS001"


def test_unknown_code_suggests_close_matches():
    with pytest.raises(catalog.UnknownCode) as info:
        catalog.entry("PLS2O3")
    assert "PLS203" in info.value.suggestions
    assert "PLS2O3" in str(info.value)


def test_cli_explain(capsys):
    assert main(["explain", "PLS101"]) == 0
    out = capsys.readouterr().out
    assert "PLS101: Block shape not tileable on TPU" in out and "divisible by 8 and 128" in out


def test_cli_explain_unknown_code_exits_2(capsys):
    assert main(["explain", "PLS1O1"]) == 2
    err = capsys.readouterr().err
    assert "unknown finding code" in err and "PLS101" in err


def test_cli_explain_list(capsys):
    assert main(["explain", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(code in out for code in CODES)


def test_malformed_catalog_file_is_reported(tmp_path, monkeypatch):
    (tmp_path / "bad.toml").write_text('[PLS001]\nexplanation = "x"\n')
    monkeypatch.setattr(catalog, "CATALOG_DIR", tmp_path)
    catalog._load.cache_clear()
    try:
        with pytest.raises(catalog.CatalogError, match=r"bad.toml \[PLS001\]: 'recognised_by' is missing"):
            catalog.all_entries()
    finally:
        monkeypatch.undo()
        catalog._load.cache_clear()
