"""Long runs of own-line comments are blanked for tree-sitter's parse (analysis/source._masked);
after an edit the file is read again for such runs only around the edited lines, when its last text
had none (``_stays_short``). Random edits that grow and shrink comment blocks across the threshold
must give the tree a whole read gives, and a text is marked as having no long run only when it has
none."""

from __future__ import annotations

import random

from pallasite.analysis import source as source_mod
from pallasite.analysis.source import forget, parse_bytes
from pallasite.analysis.tier0_state import Tier0State


def _text(rng: random.Random) -> list[str]:
    lines = ["import jax", "from jax.experimental import pallas as pl", ""]
    for block in range(4):
        lines.append(f"def f{block}(x):")
        for i in range(rng.randrange(source_mod.MASK_RUN - 7, source_mod.MASK_RUN + 4)):  # a block near the threshold
            lines.append(rng.choice(["    # note", "# flush left", "", "    ", "\t# tab", "    # pallasite: ignore"]))
        lines.append("    return x")
        lines.append("")
    lines.append('S = """')
    lines += ["# inside a string"] * 3
    lines.append('"""')
    return lines


def _edit(lines: list[str], rng: random.Random) -> None:
    i = rng.randrange(len(lines))
    roll = rng.random()
    if roll < 0.35:
        lines.insert(i, rng.choice(["    # added", "# added", "", "  "]))
    elif roll < 0.6 and len(lines) > 5:
        del lines[i]
    elif roll < 0.75:
        lines[i] = "    y = 1"  # code splits a block
    elif roll < 0.9:
        lines[i:i] = ["    # pasted"] * rng.randrange(1, max(12, source_mod.MASK_RUN // 3))
    else:
        lines[i] = lines[i] + "  # trailing"


def test_reading_around_the_edit_decides_as_a_whole_read():
    key = Tier0State()
    skipped = 0
    for seed in range(6):
        rng = random.Random(seed)
        lines = _text(rng)
        forget(key)
        for _ in range(120):
            data = "\n".join(lines).encode()
            before = key.tree
            was_short = before is not None and key.short is before[0]
            if was_short and source_mod._stays_short(before[0], data):
                skipped += 1
                assert source_mod._short_runs(data)  # said short: truly no long run
            tree = parse_bytes(data, key)
            assert str(tree.root_node) == str(parse_bytes(data).root_node)
            assert (key.short is not None) <= source_mod._short_runs(data)
            _edit(lines, rng)
    forget(key)
    assert key.short is None
    assert skipped > 100  # the edits were mostly read around the edit, not whole
