"""Tier-0 rules on what a kernel writes before it reads, which no single run shows cheaply:

- PLS017 an output ref that the kernel writes on no path (no store, no DMA into it, no helper of
  the file it is passed to writes it, not aliased to an input): the output holds whatever was in
  memory;
- PLS018 a scratch ref (``scratch_shapes=[pltpu.VMEM(...)]``) read on the first grid step before
  anything wrote it: the accumulator that was never zero-initialised.

Both read the kernel with Python's ``ast`` and say something only when the whole kernel is
visible and every use of the ref is understood: a ref that escapes into anything unknown (a call
of a function outside the file, ``.at[...]``, a tuple, a rebinding, ``getattr``/``locals``) may be
written there, and the rules stay silent. The refs are found by position, counted from the end of
the kernel's parameters: the last ones are the scratch refs (one per ``scratch_shapes`` entry),
the outputs come just before them (one per ``out_shape`` entry).

"The first grid step" is the one where every ``pl.program_id(...)`` is 0. PLS018 follows the
kernel's statements in order on that step: a ``pl.when`` block runs when its condition certainly
holds there (``program_id(k) == 0``, and names bound once to such values), is skipped when it
certainly does not (``program_id(k) > 0``), and is otherwise unknown: a write that may happen there
silences every later read; a read there is not said. Python ``if``/``for``/``while``, loops and
functions called through ``lax`` are unknown the same way. A read whose value a
``jnp.where``/``lax.select`` may discard is not said either.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..ast_units import index_of
from ..call_values import pallas_call_at
from ..origins import callee_name, parent_of
from ..types import Finding, KernelSite, Related, Span
from .missing_store import missing_store_place
from .context import RuleContext, finding, python_tree, replace
from .specs import ref_counts

_PURE_ATTRIBUTES = {"shape", "dtype", "ndim", "size"}
_PURE_BUILTINS = {"len", "print", "isinstance", "type", "id", "repr", "str"}
_PURE_MODULES = ("jax.numpy.", "numpy.")
_DISCARDING = {"where", "select", "select_n", "cond", "switch"}  # may drop the value they are given
_OPAQUE_NAMES = {"getattr", "setattr", "locals", "vars", "eval", "exec", "globals", "__dict__"}
_SCRATCH_DATA = ("VMEM", "SMEM")
_SCRATCH_KINDS = {"VMEM", "SMEM", "VMEM_SHARED", "HBM", "ANY"}  # one buffer each (and the semaphores)
_MAX_DEPTH = 4
READ_BEFORE_WRITE = "is read here before anything writes it"  # PLS018's related read (engine/findings/agreement.py)


# ------------------------------------------------------------------------------ the rules


def _tpu_kernels(ctx: RuleContext) -> Iterator[tuple[Any, Any, Any]]:
    """(tree, site, kernel view) of each TPU pallas_call whose kernel the rules can read in full."""
    tree = python_tree(ctx.source)
    if tree is None:
        return
    for site in ctx.sites:
        if site.backend == "gpu":
            continue
        view = _kernel_view(ctx, tree, site)
        if view is not None:
            yield tree, site, view


def unwritten_output(ctx: RuleContext) -> Iterator[Finding]:
    for tree, site, view in _tpu_kernels(ctx):
        if view.outputs is None:
            continue
        call = _call_node(tree, site)
        aliased = _aliased_outputs(call)
        if aliased is None or _returns_value(view.fn):
            continue  # a kernel returning its result: PLS009 says that
        unused = _unused_outputs(call, len(view.outputs))
        for index, name in enumerate(view.outputs):
            if index in aliased or index in unused or name.startswith("_") or _may_write(view, view.fn, name, 0, set()):
                continue
            arg = view.param_nodes[name]
            place = missing_store_place(view.fn)  # where the store belongs, when the kernel shows it
            yield finding(
                "PLS017",
                f"Kernel {site.kernel_name}() never writes its output {name} (output {index} of the "
                f"pallas_call): the output holds whatever was in memory. Nothing stores into it on any path "
                f"(no `{name}[...] = ...`, no store or DMA into it, no helper it is passed to writes it). "
                f"Store the result into it (`{name}[...] = value`), or alias it to an input with "
                f"input_output_aliases.",
                _span(place) if place is not None else _span(arg), kernel=site.kernel_name,
                related=(Related(span=site.span, message=f"the pallas_call whose output {index} is {name}"),)
                + ((Related(span=_span(arg), message=f"the output {name}, never stored to"),) if place is not None else ()))


def scratch_read_before_write(ctx: RuleContext) -> Iterator[Finding]:
    for _, site, view in _tpu_kernels(ctx):
        for info, name in view.scratch:
            if info.kind not in _SCRATCH_DATA:
                continue
            walk = _FirstStep(view, name)
            walk.run(view.fn.body)
            if walk.read is None:
                continue
            yield _at_missing_init(_scratch_finding(ctx, site, view, info, name, walk.read), walk, name)


def _at_missing_init(found: Finding, walk: "_FirstStep", name: str) -> Finding:
    """The finding at the place its init most likely went, the read related: the condition of a ``pl.when``
    that writes the ref but is false on the first step, else the first-step block that writes nothing of it;
    at the read when there is neither."""
    place, said = None, ""
    if walk.skipped_write is not None:
        place = walk.skipped_write
        said = (f"{name} is written only under this condition, which is false on the first grid step (an init "
                "under an inverted condition?)")
    elif walk.first_step_block is not None:
        place = walk.first_step_block
        said = f"this block runs on the first grid step but writes nothing of {name} (its init removed?)"
    if place is None:
        return found
    read = Related(span=found.span, message=f"{name} {READ_BEFORE_WRITE}")
    return dataclasses.replace(found, span=_span(place), message=f"{found.message} — {said}",
                               related=(read,) + tuple(found.related))


def _scratch_finding(ctx: RuleContext, site: KernelSite, view: "_View", info, name: str, read: ast.AST) -> Finding:
    axis = len(site.grid) - 1 if site.grid else None
    pid = f"pl.program_id({axis if axis is not None else 'k'})"
    fix = None
    statement = _top_statement(view, read)
    pl = next((a for a, m in ctx.source.imports.items() if m == "jax.experimental.pallas"), None)
    jnp = next((a for a, m in ctx.source.imports.items() if m == "jax.numpy"), None)
    parent = view.parents.get(id(read))
    if (axis is not None and info.kind == "VMEM" and pl and jnp and statement is not None
            and isinstance(parent, ast.AugAssign) and parent.target is read and isinstance(parent.op, (ast.Add, ast.Sub))):
        indent = " " * statement.col_offset
        text = (f"@{pl}.when({pl}.program_id({axis}) == 0)\n{indent}def _init_{name}():\n"
                f"{indent}    {name}[...] = {jnp}.zeros({name}.shape, {name}.dtype)\n\n{indent}")
        line, column = statement.lineno - 1, statement.col_offset
        fix = replace(f"Zero {name} on the first step of grid axis {axis}", Span(line, column, line, column), text)
    return finding(
        "PLS018",
        f"Scratch ref {name} is read here on the first grid step before anything writes it: scratch buffers "
        f"start with whatever the memory held, so the kernel computes with garbage from its first step. "
        f"Initialise it before the first read, e.g. under `@pl.when({pid} == 0)`: "
        f"`{name}[...] = jnp.zeros({name}.shape, {name}.dtype)` (or the reduction's identity, such as -inf "
        f"for a running max).",
        _span(read), kernel=site.kernel_name, fix=fix,
        related=(Related(span=info.span, message=f"{name} is this scratch buffer, uninitialised when the kernel starts"),))


# ------------------------------------------------------------------------------ the kernel's refs


@dataclass
class _View:
    """One kernel as the rules read it: its ``def``, its output and scratch refs by name, the
    functions of the file by name and every node's parent."""

    fn: ast.FunctionDef
    outputs: list[str] | None  # None: how many is not certain (PLS017 is then silent)
    scratch: list[tuple[object, str]]
    param_nodes: dict[str, ast.arg]
    module_defs: dict[str, list[ast.AST]]
    imports: dict[str, str]
    parents: dict[int, ast.AST] = field(default_factory=dict)
    nested: dict[str, ast.FunctionDef] | None = None  # the kernel's own functions (PLS018, built once)
    bound: dict[str, ast.expr] | None = None  # its names bound once (PLS018)
    names: dict[str, list[ast.Name]] = field(default_factory=dict)  # the kernel's Name nodes by id


