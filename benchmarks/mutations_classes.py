"""Rule-first mutation set for issue 43's classes (a benchmark, not part of the test run).

The sites are chosen by the rules below, written before any mutant was checked; only Python's
``ast`` reads the files (never pallasite's analysis). Each edit keeps the file's line count.
"Kernel functions": functions of the file with two or more parameters whose names end in ``_ref``
(or ``_hbm``), and the ``pl.when`` blocks nested in them.

- ``dma-past-end`` (class 1): in a kernel function, the first index of ``X.at[i, ...]`` given as the
  source of ``make_async_copy``/``async_copy``, when it is not a slice or ``pl.ds``, becomes
  ``(i) + 1`` (the page past the one the table names). True line: the index's line.
- ``accumulator-not-zeroed`` (classes 1, 3): in a ``pl.when(X == 0)`` block of a kernel function, a
  store ``r[...] = v`` to a ref the kernel also reads elsewhere becomes ``pass``. True lines: the
  store's line, the ``pl.when`` decorator's and the ``def``'s lines.
- ``output-unwritten`` (class 2): the only store statement to a kernel parameter whose name starts
  with ``o`` or contains ``out`` becomes ``pass``. True line: the store's line.
- ``parallel-reduction`` (class 3): the last ``"arbitrary"`` string of a ``dimension_semantics``
  tuple becomes ``"parallel"``. True line: that entry's line.
- ``blockspec-old-order`` (class 4): ``pl.BlockSpec(a, b)`` with two positional arguments becomes
  ``pl.BlockSpec(b, a)`` (only when both sit on one line). True line: that line.
- ``grid-past-end`` (class 4): the first entry ``e`` of a ``grid=(...)`` tuple of a ``pallas_call``
  becomes ``e + 1``. True line: the entry's line.

Issue 50's classes (rules written 2026-12-06, before any of their mutants was checked; ``--classes``
names them, the default run is issue 43's six):

- ``accumulator-rmw``: at an ``accumulator-not-zeroed`` site, the store ``r[...] = v`` becomes
  ``r[...] += v`` (the init reads the memory it should initialise). True line: the store's line.
- ``accumulator-deleted``: at an ``accumulator-not-zeroed`` site, the store's lines are made empty
  (a deleted statement; empty lines keep the line count). True line: its first line.
- ``output-deleted``: at an ``output-unwritten`` site, the store's lines are made empty. True line:
  its first line.
- ``out-shape-dtype``: the dtype argument of a ``jax.ShapeDtypeStruct(...)`` written inside the value
  of an ``out_shape=`` keyword, or on the right of an assignment to a name containing ``out_shape``,
  becomes ``jnp.float32`` when its text names ``bfloat16``/``bf16``, else ``jnp.bfloat16``. True
  line: the dtype argument's line.

The bases are jax's ops/tpu kernels that have a benchmark task (``generalisation_corpus.py``), jax's
paged attention with the task ``PAGED_TASK`` below (``inline_seq_dim=False``: the default inline
kernel zeroes its outputs a second time, so removing one init would change nothing), and JAXBench's
8 hand-tuned kernels.

At most ``CAP`` mutants per file and class, the ones with the smallest sha256 of
(file id, class, line, column). Scoring as in ``benchmarks/mutations.py``: each mutant and its base
are checked with ``pallasite check --format json --tiers T --target v6e``; "caught" when the mutant
has an error or warning (not PLS9xx/PLS205/PLS305-307) the base does not have (code, line,
message), "at the line" when one starts within ±1 of a true line.

    .venv/bin/python benchmarks/mutations_classes.py JAXBENCH_CHECKOUT [--tiers 0,1,2] [--classes a,b] [--cap 1]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CAP = 2
CLASSES = ("dma-past-end", "accumulator-not-zeroed", "output-unwritten", "parallel-reduction",
           "blockspec-old-order", "grid-past-end")
CLASSES_50 = ("accumulator-rmw", "accumulator-deleted", "output-deleted", "out-shape-dtype")
PAGED = "jax/experimental/pallas/ops/tpu/paged_attention/paged_attention_kernel.py"
PAGED_TASK = """

# --- task appended by benchmarks/mutations_classes.py (not part of jax's file) ---
PALLASITE_ENTRY = "bench_paged"
TOLERANCE = {"atol": 5e-2, "rtol": 5e-2}  # the kernel rounds k and v to bfloat16


