"""Tasks from a call found in the workspace: a kernel file checked through its callers (worker side).

A kernel library's file (jax's ``paged_attention_kernel.py``, a project's ``kernels/flash.py``) states
no task and calls nothing itself: its callers are elsewhere — its tests, its benchmarks, the model
code. The client finds them (``analysis/callers.py``: files of the workspace that import the file and
the test functions that reach it) and sends each as a ``CallerRef``; when the file's own code gave no
shapes (``runner/tasks/tasks_recorded.py``), the worker runs them, in order, within a share of the request's
time:

- the caller's import of the kernel file gives the checked file itself (``aliased``: the name the caller
  imports it by is bound to the module the check loaded, the editor's text included, and the modules of
  its package are imported afresh so theirs bind it too);
- its top-level code runs, then the listed test functions (``test_*`` functions, ``unittest.TestCase``
  methods, ``absl`` parameterized cases of them), each under a deadline, with every ``pallas_call``
  recorded and not run (its outputs are zeros, ``runner/recording.py``): a test's own check of the
  results then fails, which says nothing about the kernel and is ignored;
- jax's test utilities answer as the target chip too (``jax_test_dut`` = "tpu", ``runner/target_chip.py``),
  so a test that skips itself off a TPU runs, and ``hypothesis`` tries one example per test.

The calls made from the checked file (a line of it on the stack) become tasks (one per ``pallas_call``
of the file, the first shapes it was called with), each named in the note: "checked as called from
tests/test_flash.py:42 (test_forward)". Tests stop being tried when every ``pallas_call`` of the file
was reached or the share of time is spent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
import types
import unittest
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax

from ..intercept import RecordedCall, intercept_pallas_calls
from ..loader import ABSENT, StopLoading, restore_attributes
from ..memory_guard import watching
from ..recording import not_interpreted, plural
from .task_types import RuntimeTask

SHARE = 0.5  # of the request's time left, what running the callers may take
MAX_S = 90.0  # and at most this long
TEST_S = 40.0  # one test at most (jax's ragged paged attention test makes its inputs op by op for ~20 s)
CASES_PER_TEST = 12  # parameterized cases of one test function tried at most
GRACE_S = 6.0  # a test that made a call runs on this long after its last one (its backward pass), then stops
MORE_S = 30.0  # once a call is recorded, other tests are tried this long at most for the file's other kernels


class CallerStop(BaseException):
    """Raised into a caller's test that ran past its deadline (BaseException: ``except Exception`` lets it by)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"stopped after {seconds:.1f} s")


@dataclass
class CallerRun:
    """What running the callers gave: the tasks, the note saying where their shapes came from, and why
    none were found (``tried``: one line per caller)."""

    tasks: list[RuntimeTask] = field(default_factory=list)
    note: str | None = None
    tried: list[str] = field(default_factory=list)


def with_callers(found: Any, module: types.ModuleType, path: str, text: str | None, callers: Sequence[Any] | None,
                 time_limit_s: float | None, elapsed_s: float) -> Any:
    """``found`` (``tasks_recorded.ZeroConfig``: what the file's own code gave) with the tasks its callers
    give when it has none; the note says where they came from, or why none was found."""
    import linecache

    if found.tasks or not callers:
        return found
    source = text if text is not None else "".join(linecache.getlines(path))
    left = time_limit_s - elapsed_s if isinstance(time_limit_s, (int, float)) and time_limit_s > 0 else None
    ran = caller_tasks(module, path, source, callers, left)
    found.tasks = ran.tasks
    if ran.note:
        found.note = ran.note
    else:
        found.notes.append("no shapes from the workspace's callers: " + "; ".join(ran.tried))
    return found