class _FileFacts:
    """What every site of one file asks: its functions by position and module-level name, and the
    kernel views already built (both rules read the same ones). Kept in the source's cache, which
    lives for one analysis."""

    def __init__(self, tree: ast.Module) -> None:
        self.by_position: dict[tuple[int, int], list[ast.FunctionDef]] = {}
        for node in index_of(tree).defs:
            if isinstance(node, ast.FunctionDef):
                self.by_position.setdefault((node.lineno - 1, node.col_offset), []).append(node)
        self.module_defs: dict[str, list[ast.AST]] = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.module_defs.setdefault(node.name, []).append(node)
        self.views: dict[tuple, _View | None] = {}


def _facts(ctx: RuleContext, tree: ast.Module) -> _FileFacts:
    memo = ctx.source.cache.setdefault("writes_rules", {})
    if memo.get("tree") is not tree:
        memo["tree"], memo["facts"] = tree, _FileFacts(tree)
    return memo["facts"]


def _kernel_view(ctx: RuleContext, tree: ast.Module, site: KernelSite) -> _View | None:
    """The kernel's refs, or None unless every count is certain and the kernel is fully visible."""
    facts = _facts(ctx, tree)
    key = (site.span, site.kernel_def_span, site.kernel_params)
    if key not in facts.views:
        facts.views[key] = _build_view(ctx, facts, site)
    return facts.views[key]


