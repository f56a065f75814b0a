"""The catalog and the locator name the same code for every real compiler message we recorded.

Both read the one compiler-message table (``knowledge/compiler_messages.toml``:
``catalog.recognise`` for explain/hover and the LLM fixer, ``engine/findings/classify.py``'s ``classify``
for a check's findings; tests/test_compiler_messages.py shows they follow the same rows). What can
still differ is what the locator decides besides the table: VMEM figures the worker parsed, the
x64 flag, call-arity and attribute errors by exception type, the catch-alls by who raised. So
for every real message:

- tests/data/retrieval/messages.json: messages probed from jax/libtpu (tiers 1-3), turned into the
  record the worker would make with runner/errors.py's own helpers;
- tests/data/compiler/records.json: the worker's real records for the compiler corpus, replayed
  whole (so flags the worker sets, such as ``x64``, count as they do in a check).

Records the locator classifies by stage rather than by message (``import``/``task``: PLS901/PLS905)
are left out: there the catalog has nothing to say; so are a kernel's own failed ``assert``s (the user's words). Tier 3 records get their code in the worker
(``runner/tier3/interpret_records.py``); those are compared when jax is importable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pallasite.knowledge import catalog
from pallasite.runner import errors
from pallasite.engine.findings import classify

DATA = Path(__file__).parent / "data"
MESSAGES = json.loads((DATA / "retrieval" / "messages.json").read_text())["messages"]
RECORDS = json.loads((DATA / "compiler" / "records.json").read_text())["cases"]

# Disagreements that sit in the locator (engine/findings/classify.py, owned by another engineer), reported to
# the lead. strict: once the locator is fixed the test XPASSes and fails, so the entry gets removed.
LOCATOR_GAPS: dict[str, str] = {}  # case -> why the locator disagrees (xfail, strict)


def _from_probe(name: str) -> tuple[dict, int]:
    """The raw record the worker would make from a probed message (runner/errors.py's helpers)."""
    probe = MESSAGES[name]
    message = probe["message"]
    rec = {"stage": f"tier {probe['tier']}", "type": probe["type"], "sentence": errors.sentence(message),
           "message": message, "vmem": errors.vmem_figures(message), "mosaic_codes": errors.mosaic_codes(message)}
    return rec, int(probe["tier"])


def _cases():
    for name in sorted(MESSAGES):
        yield f"messages/{name}"
    for name, result in sorted(RECORDS.items()):
        recs = list(result.get("errors") or ()) + [r for e in result.get("entries") or () for r in e.get("errors") or ()]
        for i, rec in enumerate(recs):
            if str(rec.get("stage") or "").startswith("tier") and rec.get("type") != "AssertionError":
                yield f"records/{name}/{i}"  # a kernel's own ``assert`` says the user's words, not the compiler's


def _record(case: str) -> tuple[dict, int]:
    kind, name, *rest = case.split("/")
    if kind == "messages":
        return _from_probe(name)
    result = RECORDS[name]
    recs = list(result.get("errors") or ()) + [r for e in result.get("entries") or () for r in e.get("errors") or ()]
    rec = recs[int(rest[0])]
    return rec, int(rec.get("tier") or result["tiers"][0])


def _locator_code(rec: dict, tier: int) -> str:
    if tier == 3 and "code" not in rec:
        pytest.importorskip("jax")  # tier 3 codes are given by the worker's interpreter records
        from pallasite.runner.tier3 import interpret_records

        rec = interpret_records.exception_record(RuntimeError(rec["message"]), None,
                                                 interpret_records.CallSites("", "kernel.py"), "kernel.py")
    return classify.classify(rec, tier)


def _cases_marked():
    for case in _cases():
        gap = LOCATOR_GAPS.get(case)
        yield pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=gap)) if gap else case


@pytest.mark.parametrize("case", list(_cases_marked()))
def test_catalog_and_locator_name_the_same_code(case):
    rec, tier = _record(case)
    located = _locator_code(rec, tier)
    text = f"{rec.get('sentence') or ''}\n{rec.get('message') or ''}"
    recognised = [e.code for e in catalog.recognise(str(rec.get("type") or ""), text, tier=tier)]
    assert recognised, f"{case}: the locator says {located}, no catalog pattern matches {text[:200]!r}"
    assert recognised[0] == located, f"{case}: catalog {recognised} vs locator {located}: {text[:300]!r}"


def test_the_comparison_covers_every_recorded_tier_message():
    cases = list(_cases())
    assert len([c for c in cases if c.startswith("messages/")]) == len(MESSAGES) >= 25
    assert len([c for c in cases if c.startswith("records/")]) >= 25
    assert set(LOCATOR_GAPS) <= set(cases), "a known gap names a case that no longer exists"