def caller_tasks(module: types.ModuleType, path: str, source: str, callers: Sequence[Mapping[str, Any]],
                 budget_s: float | None) -> CallerRun:
    """Run the ``callers`` (CallerRef as plain dicts) until the file's pallas_calls are reached (see the
    module docstring); never raises for a caller's own failure."""
    from .tasks_recorded import _unreached

    found = CallerRun()
    end = time.monotonic() + min(MAX_S, budget_s * SHARE if budget_s else MAX_S)
    calls: list[tuple[RecordedCall, str]] = []  # (call, "tests/x.py:42 (test_y)")
    for caller in callers:
        if time.monotonic() >= end:
            found.tried.append(f"{caller.get('shown')}: not run (the time for callers was spent)")
            break
        earlier = [c for c, _ in calls]

        def done(mine: list[RecordedCall], earlier: list[RecordedCall] = earlier) -> bool:
            """Every pallas_call of the file reached (at least one call, for a file that writes none)."""
            reached = earlier + _ours(mine)
            return bool(reached) and not _unreached(source, reached)

        made, said = _run_caller(module, path, caller, end, done)
        found.tried.append(said)
        calls += made
        if made:
            end = min(end, time.monotonic() + MORE_S)
        if calls and not _unreached(source, [c for c, _ in calls]):
            break
    firsts: dict[tuple[Any, ...], tuple[RecordedCall, str]] = {}
    for call, where in calls:  # one task per pallas_call of the file: the first shapes it was called with
        firsts.setdefault((call.line, call.kernel_name), (call, where))
    taken: Counter = Counter()
    from .tasks_recorded import recorded_tasks

    for call, where in firsts.values():
        (task,) = recorded_tasks([call], "caller", taken)
        found.tasks.append(dataclasses.replace(task, called_from=call.caller[:2] if call.caller else None))
        found.note = ((found.note + "; ") if found.note else "") + f"{task.name}: checked as called from {where}"
    if found.note:
        found.note = (f"shapes from the workspace ({found.note}): each call recorded there and checked at the "
                      "shapes it was made with, not run")
    return found


def _run_caller(module: types.ModuleType, path: str, caller: Mapping[str, Any], end: float,
                done: Any) -> tuple[list[tuple[RecordedCall, str]], str]:
    """Run one caller file until ``done(calls)``; the calls it made from the checked file, and one line
    saying what happened."""
    from ..loader import user_module
    from ..memory_guard import stop_near_limit

    shown = str(caller.get("shown") or caller.get("path"))
    file = os.path.abspath(str(caller["path"]))
    ran: list[str | None] = []  # one entry per test run: why it skipped itself, or None
    with contextlib.ExitStack() as stack:
        if caller.get("alias"):
            stack.enter_context(aliased(str(caller["alias"]), module))
        calls = stack.enter_context(_recording(path, file))
        failures: list[tuple[int, BaseException]] = []
        try:
            with _deadline(end):
                loaded = stack.enter_context(user_module(file, caller.get("text"), failures=failures))
        except (Exception, CallerStop, SystemExit) as exc:  # noqa: BLE001 - the caller's own failure
            return [], f"{shown}: importing it failed ({type(exc).__name__}: {str(exc)[:160]})"
        stopped = "".join(f"; its line {line} raised {type(exc).__name__}: {str(exc)[:120]}"
                          for line, exc in failures[:1])
        if not done(calls):
            stack.enter_context(_as_the_target_under_test())  # after the import: it loads what they set
            stack.enter_context(_checks_pass(loaded))
            try:
                with stop_near_limit():
                    _run_tests(loaded, [str(t) for t in caller.get("tests") or ()], calls, end, done, ran)
            except StopLoading as exc:  # the worker's memory: the calls recorded so far are kept
                stopped += f"; stopped: {exc}"
        made = [(c, f"{shown}:{c.caller[1]} ({c.caller[2]})" if c.caller else shown) for c in _ours(calls)]
    if made:
        return made, f"{shown}: {plural(len(made), 'call')} of the file recorded{stopped}"
    return [], f"{shown}: no call of the file's kernels ({_tests_said(ran)}{stopped})"


def _tests_said(ran: Sequence[str | None]) -> str:
    if not ran:
        return "no test of it reached the file"
    skipped = [why for why in ran if why]
    if len(skipped) == len(ran):
        return f"{plural(len(ran), 'test')} run, each skipped by the test itself: {skipped[0][:120]!r}"
    return f"{plural(len(ran), 'test')} run" + (f", {len(skipped)} skipped by the test itself" if skipped else "")


def _ours(calls: Sequence[RecordedCall]) -> list[RecordedCall]:
    """The applied calls made from the checked file (one of its lines on the stack)."""
    return [c for c in calls if c.operands is not None and c.stack_lines]


@contextlib.contextmanager
def _recording(path: str, caller: str) -> Iterator[list[RecordedCall]]:
    """Every pallas_call recorded (and stood in for), each with the caller's line that led to it."""
    jax.clear_caches()  # a function traced by an earlier request would not call pallas_call again
    with intercept_pallas_calls(user_files=(path,), stand_in=not_interpreted, caller_files=(caller,)) as calls:
        try:
            yield calls
        finally:
            jax.clear_caches()  # functions traced with stand-ins must not be reused by the tiers


