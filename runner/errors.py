"""An exception from lowering or compiling a kernel, as a plain JSON record (worker side).

The record keeps everything ``engine/findings/locate.py`` needs to put the error at the right line of the
user's file, without jax on the client side:

- ``type``: the exception class name (of the most telling exception in the chain);
- ``sentence``: the meaningful sentence, cleaned of MLIR dumps, traceback noise and doc links;
- ``message``: the full message with MLIR dumps taken out; ``detail``: the dumps themselves;
- ``frames``: every traceback frame in the user's file across the whole ``__cause__`` /
  ``__context__`` chain, innermost last (``{"file", "line", "function", "column", "end_line",
  "end_column"}``; columns are CPython's UTF-8 byte offsets, or None);
- ``mentions``: ``path:line`` places the message names in the user's file (verbose errors);
- ``refs``: ``args[i]`` / ``outs[i]`` references (``{"kind": "args"|"outs", "index": i}``);
- ``vmem``: ``{"requested": bytes, "limit": bytes}`` parsed from a VMEM out-of-memory message;
- ``mosaic_codes``: Mosaic error codes named in the message (``E2002``, ``E2003``, ``E1001``...);
- ``raised_at``: the innermost frame of the telling exception, in any file (for empty messages);
  for a bare ``assert`` of the user's file, ``values`` adds what the names it compares held
  (``head_m_ref.shape = (16, 124), n = 8``): ints, tuples of ints and dtypes only.

Only the standard library is used: plain exception walking and regular expressions.
"""

from __future__ import annotations

import ast
import os
import re
import traceback
from typing import Any

_MAX_DETAIL = 20_000


def record(exc: BaseException, user_path: str, *, stage: str = "") -> dict[str, Any]:
    """The raw error record for ``exc`` raised while checking the file at ``user_path``."""
    chain = _chain(exc)
    main = _telling(chain)
    full = "\n".join(dict.fromkeys(_text(e) for e in chain if _text(e)))
    message, detail = split_dumps(full)
    return {
        "stage": stage,
        "type": type(main).__name__,
        "sentence": sentence(_text(main) or message),
        "message": message.strip(),
        "detail": detail[:_MAX_DETAIL] or None,
        "frames": user_frames(chain, user_path),
        "mentions": mentions(full, user_path),
        "refs": refs(full),
        "vmem": vmem_figures(full),
        "mosaic_codes": mosaic_codes(full),
        "syntax": _syntax(main, user_path),
        "raised_at": _with_values(raised_at(main), main, user_path),
    }


def raised_at(exc: BaseException) -> dict[str, Any] | None:
    """Where ``exc`` was raised (its traceback's innermost frame, in any file), for an exception
    whose message is empty (a bare ``assert`` inside jax): ``{"file", "line", "function", "code"}``,
    the file shortened to its path below site-packages."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    fs = frames[-1]
    file = fs.filename.replace("\\", "/")
    file = file.split("/site-packages/")[-1] if "/site-packages/" in file else os.path.basename(file)
    return {"file": file, "line": fs.lineno, "function": fs.name, "code": (fs.line or "").strip() or None}


_SHOWN_ATTRS = ("shape", "dtype", "ndim")
_MAX_VALUES = 12


def _with_values(where: dict[str, Any] | None, exc: BaseException, user_path: str) -> dict[str, Any] | None:
    if where is not None and isinstance(exc, AssertionError) and not _text(exc):
        values = assert_values(exc, user_path)
        if values:
            where = {**where, "values": values}
    return where


def assert_values(exc: BaseException, user_path: str) -> str | None:
    """For a bare ``assert`` that failed in the user's file: the values its names held there
    (``x_ref.shape = (16, 124), block = 8``), or None. Reads the frame's variables only: plain
    names and their ``.shape``/``.dtype``/``.ndim``; a value shown must be an int, a tuple of ints
    or a dtype (nothing else is rendered, nothing is called)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or _norm(tb.tb_frame.f_code.co_filename) != _norm(user_path):
        return None
    try:
        with open(user_path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    line = tb.tb_lineno
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Assert) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not found:
        return None
    test = min(found, key=lambda n: (n.end_lineno or n.lineno) - n.lineno).test
    frame = tb.tb_frame
    shown: dict[str, str] = {}
    for node in ast.walk(test):
        if len(shown) >= _MAX_VALUES:
            break
        if isinstance(node, ast.Attribute) and node.attr in _SHOWN_ATTRS and isinstance(node.value, ast.Name):
            key, value = f"{node.value.id}.{node.attr}", _lookup(frame, node.value.id, node.attr)
        elif isinstance(node, ast.Name):
            key, value = node.id, _lookup(frame, node.id, None)
        else:
            continue
        text = _render(value)
        if text is not None and key not in shown:
            shown[key] = text
    return ", ".join(f"{k} = {v}" for k, v in shown.items()) or None


_MISSING = object()


