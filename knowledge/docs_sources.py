"""Where the offline docs come from: passages cut from jax's sources, our guides and user folders.

Four kinds of passages, each with a stable id and a source a person can open:

- ``api/<alias>.<name>``: the signature and docstring of a public Pallas name (``pl.BlockSpec``,
  ``pltpu.CompilerParams``), read with ``ast`` from the INSTALLED jax's source files, following the
  public modules' re-exports into ``jax._src``. jax is never imported: the files are found with
  ``importlib.util.find_spec``, so the passages match the user's jax version.
- ``guide/<file>#<section>``: a section of one of pallasite's guides (``knowledge/guides/*.md``).
- ``extra/<folder>/<file>#<section>``: a section of a Markdown/reST file in a folder the user named.
- ``kernel/<path>:<name>``: a function of jax's hand-written kernels (``pallas/ops``); off by
  default because kernel code drowns the prose for most queries.

Long docstrings and sections are cut into paragraph groups (ids get ``~2``, ``~3`` ...).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal

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
    try:
        spec = importlib.util.find_spec("jax")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def jax_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("jax")
    except metadata.PackageNotFoundError:
        return None


def api_source_files(root: Path) -> list[Path]:
    """The public Pallas module files of this jax (what the API passages are read from)."""
    base = root / "experimental" / "pallas"
    return [base / name for name in PUBLIC_MODULES if (base / name).is_file()]


def kernel_source_files(root: Path) -> list[Path]:
    return sorted((root / "experimental" / "pallas" / "ops").rglob("*.py"))


# --------------------------------------------------------------------------- API passages


class _ModuleReader:
    """Parses jax module files on demand and finds where a re-exported name is defined."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._trees: dict[Path, ast.Module | None] = {}

    def file_for(self, module: str) -> Path | None:
        parts = module.split(".")
        if parts[0] != "jax":
            return None
        base = self.root.joinpath(*parts[1:])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def tree(self, path: Path) -> ast.Module | None:
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(path.read_text(encoding="utf-8"), str(path))
            except (OSError, SyntaxError, UnicodeDecodeError):
                self._trees[path] = None
        return self._trees[path]

    def definition(self, path: Path, name: str, depth: int = 0) -> tuple[Path, ast.AST] | None:
        """The class/function node named ``name`` in ``path``, following imports a few levels."""
        tree = self.tree(path)
        if tree is None or depth > 4:
            return None
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return path, node
        for node in tree.body:  # `ds = indexing.ds` / `ds = dslice`: follow simple aliases
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name:
                if isinstance(node.value, ast.Name) and node.value.id != name:
                    return self.definition(path, node.value.id, depth + 1)
                if isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name):
                    module = self._imported_module(tree, node.value.value.id)
                    target = self.file_for(module) if module else None
                    if target is not None:
                        return self.definition(target, node.value.attr, depth + 1)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        target = self.file_for(node.module)
                        if target is not None:
                            return self.definition(target, alias.name, depth + 1)
        return None


    @staticmethod
    def _imported_module(tree: ast.Module, local: str) -> str | None:
        """The dotted module bound to ``local`` by ``from a.b import c`` or ``import a.b as c``."""
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == local:
                        return f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname == local:
                        return alias.name
        return None


def _signature(node: ast.AST) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"({_args(node.args)})"
    if isinstance(node, ast.ClassDef):
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                args = _args(item.args)
                return "(" + re.sub(r"^self,?\s*", "", args) + ")"
        fields = [
            ast.unparse(item.target) + (f"={ast.unparse(item.value)}" if item.value is not None else "")
            for item in node.body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
        ]
        return f"({', '.join(fields)})" if fields else ""
    return ""


def _args(args: ast.arguments) -> str:
    text = ast.unparse(args)
    return text if len(text) < 400 else text[:400] + " ..."


def _methods_summary(node: ast.AST) -> str:
    if not isinstance(node, ast.ClassDef):
        return ""
    members = [t.id for item in node.body if isinstance(item, ast.Assign)
               for t in item.targets if isinstance(t, ast.Name) and t.id.isupper()]
    lines = []
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
            doc = ast.get_docstring(item) or ""
            first = doc.strip().splitlines()[0] if doc.strip() else ""
            lines.append(f"- {item.name}({_args(item.args).removeprefix('self').lstrip(', ')}) {first}".rstrip())
    text = ("Members: " + ", ".join(members)) if members else ""
    if lines:
        text += ("\n\n" if text else "") + "Methods:\n" + "\n".join(lines)
    return text


