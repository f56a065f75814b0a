"""Result keys: what a stored result is about, and the hashes that identify a kernel's code.

A ``ResultKey`` names the code (the tier-1 lowered module text when lowering succeeded, else the
kernel file plus the text of its local imports), the inputs' shapes/dtypes, the configuration,
the target chip, the jax/libtpu versions and the backend. ``digest()`` is a SHA-256 over a
canonical JSON form, stable across processes, Python versions and config order.
Local imports are found with ``ast``: modules that resolve to files next to the kernel (or under
the workspace root), recursively, with the packages' ``__init__.py`` files they run.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from pallasite.analysis.types import to_json


@dataclass(frozen=True)
class ResultKey:
    """What a result is about. ``digest()`` is stable across processes and Python versions."""

    source_hash: str  # lowered_hash(module text) or source_hash(file + local imports)
    source_kind: str = "source"  # "lowered" (tier-1 module text) or "source" (file + imports)
    kernel: str | None = None  # the entry / kernel name within the file
    inputs: tuple[tuple[tuple[int, ...], str], ...] = ()  # (shape, dtype) per argument
    config: tuple[tuple[str, Any], ...] = ()  # tunable -> value (sorted by name when digested)
    chip: str | None = None  # target, e.g. "v6e"
    jax_version: str | None = None
    libtpu_version: str | None = None
    backend: str = "local"  # "local", "ssh:<host>", "ray", ...

    def digest(self) -> str:
        data = to_json(self)
        data["config"] = sorted([str(k), v] for k, v in self.config)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()

    def without_config(self) -> "ResultKey":
        return ResultKey(self.source_hash, self.source_kind, self.kernel, self.inputs, (), self.chip,
                         self.jax_version, self.libtpu_version, self.backend)

    def to_json(self) -> str:
        return json.dumps(to_json(self), sort_keys=True, default=str)

    @staticmethod
    def from_json(text: str) -> "ResultKey":
        data = json.loads(text)
        return ResultKey(
            source_hash=data["source_hash"], source_kind=data.get("source_kind", "source"),
            kernel=data.get("kernel"),
            inputs=tuple((tuple(shape), str(dtype)) for shape, dtype in data.get("inputs", ())),
            config=tuple((str(k), v) for k, v in data.get("config", ())),
            chip=data.get("chip"), jax_version=data.get("jax_version"),
            libtpu_version=data.get("libtpu_version"), backend=data.get("backend", "local"))


def lowered_hash(module_text: str) -> str:
    """Hash of a tier-1 lowered module (MLIR text): equal kernels compile the same."""
    return "lowered:" + hashlib.sha256(module_text.encode()).hexdigest()


def local_imports(path: Path, text: str | None = None, root: Path | None = None) -> list[Path]:
    """Files of the modules ``path`` imports that live next to it (or under ``root``), recursively.

    Only modules found as files are followed: the standard library and installed packages are not
    local. A file that does not parse contributes no imports (its own text is still hashed)."""
    path = path.resolve()
    root = (root or path.parent).resolve()
    seen: dict[Path, None] = {}
    todo = [(path, text)]
    while todo:
        current, current_text = todo.pop()
        try:
            body = current_text if current_text is not None else current.read_text(encoding="utf-8")
            tree = ast.parse(body)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for target in _import_targets(tree, current, root):
            if target not in seen and target != path:
                seen[target] = None
                todo.append((target, None))
    return sorted(seen)


def _import_targets(tree: ast.Module, current: Path, root: Path) -> Iterable[Path]:
    for node in ast.walk(tree):
        names: list[tuple[str, int]] = []
        if isinstance(node, ast.Import):
            names = [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [(base, node.level)]
            names += [(f"{base}.{alias.name}" if base else alias.name, node.level) for alias in node.names]
        for dotted, level in names:
            bases = [current.parent] if level == 0 else [_up(current.parent, level - 1)]
            if level == 0 and root not in bases:
                bases.append(root)
            for base in bases:
                found = _module_file(base, dotted)
                if found is not None:
                    yield found
                    parts = dotted.split(".")  # importing a.b.c runs a/__init__.py and a/b/__init__.py
                    for n in range(1, len(parts)):
                        init = base.joinpath(*parts[:n], "__init__.py")
                        if init.is_file():
                            yield init.resolve()
                    break


def _up(folder: Path, levels: int) -> Path:
    for _ in range(levels):
        folder = folder.parent
    return folder


def _module_file(base: Path, dotted: str) -> Path | None:
    if not dotted:
        return None
    candidate = base.joinpath(*dotted.split("."))
    for option in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if option.is_file():
            return option.resolve()
    return None


def source_hash(path: str | Path, text: str | None = None, root: Path | None = None) -> str:
    """Hash of a kernel file's text plus its local imports' texts (used when lowering failed)."""
    path = Path(path)
    own = text if text is not None else path.read_text(encoding="utf-8")
    h = hashlib.sha256(own.encode())
    for dep in local_imports(path, own, root):
        try:
            h.update(b"\0" + dep.name.encode() + b"\0" + dep.read_bytes())
        except OSError:
            continue
    return "source:" + h.hexdigest()