def _lookup(frame: Any, name: str, attr: str | None) -> Any:
    value = frame.f_locals.get(name, frame.f_globals.get(name, _MISSING))
    if value is _MISSING or attr is None:
        return value
    try:
        return getattr(value, attr)
    except Exception:  # noqa: BLE001 - a value without the attribute shows nothing
        return _MISSING


def _render(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, tuple) and len(value) <= 8 and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return "(" + ", ".join(map(str, value)) + ("," if len(value) == 1 else "") + ")"
    if type(value).__name__ == "dtype" and type(value).__module__ == "numpy":
        return str(value)
    return None


# --------------------------------------------------------------------------- the chain


def _chain(exc: BaseException) -> list[BaseException]:
    """exc and every exception behind it (``__cause__`` first, then ``__context__``), no repeats."""
    out: list[BaseException] = []
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or any(e is seen for seen in out):
            continue
        out.append(e)
        todo.extend([e.__cause__, e.__context__])
    return out


_WRAPPERS = ("JaxStackTraceBeforeTransformation",)  # jax's traceback carriers: no message of their own


def _telling(chain: list[BaseException]) -> BaseException:
    """The exception whose message says what went wrong (skipping jax's traceback wrappers)."""
    for e in chain:
        if type(e).__name__ not in _WRAPPERS and _text(e):
            return e
    return chain[0]