def _build_view(ctx: RuleContext, facts: _FileFacts, site: KernelSite) -> _View | None:
    params = site.kernel_params
    if site.kernel_def_span is None or params is None or any(p.startswith("*") for p in params):
        return None
    fns = facts.by_position.get((site.kernel_def_span.line, site.kernel_def_span.column), [])
    if len(fns) != 1:
        return None
    fn = fns[0]
    args = fn.args
    if args.vararg is not None or args.kwarg is not None:
        return None
    positional = args.posonlyargs + args.args
    by_name = {a.arg: a for a in positional}
    defaulted = {a.arg for a in positional[len(positional) - len(args.defaults):]} if args.defaults else set()
    if any(p not in by_name or p in defaulted for p in params):
        return None
    scratch = site.scratch_shapes
    if scratch is None or not all(s.kind in _SCRATCH_KINDS or s.kind.startswith("SemaphoreType.") for s in scratch):
        return None  # an entry that may stand for several buffers (a helper's list, a nested tuple)
    outputs = _output_count(site)  # None: the scratch refs are still the last parameters
    counts = ref_counts(site)
    if counts is not None and sum(counts) != len(params):
        return None  # PLS005's mistake: the refs cannot be placed
    if len(params) < (outputs or 1) + len(scratch) or outputs == 0:
        return None
    end = len(params) - len(scratch)
    view = _View(fn=fn, outputs=list(params[end - outputs:end]) if outputs is not None else None,
                 scratch=list(zip(scratch, params[end:])), param_nodes=by_name,
                 module_defs=facts.module_defs, imports=ctx.source.imports)
    if not _read_kernel(view, fn, keep=len(ctx.source.data) <= KEEP_READS_BYTES):
        return None  # the body reaches names in ways the rules cannot follow
    return view


def _output_count(site: KernelSite) -> int | None:
    """How many output refs the kernel gets: ``out_shape``'s entries when each is a
    ``ShapeDtypeStruct(...)``, or when ``out_specs`` has as many readable BlockSpecs (two counts
    that agree); None otherwise (an entry may stand for a pytree of several outputs, or none)."""
    shapes = site.out_shapes
    if shapes is None:
        return None
    if all(s is not None for s in shapes):
        return len(shapes)
    specs = site.out_specs
    if specs is not None and len(specs) == len(shapes) and all(s.certain for s in specs):
        return len(shapes)
    return None


def _returns_value(fn: ast.AST) -> bool:
    return any(isinstance(n, ast.Return) and n.value is not None for n in _direct_nodes(fn) if n is not fn) or \
        any(isinstance(n, ast.Return) and n.value is not None for n in fn.body)


