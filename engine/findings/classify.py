"""What a raw error record says: its finding code, who said it, and its sentence in user terms.

Client side (never imports jax). ``classify`` gives a record of the worker (``runner/errors.py``)
its code: PLS1xx / PLS2xx by the compiler's words (the one compiler-message table,
``knowledge/compiler_messages.toml``, which the error catalog reads too: first matching row
wins), PLS9xx for import, task and script failures. ``sentence`` cleans the message (folders cut
from paths, block sizes as ints, no jaxpr dumps, no "please file an issue"), says so when an
exception carried no text (and where it was raised), and prefixes what the code needs (VMEM
figures, "importing the file failed"). Where the finding goes is ``engine/findings/locate.py``'s part.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ...analysis.codes import CODES
from ...knowledge import compiler_messages

ORIGIN_LOWERING = "jax lowering"
ORIGIN_COMPILER = "libtpu compiler"
ORIGIN_RUNNER = "pallasite runner"


CALL_ARITY = re.compile(r"(?P<fn>[\w.<>]+)\(\) (?:takes \d+ positional arguments? but \d+ (?:positional arguments? )?"
                        r"(?:\(and \d+ keyword-only arguments?\) )?(?:was|were) given|"
                        r"missing \d+ required positional arguments?)")  # "(and 1 keyword-only argument)": a partial's


def classify(rec: Mapping[str, Any], tier: int) -> str:
    """The finding code for a raw record (by stage, exception type and message pattern)."""
    stage = str(rec.get("stage") or "")
    if rec.get("code") in CODES:  # the worker already knew (tier 3 records, runner/tier3/interpret.py)
        return str(rec["code"])
    if stage == "import":  # a package missing from the worker's environment: not checked, not wrong
        return "PLS000" if rec.get("syntax") else "PLS909" if rec.get("type") == "ModuleNotFoundError" else "PLS901"
    if stage == "task":
        return "PLS905"
    text = f"{rec.get('sentence') or ''}\n{rec.get('message') or ''}"
    if rec.get("vmem"):
        return "PLS201"
    if x64_rejection(rec):
        return "PLS107"
    flags = {flag for flag in compiler_messages.FLAGS if rec.get(flag)}
    by_message = compiler_messages.first_specific_code(text, tier, flags)  # catch-alls are decided below
    if by_message:
        return by_message
    etype = str(rec.get("type") or "")
    m = CALL_ARITY.search(text)
    if etype == "TypeError" and m:
        return "PLS102" if "<lambda>" in m.group("fn") or "index_map" in m.group("fn") else "PLS110"
    if etype == "AttributeError" and "has no attribute" in text:
        return "PLS111"
    if _from_compiler(rec):
        return "PLS200"
    return "PLS100"


_I64 = re.compile(r"\bi64\b")
_EXPLICIT_64 = re.compile(r"64-bit types? (?:are|is) not supported|\bi64\b.{0,80}not supported", re.I | re.S)


def x64_rejection(rec: Mapping[str, Any]) -> bool:
    """The compiler choked on an int64 that exists only because jax_enable_x64 was on.

    With x64 on, the Python ints of a kernel's index maps and grid become int64 and Mosaic fails
    (e.g. "failed to legalize operation 'func.return' ... i64") even for a float32 kernel. An
    explicit 64-bit type in the kernel ("64-bit types are not supported") keeps its own location.
    """
    text = f"{rec.get('sentence') or ''}\n{rec.get('message') or ''}"
    return bool(rec.get("x64")) and bool(_I64.search(text)) and not _EXPLICIT_64.search(text)


def _from_compiler(rec: Mapping[str, Any]) -> bool:
    etype = str(rec.get("type") or "")
    return etype in ("MosaicError", "JaxRuntimeError", "XlaRuntimeError") or bool(rec.get("mosaic_codes"))


def origin(rec: Mapping[str, Any], stage: str) -> str:
    if rec.get("origin"):  # who spoke, when the worker says (e.g. "TPU interpreter")
        return str(rec["origin"])
    if stage in ("import", "task"):
        return ORIGIN_RUNNER
    return ORIGIN_COMPILER if _from_compiler(rec) else ORIGIN_LOWERING


# --------------------------------------------------------------------------- sentences


_FOLDERS = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s:'\"()\[\]/\\]+)+[/\\](?=[^\s:'\"()\[\]/\\]+\.py\b)")
_BOILERPLATE = re.compile(r"\s*(?:Please (?:file an issue|report a bug) at:? \S+|See details at \S+)\.?")


def sentence(rec: Mapping[str, Any], code: str) -> str:
    """The record's sentence in user terms: short paths, block sizes as ints, no empty messages,
    and what the code adds (VMEM figures, "importing the file failed: ...")."""
    said = str(rec.get("sentence") or rec.get("message") or "the check failed").strip()
    said = re.sub(r"\s+", " ", said)
    said = _FOLDERS.sub("", said)  # "/long/path/kernel.py:12" -> "kernel.py:12"
    said = _BOILERPLATE.sub("", said).strip()
    said = _readable_blocks(said)
    said = without_hlo(said)
    if _is_bare_type(said, rec):
        said = _empty_message_sentence(rec)
    if code == "PLS201":
        vmem = rec.get("vmem")
        if vmem:
            said = (f"VMEM out of memory: {_mib(vmem['requested'])} requested, "
                    f"limit {_mib(vmem['limit'])} ({said})") + near_limit_sentence(vmem)
        elif not said.lower().startswith("vmem"):
            said = f"VMEM out of memory ({said})"
    if code == "PLS901":
        what = "running the script" if rec.get("stage") == "script" else "importing the file"  # script mode
        said = f"{what} failed: {rec.get('type')}: {said}"
    elif code == "PLS905":
        said = f"invalid task: {said}"
    elif rec.get("type") and not said.startswith(str(rec.get("type"))):
        if code in ("PLS100", "PLS200", "PLS111"):
            said = f"{rec.get('type')}: {said}"
    return said


def _is_bare_type(sentence: str, rec: Mapping[str, Any]) -> bool:
    """Whether the sentence says nothing but the exception's type (``assert`` with no message)."""
    bare = sentence.strip().rstrip(":.").strip()
    return bare in ("", str(rec.get("type") or ""), "the check failed")