def _text(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return exc.msg or ""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the error
        return repr(exc)


def user_frames(chain: list[BaseException], user_path: str) -> list[dict[str, Any]]:
    """Frames in the user's file, outermost first, over every traceback in the chain.

    jax's ``JaxStackTraceBeforeTransformation`` carries the stack that traced the failing
    operation (an unsupported primitive inside a ``pl.when`` body): its frames come last, as the
    innermost, even where the lowering's own exception names an outer line of the user's (the
    ``pl.when`` whose branch failed to lower)."""
    target = _norm(user_path)
    plain: list[dict[str, Any]] = []
    source: list[dict[str, Any]] = []
    seen: set[tuple[int, str]] = set()
    for exc in reversed(chain):  # the root cause's frames first, the outer wrapper's last
        into = source if type(exc).__name__ in _WRAPPERS else plain
        for fs in traceback.extract_tb(exc.__traceback__):
            key = (fs.lineno, fs.name)
            if _norm(fs.filename) != target or key in seen:
                continue
            seen.add(key)
            into.append({
                "file": user_path,
                "line": fs.lineno,
                "function": fs.name,
                # UTF-8 byte offsets, as CPython records them (locate converts to code points)
                "column": getattr(fs, "colno", None),
                "end_line": getattr(fs, "end_lineno", None),
                "end_column": getattr(fs, "end_colno", None),
            })
    return plain + source


def _norm(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


# --------------------------------------------------------------------------- message parsing

# "path.py:12", "path.py:12:4", and MLIR locations: loc("path.py":12:8 to :25)
_MENTION = re.compile(r"(?P<file>(?:[A-Za-z]:)?[^\s:'\"()\[\],]+\.py)\"?:(?P<line>\d+)(?::(?P<col>\d+))?")


def mentions(text: str, user_path: str) -> list[dict[str, Any]]:
    """``path:line[:col]`` places in the message that are in the user's file, in order, no repeats."""
    target = _norm(user_path)
    base = os.path.basename(user_path)
    out = []
    seen = set()
    for m in _MENTION.finditer(text):
        file = m.group("file")
        if _norm(file) != target and not (os.path.basename(file) == base and not os.path.isabs(file)):
            continue
        line = int(m.group("line"))
        col = int(m.group("col")) if m.group("col") else None
        if (line, col) in seen:
            continue
        seen.add((line, col))
        out.append({"line": line, "column": col})
    return out


_REF = re.compile(r"\b(?:(args|outs)\[(\d+)\]|(?:window params for|window allocation for operator) (input|output) (\d+))")


def refs(text: str) -> list[dict[str, Any]]:
    """``args[i]``/``outs[i]`` (lowering), "window params for input i" (Mosaic) and "window
    allocation for operator input i" (XLA's VMEM allocator) references; ``with_prefetch``: the
    input's index counts the scalar-prefetch operands before the blocked ones."""
    out = []
    for m in _REF.finditer(text):
        if m.group(1):
            item = {"kind": m.group(1), "index": int(m.group(2))}
        else:
            item = {"kind": "args" if m.group(3) == "input" else "outs", "index": int(m.group(4))}
        if item["kind"] == "args" and (m.group(1) or "operator" in m.group(0)):
            item["with_prefetch"] = True  # the lowering's args[i] and XLA's operator input i count them
        if item not in out:
            out.append(item)
    return out


_CODE = re.compile(r"\b(E\d{4})\b")


def mosaic_codes(text: str) -> list[str]:
    return list(dict.fromkeys(_CODE.findall(text)))


_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2,
          "mib": 1024**2, "g": 1024**3, "gb": 1000**3, "gib": 1024**3}
_SIZE = r"(\d+(?:\.\d+)?)\s*([KMG]i?B?|B|bytes)?"
_VMEM_PATTERNS = (
    # "... 272.00M of 16.00M vmem ..." / "used 272.00M, limit 16.00M"
    re.compile(r"(?i)" + _SIZE + r"\s+of\s+" + _SIZE + r"\s+(?:scoped\s+)?vmem"),
    re.compile(r"(?i)(?:allocat\w*|request\w*|need\w*|used?)\s+" + _SIZE + r".{0,80}?(?:limit|available|capacity|exceed\w*)\D{0,20}" + _SIZE),
    re.compile(r"(?i)vmem.{0,80}?" + _SIZE + r"\s*(?:>|exceeds)\s*" + _SIZE),
    # "Scoped allocation with size 32.06M and limit 32.00M exceeded scoped vmem limit by 64.0K"
    re.compile(r"(?i)allocation with size\s+" + _SIZE + r"\s+and limit\s+" + _SIZE),
    # "Allocation (size=268435456) would exceed memory (size=134217728) :: ... space=vmem"
    re.compile(r"(?i)allocation\s*\(size=" + _SIZE + r"\)\s*would exceed memory\s*\(size=" + _SIZE + r"\)"),
)


def vmem_figures(text: str) -> dict[str, int] | None:
    """Bytes requested vs the limit, from a VMEM out-of-memory message (None when absent)."""
    if not re.search(r"(?i)vmem|RESOURCE_EXHAUSTED|E1001", text):
        return None
    for pattern in _VMEM_PATTERNS:
        m = pattern.search(text)
        if m:
            requested = _bytes(m.group(1), m.group(2))
            limit = _bytes(m.group(3), m.group(4))
            if requested is not None and limit is not None and requested > 0 and limit > 0:
                return {"requested": requested, "limit": limit}
    return None


def _bytes(number: str, unit: str | None) -> int | None:
    unit = (unit or "").lower()
    if unit == "bytes":
        unit = "b"
    factor = _UNITS.get(unit)
    if factor is None:
        return None
    return int(float(number) * factor)


# MLIR dumps: module/func bodies, "loc(...)" lines, and Mosaic's "The MLIR operation involved:".
_DUMP_START = re.compile(
    r"^\s*(?:module\b.*\{|#loc|func\.func|\"?builtin\.module|%\w+ = |The MLIR operation involved:|"
    r"Additional diagnostics:|The Mosaic module that failed)",
)


def split_dumps(text: str) -> tuple[str, str]:
    """(message without MLIR dumps, the dumps) — dumps go to Finding.detail, folded by editors."""
    keep, dump = [], []
    in_dump = False
    for line in text.splitlines():
        if _DUMP_START.match(line):
            in_dump = True
        elif in_dump and not line.strip():
            in_dump = False
            continue
        (dump if in_dump or _looks_like_ir(line) else keep).append(line)
    return "\n".join(keep), "\n".join(dump)


def _looks_like_ir(line: str) -> bool:
    s = line.strip()
    return bool(s) and (s.startswith(("%", "^bb", "tpu.", "vector.", "arith.", "memref.", "scf.", "func.", "} loc("))
                        or " = \"tpu." in s or re.match(r"^loc\(|^\}\s*$", s) is not None)


_NOISE = (
    re.compile(r"^See details at https?://\S+$"),
    re.compile(r"^For simplicity, JAX has removed its internal frames.*"),
    re.compile(r"^-{5,}$"),
    re.compile(r"^The stack trace below excludes JAX-internal frames.*"),
    re.compile(r"^The preceding is the original exception that occurred.*"),
    re.compile(r"^See https?://\S+ for more details\.?$"),
    re.compile(r"^Please report a bug at.*"),
)


def sentence(text: str) -> str:
    """The meaningful sentence: the first non-noise line, without status prefixes and dumps."""
    message, _ = split_dumps(text)
    for i, line in enumerate(message.splitlines()):
        s = line.strip()
        if not s or any(p.match(s) for p in _NOISE):
            continue
        s = re.sub(r"^(?:INTERNAL|RESOURCE_EXHAUSTED|INVALID_ARGUMENT|UNIMPLEMENTED|FAILED_PRECONDITION)\s*:\s*", "", s)
        s = re.sub(r"^(?:Mosaic failed to compile TPU kernel|Error)\s*:\s*", "", s) or s
        if s.endswith(":"):  # "...: E2002: Name:" — the explanation is on the next line
            rest = [r.strip() for r in message.splitlines()[i + 1:] if r.strip()]
            if rest and not any(p.match(rest[0]) for p in _NOISE):
                s = f"{s} {rest[0]}"
        return s[:1500]
    return text.strip()[:1500]


def _syntax(exc: BaseException, user_path: str) -> dict[str, Any] | None:
    if not isinstance(exc, SyntaxError):
        return None
    return {"line": exc.lineno, "column": exc.offset, "file": exc.filename or user_path}
