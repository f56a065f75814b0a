"""PLS007: ``pl.X`` / ``pltpu.X`` uses that the INSTALLED jax does not export (removed or renamed),
and deprecated ones (a warning, with jax's own message).

The installed jax is found without importing it (``importlib.util.find_spec("jax")`` only locates
the package; ``PALLASITE_JAX_PATH`` overrides it); ``jax/experimental/pallas/__init__.py`` and ``tpu.py`` are read with tree-sitter:
every ``from ... import name as name``, module-level assignment, def/class, and the keys of the
module's ``_deprecations`` table. A module whose exports cannot be read with certainty (e.g. a
star import) is not checked. ``RENAMES`` suggests the current name for known renames; each entry
is used only if the installed jax exports the new name and not the old one.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from .context import RuleContext, finding, replace
from ..source import Source, string_keyed_pairs, walk
from ..types import Finding

PALLAS = "jax.experimental.pallas"
TPU = "jax.experimental.pallas.tpu"

# module -> {old name: (module of the new name, new name)}; each used only when the installed jax
# exports the new name and not the old one.
RENAMES: dict[str, dict[str, tuple[str, str]]] = {
    TPU: {
        "TPUCompilerParams": (TPU, "CompilerParams"),
        "TPUMemorySpace": (TPU, "MemorySpace"),
        "TPUInterpretParams": (TPU, "InterpretParams"),
        "ANY": (PALLAS, "ANY"),
        "HOST": (PALLAS, "HOST"),
    },
    PALLAS: {
        "TPUCompilerParams": (TPU, "CompilerParams"),
        "TPUMemorySpace": (TPU, "MemorySpace"),
    },
}


# Removed names with no one-to-one replacement: advice checked against the installed exports below.
ADVICE: dict[str, dict[str, str]] = {
    PALLAS: {
        "load": "use ref indexing (x_ref[...]) or pltpu.load in TPU kernels, plgpu.load "
                "(jax.experimental.pallas.triton) in Triton kernels",
        "store": "use ref assignment (o_ref[...] = v) or pltpu.store in TPU kernels, plgpu.store "
                 "(jax.experimental.pallas.triton) in Triton kernels",
    },
}


@dataclass(frozen=True)
class Exports:
    """What one installed module exports: plain names and deprecated name -> jax's message."""

    names: frozenset[str]
    deprecated: dict[str, str]
    removed: dict[str, str]  # names jax's deprecation table maps to None (accessing raises)
    certain: bool  # False: a star import or a foreign __getattr__ makes the list incomplete


@lru_cache(maxsize=1)
def jax_root() -> str | None:
    """The installed jax package folder, located without importing jax.

    ``PALLASITE_JAX_PATH`` (a jax package folder) overrides it, e.g. to check against the jax of
    the project's own interpreter when it differs from the one pallasite runs with."""
    override = os.environ.get("PALLASITE_JAX_PATH")
    if override:
        return override if os.path.isfile(os.path.join(override, "__init__.py")) else None
    try:
        spec = importlib.util.find_spec("jax")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _module_file(module: str) -> str | None:
    root = jax_root()
    if root is None:
        return None
    relative = module.split(".")[1:]
    package = os.path.join(root, *relative, "__init__.py")
    if os.path.exists(package):
        return package
    plain = os.path.join(root, *relative) + ".py"
    return plain if os.path.exists(plain) else None


@lru_cache(maxsize=8)
def module_file(module: str) -> str | None:
    return _module_file(module)


@lru_cache(maxsize=1)
def installed_version() -> str | None:
    """The installed jax's version string, read from jax/version.py (never imported)."""
    root = jax_root()
    try:
        with open(os.path.join(root, "version.py"), encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, TypeError):
        return None
    match = re.search(r'^_version(?:: str)? = "([^"]+)"', text, re.M)
    return match.group(1) if match else None


def exports(module: str) -> Exports | None:
    path = module_file(module)
    if path is None:
        return None
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        return None
    return _exports(path, stamp)