def bench_paged(q, k_pages, v_pages, lengths, page_indices):
    return paged_attention(q, k_pages, v_pages, lengths, page_indices, pages_per_compute_block=2,
                           inline_seq_dim=False)


def example_inputs():
    kq, kk, kv = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(kq, (2, 8, 128), jnp.float32)
    k_pages = jax.random.normal(kk, (1, 8, 16, 128), jnp.float32)
    v_pages = jax.random.normal(kv, (1, 8, 16, 128), jnp.float32)
    lengths = jnp.array([64, 40], jnp.int32)
    page_indices = jnp.array([[3, 1, 6, 0], [2, 7, 5, 4]], jnp.int32)
    return q, k_pages, v_pages, lengths, page_indices


def reference(q, k_pages, v_pages, lengths, page_indices):
    b, _, d = q.shape
    k = k_pages[0][page_indices].reshape(b, -1, d)
    v = v_pages[0][page_indices].reshape(b, -1, d)
    s = jnp.einsum("bhd,btd->bht", q, k)
    s = jnp.where(jnp.arange(k.shape[1])[None, None, :] < lengths[:, None, None], s, -jnp.inf)
    return jnp.einsum("bht,btd->bhd", jax.nn.softmax(s, axis=-1), v)
"""
JAXBENCH = ("1p_Flash_Attention", "2p_GQA_Attention", "3p_MLA_Attention", "4p_Sparse_Attention",
            "6p_Paged_Attention", "7p_Ragged_Paged_Attention", "8p_GEMM", "11p_Megablox_GMM")
NOT_CAUGHT = ("PLS205", "PLS305", "PLS306", "PLS307")


def _kernels(tree: ast.Module) -> list[ast.FunctionDef]:
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            refs = [a for a in fn.args.posonlyargs + fn.args.args if a.arg.endswith(("_ref", "_hbm"))]
            if len(refs) >= 2:
                out.append(fn)
    return out


def _is_when(d: ast.expr) -> bool:
    return isinstance(d, ast.Call) and getattr(d.func, "attr", getattr(d.func, "id", "")) == "when"


def _stored(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript) \
            and isinstance(stmt.targets[0].value, ast.Name):
        return stmt.targets[0].value.id
    return None


def sites(text: str) -> dict[str, list[tuple[int, int, list[tuple[int, int, int, int, str]], list[int]]]]:
    """class -> [(line, col, edits [(line, col, end_line, end_col, new)], true lines)]."""
    tree = ast.parse(text)
    lines = text.splitlines()
    found: dict[str, list] = {c: [] for c in CLASSES + CLASSES_50}
    seg = lambda n: ast.get_source_segment(text, n)  # noqa: E731
    kernels = _kernels(tree)
    for fn in kernels:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "make_async_copy", "async_copy") and node.args:
                src = node.args[0]
                if isinstance(src, ast.Subscript) and isinstance(src.value, ast.Attribute) and src.value.attr == "at":
                    idx = src.slice.elts[0] if isinstance(src.slice, ast.Tuple) else src.slice
                    if not isinstance(idx, ast.Slice) and not (isinstance(idx, ast.Call) and
                                                               getattr(idx.func, "attr", "") in ("ds", "dslice")):
                        found["dma-past-end"].append((idx.lineno, idx.col_offset, [(
                            idx.lineno, idx.col_offset, idx.end_lineno, idx.end_col_offset, f"({seg(idx)}) + 1")], [idx.lineno]))
        reads: dict[str, int] = {}
        stores: dict[str, list[ast.stmt]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load):
                reads[node.value.id] = reads.get(node.value.id, 0) + 1
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) and isinstance(node.target.value, ast.Name):
                reads[node.target.value.id] = reads.get(node.target.value.id, 0) + 1
            if isinstance(node, ast.stmt) and (name := _stored(node)):
                stores.setdefault(name, []).append(node)
        for block in ast.walk(fn):
            if not isinstance(block, ast.FunctionDef) or block is fn:
                continue
            for d in block.decorator_list:
                cond = d.args[0] if _is_when(d) and d.args else None
                if isinstance(cond, ast.Compare) and len(cond.comparators) == 1 and \
                        isinstance(cond.comparators[0], ast.Constant) and cond.comparators[0].value == 0:
                    for stmt in block.body:
                        name = _stored(stmt)
                        if name and reads.get(name):
                            found["accumulator-not-zeroed"].append((stmt.lineno, stmt.col_offset, _to_pass(stmt, lines),
                                                                    [stmt.lineno, d.lineno, block.lineno]))
                            found["accumulator-rmw"].append((stmt.lineno, stmt.col_offset, _to_rmw(stmt, lines),
                                                             [stmt.lineno]))
                            found["accumulator-deleted"].append((stmt.lineno, stmt.col_offset, _to_empty(stmt, lines),
                                                                 [stmt.lineno]))
        params = {a.arg for a in fn.args.posonlyargs + fn.args.args}
        for name, stmts in stores.items():
            if name in params and (name.startswith("o") or "out" in name) and len(stmts) == 1:
                stmt = stmts[0]
                found["output-unwritten"].append((stmt.lineno, stmt.col_offset, _to_pass(stmt, lines), [stmt.lineno]))
                found["output-deleted"].append((stmt.lineno, stmt.col_offset, _to_empty(stmt, lines), [stmt.lineno]))
    for dtype in _out_shape_dtypes(tree):
        said = seg(dtype) or ""
        new = "jnp.float32" if "bfloat16" in said or "bf16" in said else "jnp.bfloat16"
        found["out-shape-dtype"].append((dtype.lineno, dtype.col_offset, [(
            dtype.lineno, dtype.col_offset, dtype.end_lineno, dtype.end_col_offset, new)], [dtype.lineno]))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "dimension_semantics" and isinstance(node.value, (ast.Tuple, ast.List)):
            arb = [e for e in node.value.elts if isinstance(e, ast.Constant) and e.value == "arbitrary"]
            if arb:
                e = arb[-1]
                found["parallel-reduction"].append((e.lineno, e.col_offset, [(
                    e.lineno, e.col_offset, e.end_lineno, e.end_col_offset, '"parallel"')], [e.lineno]))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "BlockSpec" \
                and len(node.args) == 2 and not node.keywords and node.lineno == node.end_lineno:
            a, b = node.args
            found["blockspec-old-order"].append((node.lineno, node.col_offset, [(
                a.lineno, a.col_offset, b.end_lineno, b.end_col_offset, f"{seg(b)}, {seg(a)}")], [node.lineno]))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "pallas_call":
            for kw in node.keywords:
                if kw.arg == "grid" and isinstance(kw.value, ast.Tuple) and kw.value.elts:
                    e = kw.value.elts[0]
                    found["grid-past-end"].append((e.lineno, e.col_offset, [(
                        e.lineno, e.col_offset, e.end_lineno, e.end_col_offset, f"{seg(e)} + 1")], [e.lineno]))
    return found


def _to_pass(stmt: ast.stmt, lines: list[str]) -> list[tuple[int, int, int, int, str]]:
    last = stmt.end_lineno or stmt.lineno
    edits = [(stmt.lineno, stmt.col_offset, stmt.lineno, len(lines[stmt.lineno - 1].encode()), "pass")]
    edits += [(ln, 0, ln, len(lines[ln - 1].encode()), "") for ln in range(stmt.lineno + 1, last + 1)]
    return edits


def _to_empty(stmt: ast.stmt, lines: list[str]) -> list[tuple[int, int, int, int, str]]:
    last = stmt.end_lineno or stmt.lineno
    return [(ln, 0, ln, len(lines[ln - 1].encode()), "") for ln in range(stmt.lineno, last + 1)]


def _to_rmw(stmt: ast.stmt, lines: list[str]) -> list[tuple[int, int, int, int, str]]:
    target = stmt.targets[0]
    line = lines[target.end_lineno - 1].encode()
    at = line.index(b"=", target.end_col_offset)
    return [(target.end_lineno, at, target.end_lineno, at + 1, "+=")]


def _out_shape_dtypes(tree: ast.Module) -> list[ast.expr]:
    """The dtype arguments of ShapeDtypeStruct calls inside an ``out_shape=`` keyword's value or on the
    right of an assignment to a name containing ``out_shape``."""
    roots = [n.value for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg == "out_shape"]
    roots += [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and "out_shape" in t.id for t in n.targets)]
    out, seen = [], set()
    for root in roots:
        for call in ast.walk(root):
            if not (isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", "")) == "ShapeDtypeStruct"):
                continue
            dtype = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "dtype"), None)
            if dtype is not None and (dtype.lineno, dtype.col_offset) not in seen:
                seen.add((dtype.lineno, dtype.col_offset))
                out.append(dtype)
    return out


def apply(text: str, edits: list[tuple[int, int, int, int, str]]) -> str:
    data = text.splitlines(keepends=True)
    for line, col, end_line, end_col, new in sorted(edits, reverse=True):
        first, last = data[line - 1].encode(), data[end_line - 1].encode()
        data[line - 1:end_line] = [(first[:col] + new.encode() + last[end_col:]).decode()] + [""] * (end_line - line)
    out = "".join(data)
    assert out.count("\n") == text.count("\n")
    return out


def choose(file_id: str, cls: str, items: list, cap: int) -> list:
    key = lambda s: hashlib.sha256(f"{file_id}|{cls}|{s[0]}|{s[1]}".encode()).hexdigest()  # noqa: E731
    return sorted(items, key=key)[:cap]


def check(path: Path, tiers: str) -> list[dict]:
    out = subprocess.run([str(Path(sys.executable).parent / "pallasite"), "check", str(path), "--format", "json", "--tiers", tiers,
                          "--target", "v6e"], capture_output=True, text=True)
    try:
        return [f for file in json.loads(out.stdout)["files"] for f in file["findings"]]
    except (json.JSONDecodeError, KeyError):
        return []


def _key(f: dict) -> tuple:
    return (f["code"], f["line"], f["message"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("jaxbench", type=Path, help="the accelerator-agents/JAXBench checkout")
    parser.add_argument("--tiers", default="0,1,2,3")
    parser.add_argument("--classes", default=",".join(CLASSES))
    parser.add_argument("--cap", type=int, default=CAP)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", default="", help="only the files whose id contains one of these (comma-separated)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from generalisation_corpus import KERNELS, base_text

    files: list[tuple[str, str, Path | None]] = []
    for k in KERNELS:
        if k.base.startswith("jax:"):
            text = base_text(k, None, None)
            if text is not None:
                files.append((k.id, text, None))
    import importlib.util

    paged = Path(importlib.util.find_spec("jax").origin).parent.parent / PAGED
    files.append(("jax-paged-attention", paged.read_text(encoding="utf-8") + PAGED_TASK, None))
    for name in JAXBENCH:
        folder = args.jaxbench / "benchmark" / name
        files.append((f"jaxbench-{name}", (folder / "optimized.py").read_text(), folder / "baseline.py"))
    if args.only:
        files = [f for f in files if any(part in f[0] for part in args.only.split(","))]
    classes = args.classes.split(",")
    score = {c: [0, 0, 0] for c in classes}  # mutants, caught, at the line
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for file_id, text, baseline in files:
            found = sites(text)
            if not any(found[c] for c in classes):
                continue
            folder = Path(tmp) / file_id
            folder.mkdir()
            if baseline is not None and baseline.exists():
                shutil.copy(baseline, folder / "baseline.py")
            base_path = folder / "optimized.py"
            base_path.write_text(text)
            base = {_key(f) for f in check(base_path, args.tiers)}
            for cls in classes:
                for line, col, edits, true_lines in choose(file_id, cls, found[cls], args.cap):
                    mutant = folder / f"m_{cls}_{line}_{col}.py"
                    mutant.write_text(apply(text, edits))
                    (folder / "optimized.py").write_text(apply(text, edits))  # the name baseline pairing reads
                    new = [f for f in check(folder / "optimized.py", args.tiers) if _key(f) not in base
                           and f["severity"] in ("error", "warning") and not f["code"].startswith("PLS9")
                           and f["code"] not in NOT_CAUGHT]
                    (folder / "optimized.py").write_text(text)
                    at = any(abs(f["line"] - t) <= 1 for f in new for t in true_lines)
                    score[cls][0] += 1
                    score[cls][1] += bool(new)
                    score[cls][2] += at
                    rows.append({"file": file_id, "class": cls, "line": line, "true": true_lines, "caught": bool(new),
                                 "at_line": at, "found": [(f["code"], f["line"]) for f in new]})
                    print(json.dumps(rows[-1]), flush=True)
    for cls, (n, caught, at) in score.items():
        print(f"{cls}: {n} mutants, {caught} caught, {at} at the line ±1")
    if args.out:
        args.out.write_text(json.dumps({"tiers": args.tiers, "score": score, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
