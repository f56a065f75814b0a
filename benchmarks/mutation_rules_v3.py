"""Site rules of the third public mutation corpus (issue 57): corpus v2's fifteen classes, unchanged
(``benchmarks/mutation_rules_v2.py``), on the lines a file's own task runs, none of corpus v2's mutants again.

Written and committed before any mutant of this corpus was checked (``benchmarks/mutation_rules_2026-12-07_v3.md``
says when). Only Python's ``ast`` reads the files for sites; which lines run comes from jax alone
(``benchmarks/mutation_oracle.py``: the unmutated file with its harness, its entry traced by ``jax.make_jaxpr`` on
abstract inputs, the file's lines recorded as they run; nothing of pallasite but the chip answers).

Which sites:

1. every site of corpus v2's classes (``mutation_rules_v2.sites``) whose edited lines include a line that ran
   while jax traced the unmutated file's task (its *reach*), and whose edit keeps the line count, changes the text
   and parses (v2's rules raised on such a site; at v2's cap none was chosen). A file whose task does not trace
   has no site;
2. not one of corpus v2's 304 mutants (same file id, class, line and column; v2's choice at ``--cap 1``);
3. per file and class at most ``cap`` of them, the smallest sha256 of ``"v3|{file id}|{class}|{line}|{col}"``;
   ``cap`` is the smallest of ``CAPS`` that gives the corpus at least ``AT_LEAST`` mutants (the largest when none
   does), fixed once the reach is known and before any mutant is checked.

Scoring (``score``, ``verified``): corpus v2's, unchanged; chips as there (v5p for ``parallel-reduction``).
"""

from __future__ import annotations

import hashlib

import mutation_rules as v1
import mutation_rules_v2 as v2
from mutation_rules import Site

CAPS = (2, 3, 4)
CAP = CAPS[-1]
AT_LEAST = 300
CLASSES = v2.CLASSES
TARGETS = v2.TARGETS
NEVER_CATCH = v2.NEVER_CATCH
RUNTIME_WARNINGS = v2.RUNTIME_WARNINGS
EXPECTED_WARNINGS = v2.EXPECTED_WARNINGS
score = v2.score
verified = v2.verified


def candidates(file_id: str, text: str, reach: set[int] | None, v2_corpus: bool) -> dict[str, list[Site]]:
    """Per class, the sites rules 1 and 2 keep, in rule 3's order."""
    if not reach:
        return {cls: [] for cls in CLASSES}
    found = v2.sites(text)
    taken = {(s.cls, s.line, s.col) for s, _ in v2.mutants(file_id, text, 1)} if v2_corpus else set()
    out = {}
    for cls in CLASSES:
        keep = [s for s in found[cls] if any(e.line in reach for e in s.edits) and (cls, s.line, s.col) not in taken
                and _applies(text, s)]
        key = lambda s: hashlib.sha256(f"v3|{file_id}|{cls}|{s.line}|{s.col}".encode()).hexdigest()  # noqa: B023
        out[cls] = sorted(keep, key=key)
    return out


def _applies(text: str, site: Site) -> bool:
    try:
        v1.made("", text, site)
    except (AssertionError, ValueError):  # mutations.apply asserts the line count
        return False
    return True


def cap_for(per_file: list[dict[str, list[Site]]]) -> int:
    """Rule 3's cap: the smallest of ``CAPS`` giving at least ``AT_LEAST`` mutants."""
    for cap in CAPS:
        if sum(min(cap, len(sites)) for found in per_file for sites in found.values()) >= AT_LEAST:
            return cap
    return CAPS[-1]


def mutants(file_id: str, text: str, found: dict[str, list[Site]], cap: int) -> list[tuple[Site, str]]:
    """The chosen sites of every class with the mutated text; a site whose text does not parse is an error."""
    return [(site, v1.made(file_id, text, site)) for cls in CLASSES for site in found[cls][:cap]]
