"""The site rules of the public mutation corpus (benchmarks/mutation_rules.py) on a small real kernel file:
each class finds the sites it should (and not the ones it should not), every mutant parses and keeps the
line count, the choice is a stable prefix order, and the scoring counts what its doc says."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import mutation_corpus_public as corpus  # noqa: E402
import mutation_rules as rules  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "mutation_rules" / "tiled.py"


@pytest.fixture(scope="module")
def text() -> str:
    return FIXTURE.read_text()


def line_of(text: str, snippet: str) -> int:
    hits = [i for i, line in enumerate(text.splitlines(), 1) if snippet in line]
    assert len(hits) == 1, (snippet, hits)
    return hits[0]


def test_every_class_finds_the_sites_it_should(text):
    found = rules.sites(text)
    lines = {cls: sorted(s.line for s in found[cls]) for cls in rules.CLASSES}
    out_spec = line_of(text, "out_specs=pl.BlockSpec((BM, BN)")
    assert lines["index-map-swap"] == [out_spec]  # the two in_specs maps ignore one of their first two indices
    assert len(found["block-misaligned"]) == 8  # 2 entries of 4 tuple BlockSpecs; the ANY one has no shape
    assert lines["grid-past-end"] == [line_of(text, "grid=(m // BM")] * 3 + [line_of(text, "grid=(idx.shape[0],)")]
    assert len(found["out-shape-dtype"]) == 2
    assert lines["scratch-shrunk"] == [line_of(text, "pltpu.VMEM((BM, BN)"), line_of(text, "pltpu.VMEM((8, 128)")]
    assert lines["parallel-reduction"] == [line_of(text, 'dimension_semantics=("parallel", "parallel", "arbitrary")')]
    assert lines["dma-past-end"] == [line_of(text, "pages_hbm.at[idx_ref[i]]")]
    # the gather kernel's output is handed to a helper that stores it: removing no statement leaves it unwritten
    assert lines["output-unwritten"] == [line_of(text, "o_ref[...] = acc_ref[...].astype")]
    init = line_of(text, "acc_ref[...] = jnp.zeros")
    assert lines["acc-init-removed"] == lines["acc-init-accumulates"] == [init]
    assert found["acc-init-removed"][0].true_lines == (init - 2, init - 1, init)  # the store, the pl.when, the def
    assert len(found["when-inverted"]) == 2


def test_the_edits_are_the_bugs_the_classes_name(text):
    made = dict(rules.mutants("fixture", text, cap=9))
    new_lines = {s.cls: new.splitlines()[s.line - 1] for s, new in made.items()}
    assert '("parallel", "parallel", "parallel")' in new_lines["parallel-reduction"]
    assert "acc_ref[...] += jnp.zeros(" in new_lines["acc-init-accumulates"]
    assert new_lines["acc-init-removed"].strip() == "pass"
    assert "jnp.logical_not(" in new_lines["when-inverted"]
    assert "(idx_ref[i]) + 1" in new_lines["dma-past-end"]


def test_every_mutant_parses_keeps_the_line_count_and_changes_something(text):
    made = rules.mutants("fixture", text, cap=rules.CAP)
    assert {s.cls for s, _ in made} == set(rules.CLASSES)
    for site, new in made:
        ast.parse(new)
        assert new != text and new.count("\n") == text.count("\n"), site.what
        changed = [i for i, (a, b) in enumerate(zip(text.splitlines(), new.splitlines()), 1) if a != b]
        assert changed and set(changed) <= {e.line for e in site.edits} | set(range(site.line, site.line + 8)), site.what


def test_no_parallel_site_without_an_accumulator_on_that_axis(text):
    no_init = text.replace("@pl.when(k == 0)", "@pl.when(k == 1)")
    assert rules.sites(no_init)["parallel-reduction"] == []
    assert rules.sites(no_init)["acc-init-removed"] == []


def test_the_choice_is_a_stable_prefix(text):
    found = rules.sites(text)["block-misaligned"]
    two = rules.choose("fixture", "block-misaligned", found, 2)
    assert two == rules.choose("fixture", "block-misaligned", list(reversed(found)), 2)
    assert rules.choose("fixture", "block-misaligned", found, 1) == two[:1]
    assert rules.choose("other-file", "block-misaligned", found, 8) != rules.choose("fixture", "block-misaligned", found, 8)


def finding(code: str, line: int, severity: str = "error") -> dict:
    return {"code": code, "line": line, "severity": severity, "message": "m", "tier": 0}


def test_the_scoring():
    base = [finding("PLS200", 50)]
    # an error the base has at the same line and code does not catch; a new one does, at the line or not
    assert rules.score("grid-past-end", (10,), base, [finding("PLS200", 50)])[:2] == (False, False)
    assert rules.score("grid-past-end", (10,), base, [finding("PLS020", 11)])[:2] == (True, True)
    assert rules.score("grid-past-end", (10,), base, [finding("PLS302", 30)])[:2] == (True, False)
    # warnings catch only when the class expects them; could-not-check codes never
    assert rules.score("parallel-reduction", (10,), [], [finding("PLS016", 10, "warning")])[:2] == (True, True)
    assert rules.score("grid-past-end", (10,), [], [finding("PLS016", 10, "warning")])[:2] == (False, False)
    assert rules.score("grid-past-end", (10,), [], [finding("PLS903", 10, "warning"), finding("PLS306", 10, "warning")])[0] is False


def test_corpus_selection_and_harness_headers(tmp_path, monkeypatch):
    kernels = tmp_path / "tpu_inference" / "kernels"
    (kernels / "collectives").mkdir(parents=True)
    plain = "import jax\nfrom jax.experimental import pallas as pl\n\ndef f(x):\n    return pl.pallas_call(k)(x)\n"
    (kernels / "plain.py").write_text(plain)
    (kernels / "needs_pkg.py").write_text("from tpu_inference.kernels import util\n" + plain)
    (kernels / "plain_test.py").write_text(plain)
    (kernels / "collectives" / "ring.py").write_text(plain)
    assert [p.name for p in corpus.select("tpu-inference", tmp_path)] == ["plain.py"]
    harnesses = tmp_path / "harnesses"
    harnesses.mkdir()
    (harnesses / "two.py").write_text("# harness for: tokamax:a.py tpu-inference:b.py\nPALLASITE_ENTRY = 'f'\n")
    (harnesses / "none.py").write_text("# a helper, no header\n")
    monkeypatch.setattr(corpus, "HARNESSES", harnesses)
    assert sorted(corpus.harnesses()) == ["tokamax:a.py", "tpu-inference:b.py"]


def test_corpus_v3_sites_lie_on_the_reach_and_repeat_no_v2_mutant(text):
    import mutation_rules_v2 as v2
    import mutation_rules_v3 as v3

    every = v2.sites(text)
    reach = {s.line for sites in every.values() for s in sites[::2]}  # every other site's line ran
    found = v3.candidates("jax-ops:tiled.py", text, reach, v2_corpus=True)
    taken = {(s.cls, s.line, s.col) for s, _ in v2.mutants("jax-ops:tiled.py", text, 1)}
    chosen = [s for sites in found.values() for s in sites]
    assert chosen and all(any(e.line in reach for e in s.edits) for s in chosen)
    assert not taken & {(s.cls, s.line, s.col) for s in chosen}
    outside = [s for sites in every.values() for s in sites if not any(e.line in reach for e in s.edits)]
    assert outside and not {(s.cls, s.line) for s in outside} & {(s.cls, s.line) for s in chosen}
    assert v3.candidates("jax-ops:tiled.py", text, set(), v2_corpus=True) == {c: [] for c in v3.CLASSES}
    assert len(v3.candidates("pytorch-xla:tiled.py", text, reach, v2_corpus=False)["block-misaligned"]) >= \
        len(found["block-misaligned"])  # a new codebase has no v2 mutant to leave out


def test_corpus_v3_cap_is_the_smallest_that_makes_enough(monkeypatch):
    import mutation_rules_v3 as v3

    per_file = [{"a": list(range(5)), "b": [1]}] * 10  # cap 2: 30 mutants, cap 3: 40, cap 4: 50
    monkeypatch.setattr(v3, "AT_LEAST", 35)
    assert v3.cap_for(per_file) == 3
    monkeypatch.setattr(v3, "AT_LEAST", 30)
    assert v3.cap_for(per_file) == 2
    monkeypatch.setattr(v3, "AT_LEAST", 1000)
    assert v3.cap_for(per_file) == 4


def test_corpus_v3_harnesses_name_their_file_and_hold_a_task_with_a_reference():
    import mutation_corpus_v3 as v3

    found = v3.harnesses()
    assert len(found) >= 15
    for file_id, (harness, origin) in found.items():
        assert file_id.split(":")[0] in v3.CODEBASES, (file_id, origin)
        names = {n.name for n in ast.parse(harness).body if isinstance(n, ast.FunctionDef)}
        assert {"example_inputs", "reference"} <= names, origin
        entry = next(n.value.value for n in ast.parse(harness).body if isinstance(n, ast.Assign)
                     and getattr(n.targets[0], "id", "") == "PALLASITE_ENTRY")
        assert entry in names, origin


def test_corpus_v4_repeats_no_v3_mutant_and_keeps_its_own_order(text):
    import mutation_rules_v2 as v2
    import mutation_rules_v3 as v3
    import mutation_rules_v4 as v4

    every = v2.sites(text)
    reach = {s.line for sites in every.values() for s in sites}
    earlier = v3.candidates("jax-ops:tiled.py", text, reach, v2_corpus=True)
    v3_taken = {(cls, s.line, s.col) for cls, sites in earlier.items() for s in sites[:v4.V3_CAP]}
    found = v4.candidates("jax-ops:tiled.py", text, reach)
    chosen = {(cls, s.line, s.col) for cls, sites in found.items() for s in sites}
    assert v3_taken and chosen and not v3_taken & chosen
    assert chosen | v3_taken == {(cls, s.line, s.col) for cls, sites in earlier.items() for s in sites}
    new = v4.candidates("tops:tiled.py", text, reach)  # a new codebase: nothing of v2 or v3 to leave out
    assert sum(map(len, new.values())) > sum(map(len, found.values()))
    assert v4.candidates("tops:tiled.py", text, set()) == {c: [] for c in v4.CLASSES}


def test_corpus_v4_cap_is_its_own_not_v3s(monkeypatch):
    import mutation_rules_v4 as v4

    per_file = [{"a": list(range(9))}] * 10  # cap 4: 40 mutants, cap 6: 60, cap 8: 80
    monkeypatch.setattr(v4, "AT_LEAST", 55)
    assert v4.cap_for(per_file) == 6
    monkeypatch.setattr(v4, "AT_LEAST", 1000)
    assert v4.cap_for(per_file) == 8


def test_corpus_v4_harnesses_name_their_file_and_hold_a_task_with_a_reference():
    import mutation_corpus_v4 as v4

    found = v4.harnesses()
    assert {f.split(":")[0] for f in found} == {"tops", "recurrentgemma"}
    for file_id, (harness, origin) in found.items():
        names = {n.name for n in ast.parse(harness).body if isinstance(n, ast.FunctionDef)}
        assert {"example_inputs", "reference"} <= names, origin