def api_passages(root: Path) -> Iterator[Passage]:
    """One passage (or a few, for long docstrings) per public Pallas class or function."""
    reader = _ModuleReader(root)
    for path in api_source_files(root):
        alias = PUBLIC_MODULES[path.name]
        tree = reader.tree(path)
        if tree is None:
            continue
        names: list[tuple[str, Path, ast.AST]] = []
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                target = reader.file_for(node.module)
                for imported in node.names:
                    public = imported.asname or imported.name
                    if public.startswith("_") or target is None:
                        continue
                    found = reader.definition(target, imported.name)
                    if found is not None:
                        names.append((public, *found))
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                names.append((node.name, path, node))
        seen: set[str] = set()
        for public, def_path, node in names:
            if public in seen:
                continue
            seen.add(public)
            doc = (ast.get_docstring(node) or "").strip() or "(no docstring in the installed jax)"
            qualified = f"{alias}.{public}"
            kind_word = "class" if isinstance(node, ast.ClassDef) else "function"
            head = f"{qualified}{_signature(node)}"
            body = f"{head}\n{kind_word} {public} in {_module_name(root, def_path)}\n\n{doc}"
            for base_name, base_doc in _base_docs(reader, def_path, node):
                body += f"\n\nInherited from {base_name}:\n{base_doc}"
            methods = _methods_summary(node)
            if methods:
                body += "\n\n" + methods
            yield from _split(
                Passage(f"api/{qualified}", "api", head, str(def_path), getattr(node, "lineno", 1), body)
            )


def _base_docs(reader: _ModuleReader, path: Path, node: ast.AST) -> Iterator[tuple[str, str]]:
    """(name, docstring) of the direct base classes of ``node`` that jax defines and documents."""
    if not isinstance(node, ast.ClassDef):
        return
    for base in node.bases:
        found = None
        if isinstance(base, ast.Name):
            found = reader.definition(path, base.id)
        elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
            tree = reader.tree(path)
            module = reader._imported_module(tree, base.value.id) if tree else None
            target = reader.file_for(module) if module else None
            found = reader.definition(target, base.attr) if target else None
        if found and isinstance(found[1], ast.ClassDef):
            doc = (ast.get_docstring(found[1]) or "").strip()
            if doc:
                yield found[1].name, doc


def _module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def public_names(root: Path) -> dict[str, set[str]]:
    """alias (``pl``, ``pltpu``...) -> every name the public module defines, imports or assigns
    (including names it only offers through a deprecation ``__getattr__`` table)."""
    names: dict[str, set[str]] = {}
    reader = _ModuleReader(root)
    for path in api_source_files(root):
        tree = reader.tree(path)
        found: set[str] = set()
        for node in tree.body if tree else ():
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.Assign):
                found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        names[PUBLIC_MODULES[path.name]] = {n for n in found if not n.startswith("_")}
    return names


# --------------------------------------------------------------------------- kernel passages


def kernel_passages(root: Path) -> Iterator[Passage]:
    """jax's hand-written Pallas kernels, one passage per top-level function or class."""
    ops = root / "experimental" / "pallas" / "ops"
    for path in kernel_source_files(root):
        try:
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text, str(path))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        rel = path.relative_to(ops).as_posix()
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                continue
            code = ast.get_source_segment(text, node) or ""
            if len(code) > 3000:
                code = code[:3000] + "\n# ... (truncated)"
            yield Passage(f"kernel/{rel}:{node.name}", "kernel", f"{rel}: {node.name}", str(path), node.lineno, code)


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
        yield from _split(Passage(f"{id_prefix}#{key}", kind, full_title, source or str(path), line,
                                  f"{full_title}\n\n{body}"))


def guide_passages(guides_dir: Path = GUIDES_DIR) -> Iterator[Passage]:
    for path in sorted(guides_dir.glob("*.md")):
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


def _split(passage: Passage) -> Iterator[Passage]:
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