def _run_tests(module: types.ModuleType, names: Sequence[str], calls: list[RecordedCall], end: float,
               done: Any, ran: list[str | None]) -> None:
    """Run the named tests of the caller module until ``done(calls)`` (every pallas_call of the checked
    file reached) or the time is spent; ``ran`` gets, per test run, why it skipped itself (or None)."""
    reached: set[str] = set()  # tests that made a call already: their other parameterized cases are not run
    for name, test in _test_callables(module, names):
        if time.monotonic() >= end:
            break
        if name in reached:
            continue
        before = len(_ours(calls))
        skipped = None
        try:
            test_end = min(end, time.monotonic() + TEST_S)
            with _deadline(test_end), _grace_after_calls(calls, test_end):
                skipped = test()
        except (KeyboardInterrupt, StopLoading):
            raise
        except BaseException as exc:  # noqa: BLE001 - a test fails as it will (pytest's skip is a BaseException)
            if type(exc).__name__ == "Skipped":
                skipped = str(exc) or "skipped"
        ran.append(skipped)
        if len(_ours(calls)) > before:
            reached.add(name)
            end = min(end, time.monotonic() + MORE_S)  # the rest is for the kernels not reached yet
        if done(calls):
            break


@contextlib.contextmanager
def _grace_after_calls(calls: list[RecordedCall], test_end: float) -> Iterator[None]:
    """Once the running test has made a call from the checked file, it stops ``GRACE_S`` after its latest
    one (the SIGALRM of ``_deadline`` brought forward): what follows is its reference on the CPU."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stop = threading.Event()

    def watch() -> None:
        seen = len(_ours(calls))
        while not stop.wait(0.25):
            now = len(_ours(calls))
            if now > seen:
                seen = now
                left = min(test_end, time.monotonic() + GRACE_S) - time.monotonic()
                if 0 < left < signal.getitimer(signal.ITIMER_REAL)[0]:
                    signal.setitimer(signal.ITIMER_REAL, left)

    with watching(watch, "pallasite-caller-grace", stop):
        yield


def _test_callables(module: types.ModuleType, names: Sequence[str]) -> Iterator[Any]:
    """(name, a zero-argument callable running it: it answers why the test skipped itself, or None) for
    each named test: a ``test_*`` function, ``Class.method`` of a ``unittest.TestCase`` (each parameterized case whose
    name starts with the method's), or of a plain ``Test*`` class."""
    seen: set[tuple[str, str]] = set()  # (class, case) already given ("Class.test" names every test of a class)
    for name in names:
        owner, _, method = name.rpartition(".")
        if not owner:
            fn = getattr(module, name, None)
            if callable(fn) and _no_required_args(fn):
                yield name, fn
            continue
        cls = getattr(module, owner, None)
        if isinstance(cls, type) and issubclass(cls, unittest.TestCase):
            cases = [n for n in unittest.TestLoader().getTestCaseNames(cls) if (owner, n) not in seen
                     and (n == method or (n.startswith(method) and not n[len(method):][:1].isalpha()))]
            for case in cases[:CASES_PER_TEST]:
                seen.add((owner, case))
                yield name, lambda cls=cls, case=case: _unittest_case(cls, case)
        elif isinstance(cls, type) and _no_required_args(cls) and callable(getattr(cls, method, None)):
            yield name, lambda cls=cls, method=method: getattr(cls(), method)()


def _unittest_case(cls: type, case: str) -> str | None:
    result = unittest.TestResult()
    cls(case).run(result)
    return result.skipped[0][1] if result.skipped else None


def _no_required_args(fn: Any) -> bool:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)


@contextlib.contextmanager
def _deadline(end: float) -> Iterator[None]:
    from ..script_mode import deadline

    with deadline(max(0.01, end - time.monotonic()), CallerStop):
        yield


@contextlib.contextmanager
def aliased(name: str, module: types.ModuleType) -> Iterator[None]:
    """While the callers run, ``import <name>`` gives ``module`` (the checked file as the check loaded
    it). The modules of ``name``'s package are set aside and imported afresh, so a sibling that binds
    the kernel module (megablox's ``ops.py``: ``from ...megablox import gmm as backend``) binds this
    one; everything is put back afterwards."""
    scope = name.rpartition(".")[0] or name
    inside = lambda n: n == scope or n.startswith(scope + ".")  # noqa: E731
    saved = {n: m for n, m in sys.modules.items() if inside(n)}
    holders = _holders(saved)
    for n in saved:
        del sys.modules[n]
    for holder, attr, _ in holders:  # ``from parent import package`` reads the attribute first: import afresh
        with contextlib.suppress(AttributeError):
            delattr(holder, attr)
    sys.modules[name] = module
    try:
        yield
    finally:
        for n in [n for n in sys.modules if inside(n)]:
            del sys.modules[n]
        sys.modules.update(saved)
        restore_attributes(holders)