def _opaque(fn: ast.AST) -> bool:
    """The body reaches names in ways the rules cannot follow."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in _OPAQUE_NAMES:
            return True
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return True
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return True
    return False


def _add_parents(view: _View, root: ast.AST) -> None:
    for node in ast.walk(root):
        for child in ast.iter_child_nodes(node):
            view.parents.setdefault(id(child), node)


_READ = "_pallasite_kernel_read"  # (parents, names) of a kernel, kept on its def node
# Kept only for files up to this size: a big generated file's kernels are not edited one at a time,
# and the copies would raise the server's memory high-water mark (3 MiB more after a 5 MB document).
KEEP_READS_BYTES = 1 << 20


def _read_kernel(view: _View, fn: ast.AST, keep: bool = True) -> bool:
    """One walk of the kernel: every node's parent and every name's nodes; False when the body
    reaches names in ways the rules cannot follow (``_opaque``). Kept on ``fn`` when ``keep``: a
    kernel whose function did not change between two analyses keeps its nodes (``ast_units``), so
    its walk is done once per text of the function (the parents are copied: a view adds its
    helpers' ones)."""
    kept = getattr(fn, _READ, None)
    if kept is None:
        kept = _walk_kernel(fn)
        if not keep:
            if kept is False:
                return False
            view.parents, view.names = kept
            return True
        setattr(fn, _READ, kept)
    if kept is False:
        return False
    parents, names = kept
    view.parents.update(parents)
    view.names.update(names)
    return True


def _walk_kernel(fn: ast.AST) -> tuple[dict, dict] | bool:
    stack = [fn]
    parents: dict[int, ast.AST] = {}
    names: dict[str, list[ast.Name]] = {}
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            if node.id in _OPAQUE_NAMES:
                return False
            names.setdefault(node.id, []).append(node)
        elif isinstance(node, (ast.Global, ast.Nonlocal)) or (isinstance(node, ast.Attribute) and node.attr == "__dict__"):
            return False
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            stack.append(child)
    for found in names.values():
        found.sort(key=lambda n: (n.lineno, n.col_offset))
    return parents, names


def _call_node(tree: ast.Module, site: KernelSite) -> ast.Call | None:
    call = pallas_call_at(tree, site.span)
    if call is not None:
        return call
    return next((n for n in index_of(tree).calls if callee_name(n) == "partial" and _span(n) == site.span), None)


def _unused_outputs(call: ast.Call | None, count: int) -> set[int]:
    """The outputs the caller drops: every one when ``pallas_call(...)(...)`` is a statement of its
    own (or inside ``jax.block_until_ready``), those unpacked into ``_``-names (``_, dq = ...``): a
    dummy output that nobody reads needs no write."""
    applied = parent_of(call) if call is not None else None
    if not (isinstance(applied, ast.Call) and applied.func is call):
        return set()
    holder = parent_of(applied)
    if isinstance(holder, ast.Call) and callee_name(holder) == "block_until_ready" and applied in holder.args:
        holder = parent_of(holder)
        if not isinstance(holder, ast.Expr):
            return set()
    if isinstance(holder, ast.Expr):
        return set(range(count))
    if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], (ast.Tuple, ast.List)):
        names = holder.targets[0].elts
        if len(names) == count and not any(isinstance(n, ast.Starred) for n in names):
            return {i for i, n in enumerate(names) if isinstance(n, ast.Name) and n.id.startswith("_")}
    return set()


def _aliased_outputs(call: ast.Call | None) -> set[int] | None:
    """The output indices ``input_output_aliases`` gives an input's contents (they need no write);
    None when the call's keywords are not all visible or the aliases are not literal."""
    if call is None:
        return None
    name = callee_name(call)
    if name is None or not (name.endswith("pallas_call") or name == "partial"):
        return None  # a wrapper of the file: it may add keywords of its own
    if any(k.arg is None for k in call.keywords):
        return None  # **options may carry input_output_aliases
    value = next((k.value for k in call.keywords if k.arg == "input_output_aliases"), None)
    if value is None:
        return set()
    if not isinstance(value, ast.Dict):
        return None
    out = set()
    for key, val in zip(value.keys, value.values):
        if not (isinstance(key, ast.Constant) and isinstance(val, ast.Constant) and isinstance(val.value, int)):
            return None
        out.add(val.value)
    return out


# ------------------------------------------------------------------------------ uses of a ref