def _empty_message_sentence(rec: Mapping[str, Any]) -> str:
    """For an exception raised with no text: say so, and where it was raised (the last traceback line)."""
    etype = str(rec.get("type") or "Exception")
    where = rec.get("raised_at")
    if where:
        code = f": `{where['code']}`" if where.get("code") else ""
        values = f" ({where['values']})" if where.get("values") else ""
        return (f"{etype} with an empty message, raised at {where['file']}:{where['line']} in "
                f"{where['function']}{code}{values}")
    return f"{etype}() with an empty message (the exception carried no text; the worker did not say where it was raised)"


def raised_at_text(rec: Mapping[str, Any]) -> str | None:
    """Where the worker says the exception was raised (for the finding's detail), or None."""
    where = rec.get("raised_at")
    if not where:
        return None
    return f"raised at {where['file']}:{where['line']} in {where['function']}" + (
        f": {where['code']}" if where.get("code") else "")


_HLO_INSTRUCTION = re.compile(r"%(?P<name>[\w.\-]+) = ")
_CLOSE = {"(": ")", "{": "}", "[": "]"}


def without_hlo(sentence: str) -> str:
    """The compiler's sentence without the HLO instructions libtpu quotes in it (``%matmul.1 = f32[2048,512]{1,0:T(8,
    128)} custom-call(%x.1, %y.1), custom_call_target="tpu_custom_call", ..., metadata={... stack_frame_id=16}``):
    each becomes the op it names, ``the Mosaic kernel %matmul.1`` for a pallas_call's custom call, so the
    message is the same on every run (the stack_frame_id differs between runs) and reads as a sentence; the whole
    text stays in the finding's detail (``check -v``, the JSON's ``detail``). A libtpu sentence left hanging
    ("... run out of scoped vmem -") loses its dangling dash."""
    out, at = [], 0
    for m in _HLO_INSTRUCTION.finditer(sentence):
        if m.start() < at:
            continue
        end = _instruction_end(sentence, m.end())
        body = sentence[m.end():end]
        name = m.group("name")
        kernel = re.sub(r"\.\d+$", "", name)
        what = f"the Mosaic kernel %{name}" if "tpu_custom_call" in body else f"%{name}"
        out += [sentence[at:m.start()], what]
        at = end
    out.append(sentence[at:])
    return re.sub(r"\s+-\s*(?=\)|$)", "", "".join(out)).strip()


def _instruction_end(text: str, start: int) -> int:
    """Where an HLO instruction that starts at ``start`` ends: the first ". " (or the text's end, or a closing
    bracket it did not open) outside its brackets and quotes."""
    stack: list[str] = []
    quoted = False
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':
            quoted = not quoted
        elif not quoted and c in _CLOSE:
            stack.append(_CLOSE[c])
        elif not quoted and stack and c == stack[-1]:
            stack.pop()
        elif not quoted and not stack and (c in ")]}" or (c == "." and (i + 1 == len(text) or text[i + 1] == " "))):
            return i
        i += 1
    return i


def _readable_blocks(sentence: str) -> str:
    """Lowering messages in user terms: ``(Blocked(block_size=8), ...)`` -> ``(8, ...)``, no jaxprs."""
    sentence = re.sub(r"Blocked\(block_size=(\d+)\)", r"\1", sentence)
    sentence = re.sub(r"Squeezed\(\)", "None", sentence)
    sentence = re.sub(r",? and index_map \{ lambda .*?\}", "", sentence)
    sentence = re.sub(r",? in memory space <MemorySpace\.\w+: '\w+'>", "", sentence)
    return sentence


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def near_limit_sentence(vmem: Mapping[str, Any]) -> str:
    """What a VMEM overflow within a few percent of its limit adds (runner/vmem_fit.py): by how much, which
    libtpu decided, that other compiler versions may differ, and the limit tier 2 compiled it with."""
    near = vmem.get("near_limit")
    if not near:
        return ""
    said = (f" — only {near['over']:.1%} over the limit: {near['decided_by']} decided this, and other compiler "
            "versions may differ (a kernel published as running on this chip can overflow under another libtpu)")
    if near.get("fits_with"):
        said += (f"; vmem_limit_bytes={near['fits_with']} ({near['fits_with'] >> 20} MiB) fits: "
                 f"{near['verified']}")
    elif near.get("not_verified"):
        said += f"; no larger limit was verified ({near['not_verified']})"
    return said
