"""The one compiler-message table (knowledge/compiler_messages.toml): read by both the checker's
locator (engine/findings/classify.py) and the error catalog, well-formed, and the only place patterns live."""

from __future__ import annotations

import pytest

from pallasite.analysis.codes import CODES
from pallasite.engine.findings import classify
from pallasite.knowledge import catalog, compiler_messages


@pytest.fixture
def table_file(tmp_path, monkeypatch):
    """Point the table at a file of the test's own (and reload what was read from it)."""
    path = tmp_path / "compiler_messages.toml"
    monkeypatch.setattr(compiler_messages, "TABLE_FILE", path)
    catalog._load.cache_clear()
    yield path
    monkeypatch.undo()
    catalog._load.cache_clear()


def test_the_shipped_table_is_well_formed_and_ordered_as_documented():
    rows = compiler_messages.table()
    codes = [r.code for r in rows]
    assert len({(r.code, r.requires) for r in rows}) == len(rows) and set(codes) <= set(CODES)
    assert codes[0] == "PLS201"  # VMEM out-of-memory first: its messages name other things too
    assert codes.index("PLS204") < codes.index("PLS103") and codes.index("PLS203") < codes.index("PLS103")
    assert {r.code for r in rows if 3 in r.tiers and r.code.startswith("PLS3")} == {"PLS300", "PLS301", "PLS302"}


def test_the_locator_and_the_catalog_read_the_same_rows(table_file):
    table_file.write_text(
        '[[message]]\ncode = "PLS202"\ntiers = [1, 2]\npatterns = ["frobnicated the vregs"]\n'
        '[[message]]\ncode = "PLS204"\ntiers = [2]\npatterns = ["frobnicated"]\n'
        '[[message]]\ncode = "PLS200"\ntiers = [1, 2]\npatterns = ["Mosaic failed"]\n')
    rec = {"stage": "tier 2", "type": "MosaicError", "message": "Mosaic failed: frobnicated the vregs"}
    assert classify.classify(rec, 2) == "PLS202"  # the first row wins, the catch-all comes last
    assert [e.code for e in catalog.recognise("MosaicError", rec["message"], tier=2)] == ["PLS202", "PLS204", "PLS200"]
    assert catalog.entry("PLS204").patterns == ("frobnicated",)
    only_204 = {"stage": "tier 1", "type": "ValueError", "message": "frobnicated"}
    assert classify.classify(only_204, 1) == "PLS100"  # PLS204's row reads tier-2 messages only
    assert [e.code for e in catalog.recognise("ValueError", "frobnicated", tier=1)] == []
    assert classify.classify({"stage": "tier 2", "type": "MosaicError", "message": "Mosaic failed"}, 2) == "PLS200"


def test_a_row_that_requires_x64_applies_to_records_that_say_so_and_to_bare_messages():
    text = "failed to legalize operation 'func.return' that was explicitly marked illegal: (i64) -> ()"
    assert compiler_messages.codes_for(text, 2, {"x64"})[0] == "PLS107"
    assert "PLS107" not in compiler_messages.codes_for(text, 2, set())  # x64 was off: not x64's doing
    assert compiler_messages.codes_for(text, 2)[0] == "PLS107"  # flags not known (a pasted message)
    assert catalog.recognise("MosaicError", text, tier=2)[0].code == "PLS107"
    rec = {"stage": "tier 2", "type": "MosaicError", "message": text}
    assert classify.classify(rec, 2) == "PLS200"
    assert classify.classify({**rec, "x64": True}, 2) == "PLS107"


@pytest.mark.parametrize("text, complaint", [
    ('[[message]]\ncode = "PLS999"\ntiers = [1]\npatterns = ["x"]\n', "'PLS999' is not a finding code"),
    ('[[message]]\ncode = "PLS101"\ntiers = [1]\npatterns = ["x"]\n'
     '[[message]]\ncode = "PLS101"\ntiers = [2]\npatterns = ["y"]\n', "row 2 (PLS101): PLS101 has a row already"),
    ('[[message]]\ncode = "PLS101"\ntiers = [1]\npatterns = ["(unclosed"]\n', "row 1 (PLS101): bad pattern"),
    ('[[message]]\ncode = "PLS101"\ntiers = [1]\npatterns = []\n', "needs non-empty 'patterns'"),
    ('[[message]]\ncode = "PLS101"\ntiers = [1]\npatterns = ["x"]\nseverity = "error"\n', "unknown keys ['severity']"),
    ('[[message]]\ncode = "PLS101"\ntiers = [1]\npatterns = ["x"]\nrequires = "x32"\n', "requires = 'x32'; known flags: x64"),
])
def test_a_malformed_table_is_reported_with_its_row(table_file, text, complaint):
    table_file.write_text(text)
    with pytest.raises(compiler_messages.MessageTableError, match=complaint.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        compiler_messages.table()
    with pytest.raises(catalog.CatalogError):  # the catalog says so too instead of crashing
        catalog.recognise("ValueError", "x", tier=1)


def test_patterns_in_a_catalog_entry_are_refused(tmp_path, monkeypatch):
    (tmp_path / "tier1.toml").write_text(
        '[PLS101]\nrecognised_by = "r"\nexplanation = "e"\nfix = "f"\npatterns = ["divisible by 8"]\n')
    monkeypatch.setattr(catalog, "CATALOG_DIR", tmp_path)
    catalog._load.cache_clear()
    try:
        with pytest.raises(catalog.CatalogError, match=r"tier1.toml \[PLS101\]: 'patterns' belong in the one "
                                                       r"compiler-message table, compiler_messages.toml"):
            catalog.all_entries()
    finally:
        monkeypatch.undo()
        catalog._load.cache_clear()
