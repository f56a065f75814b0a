"""Where the offline docs come from: the Passage type, locating jax, our guides and user folders.

Passages of each kind have a stable id and a source a person can open:

- ``api/<alias>.<name>``: a public Pallas name's signature and docstring, read from the INSTALLED
  jax's source files (see ``docs_api``). jax is never imported: its folder is found with
  ``importlib.util.find_spec``, so the passages match the user's jax version.
- ``guide/<file>#<section>``: a section of one of pallasite's guides (``knowledge/guides/*.md``).
- ``extra/<folder>/<file>#<section>``: a section of a Markdown/reST file in a folder the user named.
- ``kernel/<path>:<name>``: a function of jax's hand-written kernels (``pallas/ops``); off by
  default because kernel code drowns the prose for most queries.

Long docstrings and sections are cut into paragraph groups (ids get ``~2``, ``~3`` ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal

from ..analysis.rules import apis
from ..analysis.types import installed_versions

Kind = Literal["api", "guide", "catalog", "extra", "kernel"]

GUIDES_DIR = Path(__file__).with_name("guides")
MAX_PASSAGE_CHARS = 1600

# public module (relative to jax/experimental/pallas) -> the alias people import it as
PUBLIC_MODULES: dict[str, str] = {
    "__init__.py": "pl",
    "tpu.py": "pltpu",
    "tpu_sc.py": "plsc",
    "mosaic_gpu.py": "plgpu",
    "triton.py": "pltriton",
    "fuser.py": "plfuser",
}


@dataclass(frozen=True)
class Passage:
    """One retrievable piece of documentation."""

    id: str
    kind: Kind
    title: str  # heading, or the API name with its signature
    source: str  # a file path (absolute for jax/user files, package-relative for guides)
    line: int  # 1-based line in ``source`` where the passage starts
    text: str


# --------------------------------------------------------------------------- locating jax


def jax_root() -> Path | None:
    """The installed jax package folder, found without importing jax (None if not installed)."""
    root = apis.jax_root()
    return Path(root) if root else None


def jax_version() -> str | None:
    """The installed jax's version (the docs index is rebuilt when it changes)."""
    return installed_versions()["jax"]


def api_source_files(root: Path) -> list[Path]:
    """The public Pallas module files of this jax (what the API passages are read from)."""
    base = root / "experimental" / "pallas"
    return [base / name for name in PUBLIC_MODULES if (base / name).is_file()]


def kernel_source_files(root: Path) -> list[Path]:
    return sorted((root / "experimental" / "pallas" / "ops").rglob("*.py"))


# --------------------------------------------------------------------------- Markdown / reST


_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def sections(text: str, rst: bool = False) -> Iterator[tuple[str, int, str]]:
    """(heading, 1-based line, body) for each section of a Markdown or reST text."""
    lines = text.splitlines()
    heading, start, body = "", 1, []
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        new_heading = None
        if not in_fence:
            match = _MD_HEADING.match(line) if not rst else None
            if match:
                new_heading = match.group(2)
            elif rst and line.strip() and i + 1 < len(lines) and _RST_UNDERLINE.match(lines[i + 1]) \
                    and len(lines[i + 1].strip()) >= len(line.strip()):
                new_heading = line.strip()
        if new_heading is not None:
            if "".join(body).strip() or heading:
                yield heading, start, "\n".join(body).strip()
            heading, start, body = new_heading, i + 1, []
            i += 2 if rst else 1
            continue
        body.append(line)
        i += 1
    if "".join(body).strip() or heading:
        yield heading, start, "\n".join(body).strip()


def document_passages(path: Path, id_prefix: str, kind: Kind, source: str | None = None) -> Iterator[Passage]:
    """Passages of one Markdown/reST file: one per section, long sections cut by paragraphs."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    title = ""
    used: set[str] = set()
    for heading, line, body in sections(text, rst=path.suffix.lower() in (".rst", ".rest")):
        if not title:
            title = heading or path.stem
        if not body.strip():
            continue
        key = slug(heading or path.stem)
        while key in used:
            key += "-1"
        used.add(key)
        full_title = heading if heading == title else f"{title}: {heading}"
        yield from split_long(Passage(f"{id_prefix}#{key}", kind, full_title, source or str(path), line,
                                  f"{full_title}\n\n{body}"))


def guide_passages(guides_dir: Path | None = None) -> Iterator[Passage]:
    for path in sorted((guides_dir or GUIDES_DIR).glob("*.md")):
        yield from document_passages(path, f"guide/{path.stem}", "guide", f"knowledge/guides/{path.name}")


DOC_SUFFIXES = (".md", ".markdown", ".rst", ".rest", ".txt")


def extra_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in DOC_SUFFIXES
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def extra_passages(folder: Path) -> Iterator[Passage]:
    for path in extra_files(folder):
        rel = path.relative_to(folder).with_suffix("").as_posix()
        yield from document_passages(path, f"extra/{folder.name}/{rel}", "extra")


# --------------------------------------------------------------------------- splitting


def split_long(passage: Passage) -> Iterator[Passage]:
    """Cut a long passage into paragraph groups; every part keeps the title as its first line."""
    if len(passage.text) <= MAX_PASSAGE_CHARS:
        yield passage
        return
    head, _, rest = passage.text.partition("\n")
    groups: list[str] = []
    current = ""
    for para in re.split(r"\n\s*\n", rest):
        if current and len(current) + len(para) > MAX_PASSAGE_CHARS:
            groups.append(current)
            current = ""
        current = f"{current}\n\n{para}" if current else para
    if current:
        groups.append(current)
    for n, group in enumerate(groups, start=1):
        pid = passage.id if n == 1 else f"{passage.id}~{n}"
        yield Passage(pid, passage.kind, passage.title, passage.source, passage.line, f"{head}\n{group.strip()}")