@lru_cache(maxsize=16)
def _exports(path: str, stamp: int) -> Exports | None:
    del stamp  # part of the cache key: a reinstalled jax is read again
    try:
        with open(path, encoding="utf-8") as handle:
            source = Source(handle.read())
    except (OSError, UnicodeDecodeError):
        return None
    names: set[str] = set()
    deprecated: dict[str, str] = {}
    removed: dict[str, str] = {}
    certain = True
    for node in walk(source.root):
        kind = node.type
        if kind == "import_from_statement":
            if any(c.type == "wildcard_import" for c in node.named_children):
                certain = False
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    names.add(source.node_text(child.child_by_field_name("alias")))
                elif child.type == "dotted_name":
                    names.add(source.node_text(child).split(".")[-1])
        elif kind == "import_statement":
            for child in node.named_children:
                if child.type == "aliased_import":
                    names.add(source.node_text(child.child_by_field_name("alias")))
        elif kind in ("function_definition", "class_definition") and _top_level(node):
            names.add(source.node_text(node.child_by_field_name("name")))
        elif kind == "assignment" and _top_level(node):
            left = node.child_by_field_name("left")
            for ident in ([left] if left is not None and left.type == "identifier" else
                          [c for c in (left.named_children if left is not None else []) if c.type == "identifier"]):
                name = source.node_text(ident)
                names.add(name)
                if name == "_deprecations":
                    _read_deprecations(source, node.child_by_field_name("right"), deprecated, removed)
                if name == "__getattr__" and "deprecation_getattr" not in source.node_text(node.child_by_field_name("right")):
                    certain = False
    for name in list(names):
        if name in deprecated or name in removed:
            names.discard(name)
    names.update(_submodules(path))
    return Exports(frozenset(n for n in names if not n.startswith("_") or n.startswith("__")),
                   deprecated, removed, certain)


def _top_level(node) -> bool:
    """Defined at module level, or in a module-level if/try block (e.g. ``if TYPE_CHECKING:``)."""
    parent = node.parent
    while parent is not None and parent.type not in ("module", "function_definition", "class_definition"):
        parent = parent.parent
    return parent is not None and parent.type == "module"


def _read_deprecations(source: Source, node, deprecated: dict[str, str], removed: dict[str, str]) -> None:
    for name, value in string_keyed_pairs(source, node):
        parts = [c for c in value.named_children if c.type != "comment"] if value.type == "tuple" else []
        message = " ".join(_string_text(source, parts[0]).split()) if parts else ""
        if len(parts) == 2 and parts[1].type == "none":
            removed[name] = message
        else:
            deprecated[name] = message


def _string_text(source: Source, node) -> str:
    if node.type == "string":
        return "".join(source.node_text(c) for c in node.named_children if c.type == "string_content")
    return " ".join(_string_text(source, c) for c in node.named_children if c.type in ("string", "concatenated_string", "parenthesized_expression"))


def _submodules(init_path: str) -> set[str]:
    if not init_path.endswith("__init__.py"):
        return set()
    folder = os.path.dirname(init_path)
    found = set()
    for entry in os.listdir(folder):
        if entry.endswith(".py") and entry != "__init__.py":
            found.add(entry[:-3])
        elif os.path.isdir(os.path.join(folder, entry)) and os.path.exists(os.path.join(folder, entry, "__init__.py")):
            found.add(entry)
    return found


def check_apis(ctx: RuleContext) -> Iterator[Finding]:
    """PLS007 for each ``<alias of pallas or pallas.tpu>.NAME`` the installed jax lacks."""
    source = ctx.source
    aliases = {alias: module for alias, module in source.imports.items() if module in (PALLAS, TPU)}
    imported_names = {alias: module for alias, module in source.imports.items()
                      if module.rsplit(".", 1)[0] in (PALLAS, TPU) and module not in (PALLAS, TPU)}
    for alias, qual in imported_names.items():  # from jax.experimental.pallas.tpu import TPUCompilerParams
        module, name = qual.rsplit(".", 1)
        yield from _check_name(ctx, module, name, None, alias)
    if not aliases:
        return
    for node in _alias_attributes(source, aliases, lambda module: _table(ctx, module)):
        obj = node.child_by_field_name("object")
        if obj is None or obj.type != "identifier":
            continue
        module = aliases.get(source.node_text(obj))
        if module is None:
            continue
        attr = node.child_by_field_name("attribute")
        yield from _check_name(ctx, module, source.node_text(attr), node, None)