def _holders(saved: Mapping[str, Any]) -> list[tuple[Any, str, Any]]:
    """(parent module outside the set-aside package, attribute, its value now) for the package's top,
    whose fresh import rebinds it."""
    out = []
    for n in saved or ():
        parent, _, leaf = n.rpartition(".")
        if parent and parent not in saved and parent in sys.modules:
            out.append((sys.modules[parent], leaf, getattr(sys.modules[parent], leaf, ABSENT)))
    return out


_CONTEXT_ASSERTS = ("assertRaises", "assertRaisesRegex", "assertWarns", "assertWarnsRegex", "assertLogs",
                    "assertNoLogs")


@contextlib.contextmanager
def _checks_pass(module: types.ModuleType) -> Iterator[None]:
    """The tests' checks of values pass while they run: numpy.testing's ``assert_*`` and the ``assert*``
    methods of the module's TestCase classes (and their bases) do nothing. The kernels' outputs are zeros
    that were never computed; a test that checks its forward pass before it takes gradients (jax's
    megablox test) goes on to the backward kernels."""
    import numpy.testing as npt

    patches: list[tuple[Any, str, Any]] = [(npt, n, getattr(npt, n)) for n in dir(npt)
                                           if n.startswith("assert_") and callable(getattr(npt, n))]
    classes = {c for v in vars(module).values() if isinstance(v, type) and issubclass(v, unittest.TestCase)
               for c in v.__mro__ if c is not object}
    for cls in classes:
        patches += [(cls, n, vars(cls)[n]) for n in list(vars(cls))
                    if n.startswith("assert") and n not in _CONTEXT_ASSERTS and callable(vars(cls)[n])]
    for holder, name, _ in patches:
        setattr(holder, name, _passes)
    try:
        yield
    finally:
        for holder, name, value in reversed(patches):
            setattr(holder, name, value)


def _passes(*args: Any, **kwargs: Any) -> None:
    return None


@contextlib.contextmanager
def _as_the_target_under_test() -> Iterator[None]:
    """jax's test utilities and hypothesis as a TPU test run needs them: ``jax_test_dut`` = "tpu" and jax's
    test utilities answered as the user's code (``runner/target_chip.py``: the target's device kind), so
    tests that skip off a TPU run; one example per ``hypothesis`` test, not stored."""
    from ..target_chip import answering_as_user

    utilities = [m.__file__ for n in _TEST_UTILITIES if (m := sys.modules.get(n)) is not None and m.__file__]
    with contextlib.ExitStack() as stack:
        if utilities:
            stack.enter_context(_test_dut("tpu"))
            stack.enter_context(answering_as_user(utilities))
        stack.enter_context(_one_example())
        yield


_TEST_UTILITIES = ("jax._src.test_util", "jax._src.pallas.pallas_test_util", "jax._src.hypothesis_test_util")


@contextlib.contextmanager
def _switched(switch: Callable[[], Callable[[], None]]) -> Iterator[None]:
    """``switch()`` before the block (it returns how to switch back, run after it); a switch that fails
    (another jax, another hypothesis) leaves the block to run as things are."""
    try:
        back = switch()
    except Exception:  # noqa: BLE001 - the tests answer as they are
        back = None
    try:
        yield
    finally:
        if back is not None:
            with contextlib.suppress(Exception):
                back()


def _test_dut(value: str) -> contextlib.AbstractContextManager[None]:
    def switch() -> Callable[[], None]:
        before = getattr(jax.config, "jax_test_dut", "")
        jax.config.update("jax_test_dut", value)
        return lambda: jax.config.update("jax_test_dut", before or "")

    return _switched(switch)


def _one_example() -> contextlib.AbstractContextManager[None]:
    if "hypothesis" not in sys.modules:  # imported by the caller (its import runs inside this block): watch for it
        return contextlib.nullcontext()
    settings = sys.modules["hypothesis"].settings

    def switch() -> Callable[[], None]:
        hypothesis = sys.modules["hypothesis"]
        before = settings.get_current_profile_name()
        settings.register_profile("pallasite-callers", max_examples=1, deadline=None, database=None,
                                  derandomize=True, suppress_health_check=list(hypothesis.HealthCheck),
                                  phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])  # no shrinking
        settings.load_profile("pallasite-callers")
        return lambda: settings.load_profile(before)

    return _switched(switch)
