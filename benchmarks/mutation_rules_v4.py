"""Site rules of the fourth public mutation corpus (issue 57): corpus v2's fifteen classes, unchanged
(``benchmarks/mutation_rules_v2.py``), on the lines a file's own task runs, none of corpus v2's or v3's mutants again.

Written and committed before any mutant of this corpus was checked (``benchmarks/mutation_rules_2026-12-07_v4.md``
says when). Only Python's ``ast`` reads the files for sites; which lines run comes from jax alone
(``benchmarks/mutation_oracle.py``, as for corpus v3).

Which sites:

1. every site of corpus v2's classes (``mutation_rules_v2.sites``) whose edited lines include a line that ran
   while jax traced the unmutated file's task (its *reach*), whose edit keeps the line count, changes the text and
   parses (corpus v3's rule 1);
2. not one of corpus v2's mutants (v2's choice at ``--cap 1``) nor of corpus v3's (v3's choice at its cap, 2), same
   file id, class, line and column;
3. per file and class at most ``cap`` of them, the smallest sha256 of ``"v4|{file id}|{class}|{line}|{col}"``;
   ``cap`` is the smallest of ``CAPS`` that gives the corpus at least ``AT_LEAST`` mutants (the largest when none
   does), fixed once the reach is known and before any mutant is checked.

Scoring (``score``, ``verified``): corpus v2's, unchanged; chips as there (v5p for ``parallel-reduction``).
"""

from __future__ import annotations

import functools
import hashlib

import mutation_rules_v2 as v2
import mutation_rules_v3 as v3
from mutation_rules import Site

CAPS = (2, 3, 4, 6, 8)
CAP = CAPS[-1]
AT_LEAST = 300
V3_CAP = 2  # corpus v3's cap, fixed when its reach was known (its results file says so)
CLASSES = v2.CLASSES
TARGETS = v2.TARGETS
NEVER_CATCH = v2.NEVER_CATCH
RUNTIME_WARNINGS = v2.RUNTIME_WARNINGS
EXPECTED_WARNINGS = v2.EXPECTED_WARNINGS
V2_CODEBASES = ("jax-ops", "jaxbench", "tpu-inference", "sglang-jax")
V3_CODEBASES = (*V2_CODEBASES, "pytorch-xla", "axlearn")
score = v2.score
verified = v2.verified
mutants = v3.mutants


def candidates(file_id: str, text: str, reach: set[int] | None) -> dict[str, list[Site]]:
    """Per class, the sites rules 1 and 2 keep, in rule 3's order."""
    if not reach:
        return {cls: [] for cls in CLASSES}
    codebase = file_id.split(":", 1)[0]
    ours = v3.candidates(file_id, text, reach, codebase in V2_CODEBASES)  # rules 1 and v2's part of 2
    taken = set()
    if codebase in V3_CODEBASES:
        taken = {(cls, s.line, s.col) for cls, sites in ours.items() for s in sites[:V3_CAP]}
    out = {}
    for cls in CLASSES:
        keep = [s for s in ours[cls] if (cls, s.line, s.col) not in taken]
        key = functools.partial(_order, file_id, cls)
        out[cls] = sorted(keep, key=key)
    return out


def _order(file_id: str, cls: str, site: Site) -> str:
    return hashlib.sha256(f"v4|{file_id}|{cls}|{site.line}|{site.col}".encode()).hexdigest()


def cap_for(per_file: list[dict[str, list[Site]]]) -> int:
    """Rule 3's cap: the smallest of ``CAPS`` giving at least ``AT_LEAST`` mutants."""
    for cap in CAPS:
        if sum(min(cap, len(sites)) for found in per_file for sites in found.values()) >= AT_LEAST:
            return cap
    return CAPS[-1]