def _qualname(view: _View, node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return view.imports.get(node.id) or (node.id if node.id in _PURE_BUILTINS else None)
    if isinstance(node, ast.Attribute):
        base = _qualname(view, node.value)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _pure_call(view: _View, call: ast.Call) -> bool:
    """A function that only looks at the ref (its shape, dtype or values) and never stores into it."""
    name = _qualname(view, call.func) or ""
    return name in _PURE_BUILTINS or name.startswith(_PURE_MODULES) or (
        name.startswith("jax.experimental.pallas") and name.rsplit(".", 1)[-1] in ("load", "debug_print"))


def _use(view: _View, node: ast.Name) -> str:
    """How one occurrence of a ref's name uses it: "read" (``r[...]`` loaded), "write"
    (``r[...] = v``), "update" (``r[...] += v``), "pure" (``r.shape``, ``jnp.zeros_like(r)``),
    "call" (an argument of a call, for the caller to follow) or "unknown"."""
    if not isinstance(node.ctx, ast.Load):
        return "unknown"  # the name rebound or deleted
    parent = view.parents.get(id(node))
    if isinstance(parent, ast.Subscript) and parent.value is node:
        if isinstance(parent.ctx, ast.Store):
            holder = view.parents.get(id(parent))
            return "update" if isinstance(holder, ast.AugAssign) else "write"
        if isinstance(parent.ctx, ast.Del):
            return "unknown"
        outer = view.parents.get(id(parent))
        if isinstance(outer, (ast.Subscript, ast.Attribute)) and outer.value is parent and \
                not isinstance(outer.ctx, ast.Load):
            return "unknown"
        if isinstance(outer, ast.Attribute) and outer.value is parent and outer.attr in _PURE_ATTRIBUTES:
            return "pure"  # ``r[...].shape``: the values are not used
        return "read"
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return "pure" if parent.attr in _PURE_ATTRIBUTES and isinstance(parent.ctx, ast.Load) else "unknown"
    call = parent
    if isinstance(parent, ast.keyword):
        call = view.parents.get(id(parent))
    if isinstance(call, ast.Call) and node is not call.func:
        return "pure" if _pure_call(view, call) else "call"
    return "unknown"


def _occurrences(root: ast.AST, name: str) -> Iterator[ast.Name]:
    for node in ast.walk(root):
        if isinstance(node, ast.Name) and node.id == name:
            yield node


def _may_write(view: _View, fn: ast.AST, name: str, depth: int, seen: set) -> bool:
    """Whether any use of ``name`` in ``fn`` (nested functions included: a closure writes the same
    ref) may store into it, following it into the file's functions it is passed to."""
    if (id(fn), name) in seen:
        return False
    seen.add((id(fn), name))
    for node in view.names.get(name, ()) if fn is view.fn else _occurrences(fn, name):
        use = _use(view, node)
        if use in ("read", "pure"):
            continue
        if use == "call" and depth < _MAX_DEPTH:
            target = _helper_parameter(view, node)
            if target is not None:
                helper, param = target
                if not _may_write(view, helper, param, depth + 1, seen):
                    continue
        return True
    return False


def _helper_parameter(view: _View, node: ast.Name) -> tuple[ast.AST, str] | None:
    """(the file's function, its parameter) that a call passing ``node`` binds it to: a plain
    function defined in the kernel or at module level, undecorated, fully visible."""
    parent = view.parents.get(id(node))
    call = view.parents.get(id(parent)) if isinstance(parent, ast.keyword) else parent
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return None
    in_kernel = False
    current = call
    while current is not None and not in_kernel:
        in_kernel = current is view.fn
        current = view.parents.get(id(current))
    local = [n for n in ast.walk(view.fn) if isinstance(n, ast.FunctionDef) and n.name == call.func.id
             and n is not view.fn] if in_kernel else []  # a helper's call sees the module's functions
    candidates = local or view.module_defs.get(call.func.id, [])
    if len(candidates) != 1 or not isinstance(candidates[0], ast.FunctionDef):
        return None
    helper = candidates[0]
    if helper.decorator_list or _opaque(helper) or helper.args.kwarg is not None:
        return None
    positional = helper.args.posonlyargs + helper.args.args
    if isinstance(parent, ast.keyword):
        names = [a.arg for a in helper.args.args + helper.args.kwonlyargs]
        param = parent.arg if parent.arg in names else None
    else:
        index = call.args.index(node)
        if any(isinstance(a, ast.Starred) for a in call.args[:index + 1]) or index >= len(positional):
            return None
        param = positional[index].arg
    if param is None:
        return None
    if id(helper) not in {id(n) for n in ast.walk(view.fn)}:
        _add_parents(view, helper)
    return helper, param


# ------------------------------------------------------------------------------ the first grid step


class _FirstStep:
    """Follows the kernel's statements as they run on the first grid step, for one scratch ref:
    ``read`` is the first read that certainly happens there before any write may have."""

    def __init__(self, view: _View, name: str) -> None:
        self.view = view
        self.name = name
        self.read: ast.AST | None = None
        self.written = False
        # where the missing init most likely went (issue 57): a ``pl.when`` whose condition is false on the
        # first step around a write of the ref (an inverted init), else a first-step block that writes
        # nothing of it (an init removed)
        self.skipped_write: ast.expr | None = None
        self.first_step_block: ast.AST | None = None
        if view.nested is None:
            view.nested = {n.name: n for n in ast.walk(view.fn) if isinstance(n, ast.FunctionDef) and n is not view.fn}
            view.bound = _bound_once(view.fn)
        self.nested, self.bound = view.nested, view.bound

    @property
    def done(self) -> bool:
        return self.written or self.read is not None

    def run(self, statements: list[ast.stmt]) -> bool:
        """Follow ``statements`` in order; True when a ``return`` among them ends the function."""
        for stmt in statements:
            if self.done:
                return False
            if isinstance(stmt, ast.FunctionDef):
                self._definition(stmt)
            elif isinstance(stmt, ast.Expr) and self._when_call(stmt) is not None:
                cond, body = self._when_call(stmt)
                self._when(cond, body.body, stmt)
            elif isinstance(stmt, ast.With):
                for item in stmt.items:
                    self._simple(item.context_expr)
                if self.run(stmt.body):
                    return True
            elif isinstance(stmt, ast.Return):
                self._simple(stmt)
                return True
            elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Pass, ast.Assert)):
                self._simple(stmt)
            else:  # if / for / while / try / match / raise / class: may or may not run on the first step
                self._unknown(stmt)
        return False

    def _definition(self, fn: ast.FunctionDef) -> None:
        if not fn.decorator_list:
            return  # runs where it is called: statements naming it are unknown (``_deferred``)
        deco = fn.decorator_list[0]
        if len(fn.decorator_list) == 1 and isinstance(deco, ast.Call) and callee_name(deco) == "when" \
                and len(deco.args) == 1 and not deco.keywords:
            self._when(deco.args[0], fn.body, deco)
        else:
            self._unknown(fn)

    def _when_call(self, stmt: ast.Expr) -> tuple[ast.expr, ast.FunctionDef] | None:
        """``pl.when(cond)(f)`` with ``f`` a function of the kernel."""
        call = stmt.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Call) and callee_name(call.func) == "when" \
                and len(call.func.args) == 1 and len(call.args) == 1 and isinstance(call.args[0], ast.Name) \
                and call.args[0].id in self.nested and not self.nested[call.args[0].id].decorator_list:
            return call.func.args[0], self.nested[call.args[0].id]
        return None

    def _when(self, cond: ast.expr, body: list[ast.stmt], where: ast.AST) -> None:
        self._simple(cond)
        if self.done:
            return
        holds = _truth(_at_first_step(cond, self.bound, self.view, 0))
        if holds is True:
            self.run(body)
            if not self.done and self.first_step_block is None:
                self.first_step_block = where
        elif holds is False:
            if self.skipped_write is None and any(use in ("write", "update") for stmt in body
                                                  for _, use in self._uses(stmt, deferred=False)):
                self.skipped_write = cond
        elif holds is None:
            for stmt in body:
                self._unknown(stmt)

    def _uses(self, root: ast.AST, *, deferred: bool) -> list[tuple[ast.Name, str]]:
        """The ref's uses in ``root``: outside nested functions and lambdas (``deferred=False``),
        or everywhere, with the kernel functions it names, transitively (``deferred=True``).
        Found from the kernel's names (read once), each placed by walking up its parents."""
        found: list[tuple[ast.Name, str]] = []
        todo, seen = [root], set()
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            for name in self.view.names.get(self.name, ()):
                if self._inside(name, node, direct=not deferred):
                    found.append((name, _use(self.view, name)))
            if deferred:
                for fn_name, fn in self.nested.items():
                    if id(fn) not in seen and any(self._inside(n, node, direct=False)
                                                  for n in self.view.names.get(fn_name, ())):
                        todo.append(fn)
        return found

    def _inside(self, node: ast.AST, root: ast.AST, *, direct: bool) -> bool:
        """``node`` is in ``root`` (and, ``direct``, not in a lambda or function defined there)."""
        current = node
        while current is not None:
            if current is root:
                return True
            if direct and isinstance(current, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return False
            current = self.view.parents.get(id(current))
        return False

    def _unknown(self, node: ast.AST) -> None:
        """Code that may or may not run on the first step: a write there may have happened, and
        a ``return`` or ``raise`` there may end the kernel before any later read."""
        if any(use not in ("read", "pure") for _, use in self._uses(node, deferred=True)):
            self.written = True
        elif any(isinstance(n, (ast.Return, ast.Raise)) for n in _direct_nodes(node)):
            self.written = True  # (not a write: what follows is no longer certain to run)

    def _simple(self, stmt: ast.AST) -> None:
        # code deferred into lambdas and kernel functions named here: unknown whether it runs
        deferred = [n for n in _deferred_roots(stmt, self.nested)]
        for root in deferred:
            self._unknown(root)
        if self.done:
            return
        uses = self._uses(stmt, deferred=False)
        if any(use not in ("read", "pure", "write", "update") for _, use in uses):
            self.written = True
            return
        reads = [(n, use) for n, use in uses if use in ("read", "update") and not self._discarded(n, stmt)]
        if reads and not deferred:
            in_targets = isinstance(stmt, ast.Assign) and any(
                n in set(ast.walk(t)) for n, _ in reads for t in stmt.targets)
            if not in_targets:
                node, _ = min(reads, key=lambda r: (r[0].lineno, r[0].col_offset))
                self.read = self.view.parents[id(node)]
                return
        if any(use in ("write", "update") for _, use in uses):
            self.written = True

    def _discarded(self, node: ast.Name, stop: ast.AST) -> bool:
        """The read is an argument of ``jnp.where``/``lax.select``/``lax.cond`` (its value may be
        dropped) or of ``jnp.zeros_like`` and the like (only its shape and dtype are used)."""
        current = self.view.parents.get(id(node))
        while current is not None and current is not stop:
            if isinstance(current, ast.Call) and ((callee_name(current) or "") in _DISCARDING or
                                                   (callee_name(current) or "").endswith("_like")):
                return True
            current = self.view.parents.get(id(current))
        return False


def _direct_nodes(root: ast.AST) -> Iterator[ast.AST]:
    """``root``'s nodes that run with it: not the bodies of the lambdas and functions it defines."""
    todo = [root]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            todo.append(child)


def _deferred_roots(stmt: ast.AST, nested: dict[str, ast.AST]) -> Iterator[ast.AST]:
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not stmt:
            yield node
        elif isinstance(node, ast.Name) and node.id in nested:
            yield nested[node.id]


def _bound_once(fn: ast.AST) -> dict[str, ast.expr]:
    """Names of the kernel bound exactly once, by a plain ``name = value`` (or an unpacking of a
    tuple of values); every other binding makes a name unknown."""
    bound: dict[str, list[ast.expr | None]] = {}

    def unknown(target: ast.AST | None) -> None:
        for n in ast.walk(target) if target is not None else ():
            if isinstance(n, ast.Name):
                bound.setdefault(n.id, []).append(None)

    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    bound.setdefault(t.id, []).append(node.value)
                elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(node.value.elts):
                    for target, value in zip(t.elts, node.value.elts):
                        if isinstance(target, ast.Name):
                            bound.setdefault(target.id, []).append(value)
                        else:
                            unknown(target)
                else:
                    unknown(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr)):
            unknown(node.target)
        elif isinstance(node, ast.withitem):
            unknown(node.optional_vars)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Del):
            unknown(node)
        elif isinstance(node, ast.arg):
            bound.setdefault(node.arg, []).append(None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not fn:
            bound.setdefault(node.name, []).append(None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.setdefault((alias.asname or alias.name).split(".")[0], []).append(None)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.setdefault(node.name, []).append(None)
    return {name: values[0] for name, values in bound.items() if len(values) == 1 and values[0] is not None}


def _at_first_step(node: ast.AST | None, bound: dict[str, ast.expr], view: _View, depth: int):
    """The value ``node`` certainly has on the first grid step (every program_id is 0): an int
    or a bool, or None when it is not certain."""
    if node is None or depth > 12:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int)):
        return node.value
    if isinstance(node, ast.Name):
        return _at_first_step(bound.get(node.id), bound, view, depth + 1)
    if isinstance(node, ast.Call):
        name = _qualname(view, node.func) or ""
        tail = name.rsplit(".", 1)[-1]
        if name.startswith("jax.experimental.pallas") and tail == "program_id":
            return 0
        if name.startswith(("jax.numpy.", "numpy.")) and tail in ("logical_and", "logical_or", "logical_not") \
                and not node.keywords:
            values = [_truth(_at_first_step(a, bound, view, depth + 1)) for a in node.args]
            if tail == "logical_not":
                return (not values[0]) if len(values) == 1 and values[0] is not None else None
            return _and(values) if tail == "logical_and" else _or(values)
        return None
    if isinstance(node, ast.UnaryOp):
        value = _at_first_step(node.operand, bound, view, depth + 1)
        if value is None:
            return None
        if isinstance(node.op, ast.Not):
            return not value
        if isinstance(node.op, ast.USub) and not isinstance(value, bool):
            return -value
        return None
    if isinstance(node, ast.BoolOp):
        values = [_truth(_at_first_step(v, bound, view, depth + 1)) for v in node.values]
        return _and(values) if isinstance(node.op, ast.And) else _or(values)
    if isinstance(node, ast.BinOp):
        left = _at_first_step(node.left, bound, view, depth + 1)
        right = _at_first_step(node.right, bound, view, depth + 1)
        if isinstance(node.op, ast.BitAnd) and (left is False or right is False):
            return False
        if isinstance(node.op, ast.BitOr) and (left is True or right is True):
            return True
        if isinstance(node.op, ast.Mult) and _int_like(node.left) and _int_like(node.right) and (
                (left == 0 and not isinstance(left, bool)) or (right == 0 and not isinstance(right, bool))):
            return 0  # ``pl.program_id(1) * nk + pl.program_id(2)``: a step count, 0 on the first step
        if left is None or right is None:
            return None
        if isinstance(node.op, (ast.BitAnd, ast.BitOr)) and isinstance(left, bool) and isinstance(right, bool):
            return (left and right) if isinstance(node.op, ast.BitAnd) else (left or right)
        if isinstance(left, bool) or isinstance(right, bool):
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.FloorDiv) and right:
            return left // right
        if isinstance(node.op, ast.Mod) and right:
            return left % right
        return None
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left = _at_first_step(node.left, bound, view, depth + 1)
        right = _at_first_step(node.comparators[0], bound, view, depth + 1)
        if left is None or right is None or isinstance(left, bool) or isinstance(right, bool):
            return None
        op = node.ops[0]
        table = {ast.Eq: left == right, ast.NotEq: left != right, ast.Lt: left < right, ast.LtE: left <= right,
                 ast.Gt: left > right, ast.GtE: left >= right}
        return table.get(type(op))
    return None


