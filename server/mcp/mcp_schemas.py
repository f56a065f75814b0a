"""The MCP server's tools as data: each one's description, input schema and output schema (JSON Schema).

The output schemas describe the structured results the tools return (server/mcp/mcp_tools.py,
server/mcp/mcp_judging.py); the agent host, and the SDK's own client in the tests, validate every result
against them. Nested values that other modules own (a ``Verdict``, a ``Timing``, a compile result, a
chip's row) are described by the keys a caller may rely on and allow more, so a field added there flows
through. ``arguments_problem`` checks a call's arguments against the input schema and says what is wrong
in one line, without echoing a huge value back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...analysis.types import CHIP_TARGETS, TIERS

TARGET_NAMES = [t.name for t in CHIP_TARGETS]
STR: dict = {"type": "string"}
INT: dict = {"type": "integer"}
NUM: dict = {"type": "number"}
BOOL: dict = {"type": "boolean"}
ANY: dict = {}


def maybe(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


def obj(properties: dict, required: tuple[str, ...] | list[str] = (), *, more: bool | dict = True) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": more}


def array(items: dict) -> dict:
    return {"type": "array", "items": items}


# ---------------------------------------------------------------------------- arguments

TARGET = {"enum": TARGET_NAMES, "description": "the TPU chip (default: the project's `target` setting, v6e)"}
TIERS_ARG = {"type": "array", "items": {"enum": list(TIERS)}, "minItems": 1, "maxItems": len(TIERS), "uniqueItems": True,
             "description": "checker tiers: 0 source rules, 1 Pallas->Mosaic lowering, 2 libtpu's compile for the "
                            "chip, 3 TPU interpret mode (default: the project's `tiers` setting, [0, 1, 2])"}
PATH = {"type": "string", "maxLength": 4096,
        "description": "a file inside the folder the server was started in (relative to it, or absolute)"}
ENTRY = {"type": "string", "maxLength": 200, "description": "the task's entry function when the file has several"}
TIME_LIMIT = {"type": "number", "exclusiveMinimum": 0, "maximum": 3600,
              "description": "seconds the whole call may take; the work and its workers are stopped then"}

# ---------------------------------------------------------------------------- results

RANGE = {"line": INT, "column": INT, "end_line": INT, "end_column": INT}
EDIT = obj({**RANGE, "new_text": STR}, ("line", "column", "end_line", "end_column", "new_text"), more=False)
FINDING = obj({
    "file": STR, **RANGE,
    "severity": {"enum": ["error", "warning", "information"]}, "code": STR, "title": maybe(STR), "message": STR,
    "hint": maybe(STR), "tier": INT, "origin": STR, "chip": maybe(STR), "kernel": maybe(STR),
    "fix": maybe(obj({"title": STR, "edits": array(EDIT)}, ("title", "edits"))),
    "related": array(obj({"path": STR, **RANGE, "message": STR}, ("path", "line", "column", "message"))),
    "detail": maybe(STR),
}, ("file", "line", "column", "end_line", "end_column", "severity", "code", "message", "fix", "related"))
COMPILE = obj({"ok": maybe(BOOL), "chip": STR, "status": STR, "why": STR, "tiers_run": array(INT)}, ("ok", "status"))
TIMING = obj({"seconds": NUM, "provenance": STR, "device_kind": STR, "model": STR, "method": STR, "label": STR},
             ("seconds", "provenance", "label"))
VERDICT = obj({"candidate": BOOL, "compiled": maybe(BOOL), "correct": maybe(BOOL), "status": STR, "text": STR,
               "compile": COMPILE, "test": obj({"outcome": STR, "why": STR}, ("outcome",)),
               "timing": maybe(TIMING), "evidence": STR, "judged_by": ANY},
              ("status", "text", "compile", "test", "timing", "judged_by"))
NOTES = array(STR)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input: dict
    output: dict
    runs_code: bool = False  # runs the folder's code (refused in an untrusted folder)


CHECK = ToolSpec(
    "check", "Check a Pallas kernel for a TPU chip",
    "The TPU compiler's verdict on a Pallas kernel file, at the right line, without a TPU: what `pallasite check` "
    "reports. Give `path` (a file in the folder) or `source` (a kernel's text, checked as model-written code in a "
    "confined worker, as if it were at `path`, default untitled.py in the folder), a `target` chip and `tiers`. "
    "Each finding has its file, line, column, code, message, related places and a fix as text edits (1-based "
    "lines and columns, exclusive end). In an untrusted folder only tier 0 runs, and `not_run` says why. When tier 3 "
    "finds wrong, NaN or unwritten outputs of a file in the folder, the locate step (`locate`, default the "
    "check.locate setting) moves the finding to the statement that makes them so, with an edit verified to fix it.",
    obj({"path": PATH, "source": {"type": "string", "description": "the kernel's text (at most 1 MiB)"},
         "target": TARGET, "tiers": TIERS_ARG,
         "locate": {"type": "boolean", "description": "after a tier-3 failure, find the statement that makes it with "
                    "a verified fix (pallasite check --locate); default the check.locate setting"}}, more=False),
    obj({"path": STR, "target": STR, "tiers": array(INT), "trusted": BOOL, "not_run": maybe(STR),
         "findings": array(FINDING), "kernels": array(obj({"name": STR, "line": INT, "tiers": obj({})})),
         "notes": NOTES, "tiers_ran": array(INT), "not_fully_checked": NOTES, "skipped": maybe(STR),
         "compile": maybe(COMPILE), "compile_text": maybe(STR),
         "summary": obj({"errors": INT, "warnings": INT, "information": INT}, ("errors", "warnings", "information")),
         "text": STR},
        ("path", "target", "tiers", "trusted", "not_run", "findings", "kernels", "notes", "summary", "text")),
)

EXPLAIN = ToolSpec(
    "explain", "Explain a finding code",
    "What a finding code (PLS001, or just 1) means, how it is recognised and how to fix it: `pallasite explain`.",
    obj({"code": {"type": "string", "maxLength": 32, "description": "a finding code, e.g. PLS201"}}, ("code",),
        more=False),
    obj({"code": STR, "title": STR, "tier": maybe(INT), "severity": STR, "hint": STR, "recognised_by": STR,
         "explanation": STR, "fix": STR, "mechanical_fix": maybe(STR), "before": maybe(STR), "after": maybe(STR),
         "references": NOTES, "markdown": STR, "text": STR},
        ("code", "title", "severity", "explanation", "fix", "text")),
)

ESTIMATE = ToolSpec(
    "estimate", "Estimate a kernel's time on a TPU chip",
    "The cost model's estimate of the kernel file's task and of its reference for a chip (what `pallasite time "
    "--backend estimate` prints): seconds labelled as an estimate (never device time), the term that bounds each "
    "(compute, memory, overhead), the factors used, and the estimated speedup over the reference when both sides "
    "were priced by one model. Runs the file in a worker (trusted folders only).",
    obj({"path": PATH, "target": TARGET, "entry": ENTRY, "time_limit_s": TIME_LIMIT}, ("path",), more=False),
    obj({"path": STR, "target": STR, "label": STR, "kernel_s": maybe(NUM), "reference_s": maybe(NUM),
         "speedup": maybe(NUM), "why": maybe(STR), "kernel_bound": maybe(STR), "reference_bound": maybe(STR),
         "caveat": maybe(STR), "kernel_factors": array(ANY), "reference_factors": array(ANY),
         "estimate": maybe(obj({"seconds": maybe(NUM), "bound": maybe(STR), "status": STR})), "interval": ANY,
         "notes": NOTES, "text": STR},
        ("path", "target", "label", "kernel_s", "reference_s", "speedup", "why", "kernel_bound", "estimate", "text")),
    runs_code=True,
)

JUDGE = ToolSpec(
    "judge", "Judge a candidate kernel as `pallasite optimize` does",
    "Judge `candidate` (a whole kernel file's text) against the user's original `file` (its example inputs, "
    "reference and tolerances frozen, with its reviewed <name>.tests.py) or a JAXBench/MaxKernel `task` folder: "
    "compiled for the chip (tiers 0-2), tested in interpret mode against the reference, estimated by the cost "
    "model - the same Verdict, words and judged_by `pallasite optimize` gives that candidate. The candidate is "
    "model-written code: it runs only in a confined worker, never unconfined. Trusted folders only.",
    obj({"candidate": {"type": "string", "description": "the candidate kernel file's whole text (at most 1 MiB)"},
         "file": PATH, "task": {"type": "string", "maxLength": 4096,
                                "description": "a JAXBench or MaxKernel task folder inside the folder"},
         "target": TARGET, "time_limit_s": TIME_LIMIT}, ("candidate",), more=False),
    obj({"against": {"enum": ["file", "task"]}, "path": STR, "chip": STR, "method": STR, "status": STR,
         "judged_by": ANY, "verdict": VERDICT, "baseline": maybe(TIMING), "speedup": maybe(obj({"value": NUM})),
         "speedup_refused": maybe(STR), "notes": NOTES, "text": STR},
        ("against", "path", "chip", "method", "status", "judged_by", "verdict", "baseline", "speedup", "text")),
    runs_code=True,
)

TUNE = ToolSpec(
    "tune", "Tune a kernel's block sizes for a TPU chip",
    "Search the kernel's tunables (block sizes, TUNED_PARAMS, keyword-only int parameters) for a chip: ranked by "
    "the cost model's estimate, walked down the ranking through libtpu's compile (tier 2) and checked in "
    "interpret mode, within the budgets given. Returns the best configuration that tier 2 accepted, with its "
    "verdict and the edits that write it (nothing is written to the file). Trusted folders only.",
    obj({"path": PATH, "target": TARGET, "entry": ENTRY,
         "max_estimates": {"type": "integer", "minimum": 1, "maximum": 4096,
                           "description": "configurations traced and estimated at most (default 256)"},
         "max_compiles": {"type": "integer", "minimum": 0, "maximum": 64,
                          "description": "tier-2 compiles at most while walking the ranking (default 16)"},
         "verify": {"type": "integer", "minimum": 0, "maximum": 10,
                    "description": "interpret-mode checks of the best-ranked configurations at most (default 3)"},
         "time_limit_s": TIME_LIMIT}, ("path",), more=False),
    obj({"path": STR, "chip": STR, "best": maybe(obj({}, more=INT)), "current": obj({}, more=INT),
         "provenance": maybe(STR), "compile": maybe(COMPILE), "verdict": maybe(VERDICT), "edits": array(EDIT),
         "speedup_vs_current": maybe(obj({"value": NUM, "provenance": STR}, ("value", "provenance"))),
         "rejected": obj({}, more=INT), "explored": STR, "stopped": STR, "configurations": INT, "notes": NOTES,
         "text": STR},
        ("path", "chip", "best", "current", "provenance", "compile", "verdict", "edits", "text")),
    runs_code=True,
)

CHIPS = ToolSpec(
    "chips", "The TPU chip table",
    "The TPU chips pallasite targets, read from the installed jax (TFLOP/s, HBM bandwidth and capacity, VMEM, MXU) "
    "with the scoped-VMEM limit libtpu applies by default (probed once, cached): `pallasite chips`.",
    obj({"probe": {"type": "boolean", "description": "probe libtpu for the scoped-VMEM limits (default true)"}},
        more=False),
    obj({"chips": array(obj({"name": STR}, ("name",))), "text": STR}, ("chips", "text")),
)

DOCS_SEARCH = ToolSpec(
    "docs_search", "Search the offline Pallas docs",
    "Search jax's Pallas docstrings and guides, pallasite's guides and its error catalog offline (BM25): "
    "`pallasite docs search`. A pasted compiler error works as a query.",
    obj({"query": {"type": "string", "minLength": 1, "maxLength": 4000, "description": "words or an error message"},
         "k": {"type": "integer", "minimum": 1, "maximum": 20, "description": "passages to return (default 5)"}},
        ("query",), more=False),
    obj({"query": STR, "hits": array(obj({"rank": INT, "score": NUM, "id": STR, "kind": STR, "title": STR,
                                          "source": STR, "line": maybe(INT), "text": STR},
                                         ("rank", "id", "title", "source", "text"))), "text": STR},
        ("query", "hits", "text")),
)

TOOLS: dict[str, ToolSpec] = {t.name: t for t in (CHECK, EXPLAIN, ESTIMATE, JUDGE, TUNE, CHIPS, DOCS_SEARCH)}


def arguments_problem(spec: ToolSpec, arguments: Any) -> str | None:
    """What is wrong with a call's arguments against the tool's input schema, in one line; None when they fit."""
    from jsonschema import Draft202012Validator

    if not isinstance(arguments, dict):
        return f"{spec.name}: the arguments must be an object, got {type(arguments).__name__}"
    errors = sorted(Draft202012Validator(spec.input).iter_errors(arguments), key=lambda e: list(e.path))
    if not errors:
        return None
    err = errors[0]
    where = ".".join(str(p) for p in err.path)
    return f"{spec.name}: argument {where or '(arguments)'}: {_said(err)}"


def _said(err: Any) -> str:
    """A validation error in words, without the value itself when that could be huge."""
    value, kind = err.instance, err.validator
    if kind == "maxLength":
        return f"{len(value):,} characters; at most {err.validator_value:,}"
    if kind == "type":
        return f"expected {err.validator_value}, got {type(value).__name__}"
    if kind == "enum":
        return f"{str(value)[:80]!r} is not one of {', '.join(map(str, err.validator_value))}"
    if kind == "additionalProperties":
        unknown = sorted(set(value) - set(err.schema.get("properties", {})))
        return (f"unknown argument(s) {', '.join(repr(u[:40]) for u in unknown[:5])}; the tool takes "
                f"{', '.join(err.schema.get('properties', {}))}")
    return err.message[:300]