def _alias_attributes(source: Source, aliases: dict[str, str], table=None) -> list:
    """The attribute nodes whose object is a name spelled as one of ``aliases``, in source order:
    found where one regex search of the text finds an alias (an attribute starts with its object;
    the identifier there, if its parent is an attribute of it), not by reading every attribute
    node of the file (splash attention has 786; reading them cost 0.8 ms per edit). With ``table``
    (module -> its ``Exports``), an alias written right before ``.NAME`` with NAME exported (or no
    table to check against) is passed over unread: ``_check_name`` says nothing of it either way
    (splash attention: 136 tree look-ups per edit, ~0.3 ms)."""
    spelled = re.compile(b"(?P<alias>" + b"|".join(re.escape(a.encode("utf-8")) for a in sorted(aliases, key=len, reverse=True))
                         + rb")(?![\w\x80-\xff])(?:\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?![\w\x80-\xff]))?")
    found = []
    for match in spelled.finditer(source.data):
        if table is not None and match.group("name") is not None:
            exported = table(aliases[match.group("alias").decode("utf-8")])
            if exported is None or match.group("name").decode("ascii") in exported.names:
                continue
        start, end = match.span("alias")
        name = source.root.descendant_for_byte_range(start, end)
        if name is None or name.type != "identifier" or name.start_byte != start or name.end_byte != end:
            continue  # in a string or a comment, or part of a longer token
        parent = name.parent
        if parent is not None and parent.type == "attribute" and parent.start_byte == name.start_byte:
            obj = parent.child_by_field_name("object")
            if obj is not None and obj.start_byte == name.start_byte and obj.end_byte == name.end_byte:
                found.append(parent)
    return found


def _table(ctx: RuleContext, module: str) -> "Exports | None":
    """The installed jax's exports of ``module``, read once per analysis."""
    tables = ctx.source.cache.setdefault("exports", {})
    if module not in tables:
        tables[module] = exports(module)
    return tables[module]


def _check_name(ctx: RuleContext, module: str, name: str, node, imported_as: str | None) -> Iterator[Finding]:
    table = _table(ctx, module)
    if table is None or name in table.names:
        return
    short = "pltpu" if module == TPU else "pl"
    span_node = node
    if span_node is None:
        span_node = _import_name_node(ctx.source, module, name)
        if span_node is None:
            return
    span = ctx.source.span(span_node)
    if name in table.deprecated:
        yield _with_severity(finding(
            "PLS007", f"Deprecated in the installed jax: {table.deprecated[name] or short + '.' + name}", span), "warning")
        return
    if not table.certain:
        return
    renamed = RENAMES.get(module, {}).get(name)
    target = exports(renamed[0]) if renamed is not None else None
    if renamed is not None and target is not None and renamed[1] in target.names:
        new_module, new_name = renamed
        new_short = "pltpu" if new_module == TPU else "pl"
        alias = _alias_for(ctx.source, new_module)
        message = (f"{short}.{name} does not exist in the installed jax: it was renamed {new_short}.{new_name}. "
                   f"Use {new_short}.{new_name}.")
        fix = None
        if node is not None and new_module == module:
            fix = replace(f"Rename to {short}.{new_name}", ctx.source.span(node.child_by_field_name("attribute")), new_name)
        elif node is not None and alias is not None:
            fix = replace(f"Use {alias}.{new_name}", span, f"{alias}.{new_name}")
        yield finding("PLS007", message, span, fix=fix)
        return
    if name in table.removed:
        yield finding("PLS007", f"{short}.{name} was removed from the installed jax: {table.removed[name]}", span)
        return
    advice = ADVICE.get(module, {}).get(name)
    if advice is not None:
        yield finding("PLS007", f"{short}.{name} is not in the installed jax (AttributeError at run time): "
                                f"{advice}.", span)
        return
    version = installed_version()
    yield finding(
        "PLS007",
        f"{short}.{name} is not exported by {module} in the installed jax{' ' + version if version else ''} "
        "(AttributeError at run time). Check the spelling and the jax release notes; if the code was "
        "written for a newer jax, upgrade jax.",
        span)


def _alias_for(source: Source, module: str) -> str | None:
    for alias, qual in source.imports.items():
        if qual == module:
            return alias
    return None


def _import_name_node(source: Source, module: str, name: str):
    for node in walk(source.root):
        if node.type == "import_from_statement" and source.node_text(node.child_by_field_name("module_name")) == module:
            for child in node.children_by_field_name("name"):
                target = child.child_by_field_name("name") if child.type == "aliased_import" else child
                if target is not None and source.node_text(target) == name:
                    return target
    return None


def _with_severity(item: Finding, severity: str) -> Finding:
    from dataclasses import replace as dc_replace

    return dc_replace(item, severity=severity)