def _int_like(node: ast.AST) -> bool:
    """A name, attribute, int or call (``pl.num_programs(1)``) that holds a count in a condition:
    what multiplies a zero into a zero (a float there might be inf)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    return isinstance(node, (ast.Name, ast.Attribute, ast.Call))


def _truth(value) -> bool | None:
    return None if value is None else bool(value)


def _and(values: list[bool | None]) -> bool | None:
    if any(v is False for v in values):
        return False
    return True if values and all(v is True for v in values) else None


def _or(values: list[bool | None]) -> bool | None:
    if any(v is True for v in values):
        return True
    return False if values and all(v is False for v in values) else None


def _top_statement(view: _View, node: ast.AST) -> ast.stmt | None:
    """The statement of the kernel's own body that holds ``node``."""
    current = node
    while current is not None:
        parent = view.parents.get(id(current))
        if parent is view.fn:
            return current if current in view.fn.body else None
        current = parent
    return None


def _span(node: ast.AST) -> Span:
    if isinstance(node, ast.arg):
        return Span(node.lineno - 1, node.col_offset, node.lineno - 1, node.col_offset + len(node.arg))
    return Span(node.lineno - 1, node.col_offset, node.end_lineno - 1, node.end_col_offset)


RULES = (unwritten_output, scratch_read_before_write)
