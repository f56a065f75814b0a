"""Every pointer to a section lands on one that exists (issue 59: tune's last line, docs/task-convention.md,
docs/server.md and both editor READMEs sent readers to README sections "Autotuning", "Optimize" and "the
README's search section", which the README no longer has).

Read in README.md, docs/*.md, editor_clients/ and the product's own strings (every .py of the installed
layers): markdown links to a .md file (the file exists; an ``#anchor`` is one of its headings' slugs), and
the written forms of a pointer to a section - ``README "X"`` / ``README 'X'``, ``the README's "X"`` (a
capitalised title), ``the README's X section``, ``docs/NAME.md, "X"`` / ``docs/NAME.md "X"`` - whose X must
be (part of) a heading of that file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("server", "agents", "engine", "knowledge", "analysis", "runner", "wire")

LINK = re.compile(r"\]\((?P<file>[^)#\s]*\.md)?(?P<anchor>#[\w-]+)?\)")
README_BARE = re.compile(r"README(?:\.md)?\s+(?P<q>[\"'])(?P<title>[^\"'\n]{3,80})(?P=q)")
README_OWN = re.compile(r"README's\s+[\"“](?P<title>[A-Z][^\"”\n]{2,80})[\"”]")
README_SECTION = re.compile(r"README's\s+(?P<title>[\w ,\n-]{3,60}?)\s+section\b")
DOC_TITLE = re.compile(r"(?P<file>docs/[\w-]+\.md),?\s+(?:section\s+)?[\"“](?P<title>[A-Z][^\"”\n]{2,80})[\"”]")


def _sources() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found += [p for p in sorted((ROOT / "editor_clients").rglob("*")) if p.is_file()
              and p.suffix in (".md", ".lua", ".ts", ".el", ".json") and "node_modules" not in p.parts]
    found += [p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))]
    return found


def _headings(path: Path) -> list[str]:
    return [re.sub(r"`", "", m.group(1)).strip() for m in re.finditer(r"(?m)^#{1,6}\s+(.+?)\s*#*$", path.read_text())]


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _has_section(path: Path, title: str) -> bool:
    want = " ".join(title.lower().split())
    return any(want in heading.lower() for heading in _headings(path))


def pointers() -> list[tuple[str, str, bool]]:
    """(where, what it points to, whether that exists) for every pointer of every source."""
    out = []
    for source in _sources():
        text = source.read_text(encoding="utf-8", errors="replace")
        rel = source.relative_to(ROOT)

        def at(m: re.Match) -> str:
            return f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"

        if source.suffix == ".md":
            for m in LINK.finditer(text):
                if m.group("file") is None and m.group("anchor") is None:
                    continue
                target = (source.parent / m.group("file")) if m.group("file") else source
                if m.group("file") and "://" in m.group("file"):
                    continue
                ok = target.is_file() and (m.group("anchor") is None or
                                           m.group("anchor")[1:] in {_slug(h) for h in _headings(target)})
                out.append((at(m), f"{m.group('file') or ''}{m.group('anchor') or ''}", ok))
        for pattern in (README_BARE, README_OWN, README_SECTION):
            for m in pattern.finditer(text):
                out.append((at(m), f"README.md section {m.group('title')!r}", _has_section(ROOT / "README.md",
                                                                                         m.group("title"))))
        for m in DOC_TITLE.finditer(text):
            target = ROOT / m.group("file")
            out.append((at(m), f"{m.group('file')} section {m.group('title')!r}",
                        target.is_file() and _has_section(target, m.group("title"))))
    return out


def test_every_pointer_to_a_section_lands_on_one():
    found = pointers()
    assert len(found) > 40  # the readers above still read the project's pointers
    assert [(where, what) for where, what, ok in found if not ok] == []


def test_the_reader_finds_a_missing_section():
    import pytest

    assert _slug("Without a task: the shapes the file's own code uses") == \
        "without-a-task-the-shapes-the-files-own-code-uses"
    for line in ('see README "Autotuning"', "see README 'Optimize'", "the README's search section",
                 'the README\'s "Setting up a TPU VM"'):
        m = next(filter(None, (p.search(line) for p in (README_BARE, README_OWN, README_SECTION))), None)
        assert m is not None and not _has_section(ROOT / "README.md", m.group("title")), line
    assert _has_section(ROOT / "README.md", "What the numbers mean")
    with pytest.raises(StopIteration):  # a quote of the README's words is not a pointer to a section
        next(filter(None, (p.search('the README\'s "about 150 ms"') for p in (README_BARE, README_OWN,
                                                                             README_SECTION))))
