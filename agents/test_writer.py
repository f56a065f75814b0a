"""The test writer: the frozen tests of a kernel file that has none (inputs, a plain-JAX reference).

    missing = needs(original, path)                        # () when the file has its tests
    proposal = await propose(ask, path, original, validate, missing=missing, rounds=3)
    proposal.ok, proposal.text, proposal.summary, proposal.evidence

The optimize loop needs ground truth: the entry's example inputs and a ``reference()`` (native
convention, docs/task-convention.md). When the ORIGINAL file lacks them, a model proposes them
(test_writer_prompt.py says what is sent): ``example_inputs`` with int size parameters (so the
tests also run a doubled second shape) or an ``extra_inputs()``, ``reference``, ``TOLERANCE``.
A proposal is offered only once it is validated:

1. it parses and defines only imports and the test names (never the kernel or the entry);
2. it supplies every missing part, and a second shape (``extra_inputs`` or an int parameter with
   a default in ``example_inputs``);
3. ``validate(text)`` (the optimize evaluator's ``test`` of the ORIGINAL kernel with these tests,
   in a worker: interpret mode at reduced shapes without a device) passes, including the second
   shape.

A refusal goes back to the model with its evidence (the worker's rejection and figures), for at
most ``rounds`` rounds. The kernel is the ground truth: the writer never edits it.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from .llm import keys
from .implementer import parse as parse_block
from .prompts.prompt_paths import local
from .llm.providers import ModelRequest, ProviderError
from .prompts.test_writer_prompt import FEEDBACK, SYSTEM, TEMPLATE

ALLOWED = ("example_inputs", "extra_inputs", "reference", "TOLERANCE")
Ask = Callable[[ModelRequest], Awaitable[str]]
Validate = Callable[[str], Awaitable[Any]]  # tests text -> PhaseResult (agents/optimize.py)


@dataclass(frozen=True)
class Proposal:
    ok: bool
    text: str  # the tests (Python); the last refused one when not ok
    summary: str  # what was proposed and how it was validated, or why nothing was
    rounds: int = 0
    evidence: str = ""  # the last refusal's reason


def needs(original: str, path: str) -> tuple[str, ...]:
    """The test definitions the file lacks: a subset of ("example_inputs", "reference"). JAXBench,
    KernelBench and MaxKernel files carry their tests in their own form: nothing is missing."""
    from ..analysis.source import Source
    from ..analysis.tasks import find_tasks

    try:
        tasks = find_tasks(Source(original), path)
    except Exception:  # noqa: BLE001 - an unreadable file: the compile phase reports it
        return ()
    if tasks:
        task = tasks[0]
        return () if task.format != "native" or task.reference else ("reference",)
    names = _top_names(original)
    if {"create_inputs", "workload"} <= names or "get_inputs" in names:
        return ()
    return ("example_inputs", "reference") if "reference" not in names else ("example_inputs",)


def _top_names(text: str) -> set[str]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return names


def entry_name(original: str, path: str) -> str | None:
    """The entry the inputs are for (docs/task-convention.md's rule), found as if inputs were given."""
    from ..analysis.source import Source
    from ..analysis.tasks import find_tasks

    probe = original.rstrip("\n") + "\n\n\ndef example_inputs():\n    return ()\n"
    try:
        tasks = find_tasks(Source(probe), path)
    except Exception:  # noqa: BLE001
        return None
    return tasks[0].entry if tasks else None


def tests_hash(text: str) -> str:
    """The frozen tests' identity (recorded in the run state; a resume with other tests is refused)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def static_problem(text: str, missing: tuple[str, ...]) -> str | None:
    """Why the text cannot be the tests before anything runs, or None."""
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        return f"SyntaxError: {err.msg} (line {err.lineno})"
    defined: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # a docstring
        if isinstance(node, ast.FunctionDef) and node.name in ALLOWED:
            defined[node.name] = node
            continue
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id in ALLOWED for t in node.targets):
            defined.update({t.id: node for t in node.targets})
            continue
        what = getattr(node, "name", None) or type(node).__name__
        return (f"line {node.lineno}: defines {what!r}; the tests may hold only imports and "
                f"{', '.join(ALLOWED)} (the kernel and its entry are not to be written)")
    absent = [name for name in missing if name not in defined]
    if absent:
        return f"it does not define {', '.join(absent)}"
    inputs = defined.get("example_inputs")
    if "extra_inputs" not in defined and isinstance(inputs, ast.FunctionDef):
        args = inputs.args
        with_defaults = args.args[len(args.args) - len(args.defaults):] if args.defaults else []
        ints = [a for a, d in zip(with_defaults, args.defaults)
                if isinstance(d, ast.Constant) and isinstance(d.value, int) and not isinstance(d.value, bool)]
        ints += [a for a, d in zip(args.kwonlyargs, args.kw_defaults)
                 if isinstance(d, ast.Constant) and isinstance(d.value, int) and not isinstance(d.value, bool)]
        if not ints:
            return ("no second shape: give example_inputs an int size parameter with a default (the tests double "
                    "it) or define extra_inputs()")
    return None


def request(path: str, original: str, missing: tuple[str, ...], entry: str | None, previous: str = "",
            why: str = "", round_no: int = 0, timeout_s: float = 120.0) -> ModelRequest:
    wanted = {"example_inputs": "- example_inputs(): the entry's positional arguments (shapes, dtypes)",
              "reference": "- reference(*args): a plain-JAX reference of what the entry computes"}
    feedback = FEEDBACK.format(round=round_no, previous=previous, why=local(why)) if previous else ""
    text = TEMPLATE.format(path=Path(path).name, source=original, missing="\n".join(wanted[m] for m in missing),
                           entry=f"`{entry}`" if entry else "the single public function that calls pallas_call",
                           feedback=feedback)
    return ModelRequest(system=SYSTEM, prompt=keys.redact(text), timeout_s=timeout_s, max_output_tokens=8192)


async def propose(ask: Ask, path: str, original: str, validate: Validate, *, missing: tuple[str, ...] | None = None,
                  rounds: int = 3, timeout_s: float = 120.0, on_round: Callable[[str], Any] | None = None) -> Proposal:
    """Up to ``rounds`` proposals; the first that passes every check is returned (``ok``)."""
    missing = needs(original, path) if missing is None else missing
    if not missing:
        return Proposal(True, "", "the file has its own tests")
    entry = entry_name(original, path)
    say = on_round or (lambda _m: None)
    previous, why = "", ""
    for round_no in range(1, max(1, rounds) + 1):
        say(f"round {round_no}: asking for {', '.join(missing)}")
        try:
            reply = await ask(request(path, original, missing, entry, previous, why, round_no - 1, timeout_s))
        except ProviderError as err:
            return Proposal(False, previous, f"the model failed: {err.describe()}: {err}", round_no, why)
        text = parse_block(reply)
        if text is None:
            previous, why = reply[:2000], "the reply held no ```python block"
            continue
        problem = static_problem(text, missing)
        if problem is None:
            say(f"round {round_no}: running the original kernel against the proposed reference")
            result = await validate(text)
            if result.ok:
                return Proposal(True, text, f"validated: the original kernel matches the proposed reference "
                                f"({result.summary})", round_no)
            problem = result.evidence or result.summary
            checks = (result.data or {}).get("checks") or {}
            if result.ok is False and not problem:
                problem = str(checks)[:500]
        previous, why = text, problem
    return Proposal(False, previous, f"no proposal passed in {rounds} round(s); the last was refused: {why[:300]}",
                    rounds, why)


async def validate_with(evaluator: Any, original: str, text: str) -> Any:
    """The evaluator's frozen test of the ORIGINAL kernel with ``text`` as its tests; a test that
    checked no second shape is refused (the tests must reach one beyond the example)."""
    from .evaluator import PhaseResult

    result = await evaluator.with_tests(text).test(original)
    if not result.ok:
        return result
    extra = ((result.data or {}).get("checks") or {}).get("extra_shape") or {}
    if not extra.get("checked"):
        return PhaseResult(False, "no second shape was checked",
                           evidence=f"the tests reached no second shape: {extra.get('why') or 'none made'}")
    return result
