"""Tier 0 in bounded memory and time on big, comment-heavy files (analysis/source.py).

tree-sitter-python costs N^2 on a run of N own-line comments, and a chunked reader that hands it
copies kept every chunk alive: a 0.5 MB kernel file with a few thousand commented-out lines took
21 s and 1.2 GB to parse (5.2 GB at 1 MB). Long comment runs are now parsed blanked (same offsets)
and the reader hands out views; a document's state keeps its tree and two earlier ones, dropped
when it is cleared (a closed document)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pallasite.analysis import source as source_mod
from pallasite.analysis.source import Source, parse, walk
from pallasite.analysis.suppress import suppressions
from pallasite.analysis.tier0 import analyze
from pallasite.analysis.tier0_state import Tier0State
from pallasite.analysis.types import to_json

DATA = Path(__file__).parent / "data"


def commented_kernel_file(n_bytes: int) -> str:
    """A real Pallas kernel file with thousands of commented-out variants of its kernel line
    between the kernel and its entry (the shape that made tier 0 take 21 s and 1.2 GB)."""
    base = (DATA / "lsp" / "tiling_broken.py").read_text()
    cut = base.index("def add(")
    lines, size, i = [], len(base), 0
    while size < n_bytes:
        line = f"#    o_ref[...] = x_ref[...] * {i} + jnp.sum(y_ref[pl.ds({i % 64}, 128)], axis=0)  # variant {i}\n"
        lines.append(line)
        size += len(line)
        i += 1
    return base[:cut] + "".join(lines) + "\n\n" + base[cut:]


# the peak of this process's own memory (VmHWM: ru_maxrss would also count the forking parent's)
_MEASURE = """
import json, sys, time
from pallasite.analysis.tier0 import analyze
from pallasite.analysis.tier0_state import Tier0State
text = sys.stdin.read()
started = time.perf_counter()
analysis = analyze(text, "/virtual/commented.py", target="v6e")
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"rss_mb": peak_kb / 1024,
                  "seconds": time.perf_counter() - started, "sites": len(analysis.sites),
                  "codes": sorted({f.code for f in analysis.findings})}))
"""


def test_a_comment_heavy_half_megabyte_file_is_analysed_in_under_200_mb():
    text = commented_kernel_file(500_000)
    assert len(text.encode()) >= 500_000 and text.count("\n#    o_ref") > 4000
    run = subprocess.run([sys.executable, "-c", _MEASURE], input=text, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    print(f"\ncomment-heavy 0.5 MB file: tier 0 in {got['seconds']:.2f} s, peak RSS {got['rss_mb']:.0f} MB")
    assert got["rss_mb"] < 200, got  # before: 1.2 GB for the parse alone
    plain = analyze((DATA / "lsp" / "tiling_broken.py").read_text(), "/virtual/plain.py", target="v6e")
    assert got["sites"] == len(plain.sites) and got["codes"] == sorted({f.code for f in plain.findings})


def test_blanked_comment_runs_change_nothing_but_the_comments(monkeypatch):
    text = commented_kernel_file(40_000)  # small enough to parse the slow way too
    masked = analyze(text, None, target="v6e")
    monkeypatch.setattr(source_mod, "MASK_RUN", 10 ** 9)
    plain = analyze(text, None, target="v6e")
    assert to_json(masked.sites) == to_json(plain.sites) and to_json(masked.findings) == to_json(plain.findings)
    assert masked.findings  # tiling_broken.py's findings, at the same places


def test_comment_lines_inside_strings_and_suppressions_survive():
    comment = "#    x_ref[...] = 0  # old\n"
    docstring = 's = """\n' + comment * 40 + '# the string ends here """ + suffix\n'
    text = docstring + comment * 40 + "y = 1  # pallasite: ignore[PLS001]\n" + comment * 40 + "z = 2\n"
    src = Source(text)
    strings = [n for n in walk(src.root) if n.type == "string"]
    assert len(strings) == 1 and src.node_text(strings[0]).endswith('# the string ends here """')
    assert src.node_text(strings[0]).count("x_ref") == 40  # string content is never blanked
    assert not src.root.has_error
    # a suppression inside a long run of comments still counts
    kept = "#    x = 1\n" * 40 + "# pallasite: ignore[PLS002]\n" + "#    x = 2\n" * 40 + "w = 3\n"
    assert suppressions(kept) == {40: frozenset({"PLS002"})}


def test_a_document_state_keeps_its_tree_and_two_earlier_ones_and_clear_drops_them():
    state = Tier0State()
    texts = [f"x_{i} = 1\n" * 6_000 for i in range(4)]  # ~50-60 KB each
    trees = [parse(text, state) for text in texts]
    assert state.tree[1] is trees[-1]
    assert [tree for _, tree, _ in state.earlier] == trees[1:3]  # the last EARLIER_TREES replaced ones
    state.clear()
    assert state.tree is None and not state.earlier
