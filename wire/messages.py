"""The worker protocol's payloads, typed: every op's params and result as frozen dataclasses.

Both sides import this module (the client without JAX): the worker builds these values and
``protocol.py`` writes them as JSON through ``analysis.types.to_json``; the client reads them back
with ``decode_as`` (``analysis.types.from_json`` after a strict check of every required field, so a
reply missing a field is a ``ProtocolError`` naming it, never a ``KeyError`` deep in the client).
docs/worker-protocol.md is the written contract.

The ops, by their params type (``OP`` names the op, ``RESULT`` its result type):

- ``PingParams`` -> ``PingResult``; ``VersionsParams`` -> ``Versions``; ``ChipsParams`` -> ``ChipsResult``;
- ``ImportParams`` -> ``ImportResult`` (the file's public functions and plain constants);
- ``CheckParams`` -> ``CheckResult`` (tiers 1-3 for every task entry of one file);
- ``EstimateParams`` -> ``EstimateResult`` (the cost model per tuning configuration);
- ``LocateParams`` -> ``LocateResult`` (after a tier-3 failure: the statement that makes it, with a verified edit).

Files travel as ``Sources``: the file's text plus the text of the local modules it imports, under
their original paths (a remote worker needs nothing but pallasite installed; it compiles the
text under those paths so tracebacks and findings name the user's files).

Worker side too: stdlib and ``analysis.types`` only.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..analysis.types import DEFAULT_CHIP, ChipSpec, CostEstimate, Measurement, Provenance, from_json, to_json, type_hints


class ProtocolError(ValueError):
    """A message that is not valid under this protocol (the message says what and where)."""


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class SourceFile:
    """One file's text under its path on the client's machine (the path need not exist on the worker's)."""

    path: str
    text: str
    module: str | None = None  # dotted import name for a local module ("helpers", "pkg.util"); None for the checked
    #                            file and for task files sent beside it (kernel_task.yaml, reference.py: data)


@dataclass(frozen=True)
class Sources:
    """The checked file and the local modules it imports (found by ``engine/sources.py``).

    ``root`` is the folder the modules' dotted names are relative to (what the client would put on
    ``sys.path``); ``package`` the checked file's own dotted package when it sits in one."""

    file: SourceFile
    modules: tuple[SourceFile, ...] = ()
    root: str | None = None
    package: str | None = None

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def text(self) -> str:
        return self.file.text


# --------------------------------------------------------------------------- outcomes and records


class TierState(str, enum.Enum):
    """What became of one tier for one entry."""

    OK = "ok"  # ran and passed
    ERROR = "error"  # ran and found an error (the entry's records say which)
    NOT_RUN = "not_run"  # not asked for
    NOT_REACHED = "not_reached"  # asked for, but the check stopped before it (an earlier step failed or ran out)
    NOT_CHECKED = "not_checked"  # could not check: time/memory limit, interpreter failure (reason says which)
    SKIPPED = "skipped"  # deliberately not run (tier 1 failed, libtpu missing, GPU kernel; reason says why)


@dataclass(frozen=True)
class TierOutcome:
    """One tier's state for one entry, with the reason for every state but ok/error/not_run."""

    tier: int
    state: TierState
    reason: str = ""

    def display(self) -> str:
        """How a person reads it: ``ok``, ``error``, ``not run``, ``skipped: tier 1 failed``."""
        word = self.state.value.replace("_", " ")
        return f"{word}: {self.reason}" if self.reason else word

    @staticmethod
    def of(tier: int, state: str) -> "TierOutcome":
        """From the worker's internal spelling (``"ok"``, ``"skipped: why"``, ``"not run"``)."""
        word, _, reason = str(state).partition(":")
        key = word.strip().replace(" ", "_")
        try:
            return TierOutcome(int(tier), TierState(key), reason.strip())
        except ValueError:
            raise ProtocolError(f"tier {tier}: unknown state {state!r}; states are "
                                f"{', '.join(s.value for s in TierState)}") from None


@dataclass(frozen=True)
class Frame:
    """A frame of the user's file in an error's traceback (columns as UTF-8 byte offsets, as CPython keeps them)."""

    file: str
    line: int
    function: str = ""
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    code: str | None = None


@dataclass(frozen=True)
class Mention:
    """A ``file:line[:col]`` of the user's file named in an error's text. Tier 3 names the places
    it found itself: the first is the finding's position, and those with a ``note`` after it are
    related places (the note says what is there)."""

    line: int
    column: int | None = None
    note: str | None = None


@dataclass(frozen=True)
class Ref:
    """An ``args[i]`` / ``outs[i]`` reference in an error's text."""

    kind: str  # "args" | "outs" | "out_dtype" (tier 3: the out_shape dtype of output ``index`` is wrong)
    index: int
    with_prefetch: bool = False  # an input's index counts the scalar-prefetch operands (``args[i]``)


@dataclass(frozen=True)
class NearLimit:
    """A VMEM overflow within a few percent of its limit (runner/vmem_fit.py)."""

    over: float | None = None  # requested / limit - 1
    decided_by: str | None = None  # "libtpu 0.0.42.1"
    fits_with: int | None = None  # a limit tier 2 compiled the module with, in bytes
    verified: str | None = None  # how that was verified, in words
    not_verified: str | None = None  # why no larger limit was verified


@dataclass(frozen=True)
class VmemFigures:
    requested: int | None = None
    limit: int | None = None
    near_limit: NearLimit | None = None


@dataclass(frozen=True)
class SyntaxPlace:
    line: int | None = None
    column: int | None = None
    file: str | None = None


@dataclass(frozen=True)
class RaisedAt:
    file: str
    line: int | None = None
    function: str | None = None
    code: str | None = None
    values: str | None = None  # a bare assert of the user's file: what its names held ("x_ref.shape = (8, 124)")


@dataclass(frozen=True)
class CheckedValue:
    """A value a check of the user's own code read when it raised (``if bkv % bkv_compute: raise
    ValueError(...)``): the expression at the check, its value, and where in the checked file the
    literals that made it were written (1-based line, column, end column), as a second run of the
    file with its literals carrying their places saw it (runner/carried_pass.py)."""

    name: str
    value: int
    places: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class ErrorRecord:
    """One error as the worker saw it (runner/errors.py builds it): the client locates it in the file.

    ``stage``: ``import``, ``task``, ``tier N``, ``script``; ``sentence`` is the one-line summary,
    ``message`` the compiler's words, ``detail`` the dumps split off them."""

    stage: str
    type: str
    sentence: str
    message: str
    detail: str | None = None
    frames: tuple[Frame, ...] = ()
    mentions: tuple[Mention, ...] = ()
    refs: tuple[Ref, ...] = ()
    vmem: VmemFigures | None = None
    mosaic_codes: tuple[str, ...] = ()
    syntax: SyntaxPlace | None = None
    raised_at: RaisedAt | None = None
    tier: int | None = None
    code: str | None = None  # set by the worker when it already knows the finding code (tier 3)
    origin: str | None = None
    severity: str | None = None  # tier 3 may soften to "warning"
    x64: bool = False  # jax_enable_x64 was on (ints became int64)
    checked: tuple[CheckedValue, ...] = ()  # a check of the user's code raised: the values it read

    def as_mapping(self) -> dict[str, Any]:
        """The plain form ``engine/findings/locate.py`` reads (to_json of this record)."""
        return to_json(self)


@dataclass(frozen=True)
class ErrorInfo:
    """Why a request failed as a whole (not a finding): the exception's type name, message and traceback."""

    type: str
    message: str
    traceback: str = ""


# --------------------------------------------------------------------------- progress


class Stage(str, enum.Enum):
    STARTING = "starting"
    IMPORT = "import"  # importing the user's file
    TIER = "tier"  # running tier ``tier`` for ``entry``
    SCRIPT = "script"  # running the file's __main__ (script mode)
    PROBE = "probe"  # probing libtpu (chips)
    MEASURE = "measure"  # time/profile: checking the candidate, warming up, timing, tracing
    TUNE = "tune"  # autotuning: tracing configurations for the cost model, or one's interpret run
    JUDGE = "judge"  # time: the candidate's process is gone; the judge runs its exported program (``entry``: its file)


@dataclass(frozen=True)
class VmemExcess:
    """Said before a tier-2 compile: one pallas_call's blocks need more VMEM than the chip has
    (runner/reach.py), so a compile that then runs past its time limit is explained by it."""

    need_bytes: int  # pipelined blocks twice, scratch once
    chip_bytes: int
    role: str  # of the largest buffer: "in_specs" | "out_specs" | "scratch_shapes"
    index: int
    block: str  # e.g. "(4096, 4096) bfloat16"


@dataclass(frozen=True)
class Progress:
    """Where a request is. Clients act on the structured fields; ``message`` is for people only."""

    stage: Stage
    message: str = ""
    tier: int | None = None
    entry: str | None = None
    line: int | None = None  # 1-based line of the checked file
    fraction: float | None = None
    vmem: VmemExcess | None = None  # the blocks of the call being compiled exceed the chip's VMEM


# --------------------------------------------------------------------------- ops


@dataclass(frozen=True)
class PingParams:
    OP: ClassVar[str] = "ping"


@dataclass(frozen=True)
class PingResult:
    pong: bool
    pid: int


@dataclass(frozen=True)
class VersionsParams:
    OP: ClassVar[str] = "versions"


@dataclass(frozen=True)
class Versions:
    """What the worker runs on; the verdicts are valid for its jax and libtpu."""

    python: str | None = None
    pallasite: str | None = None
    jax: str | None = None
    jaxlib: str | None = None
    libtpu: str | None = None
    platform: str | None = None
    devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChipsParams:
    OP: ClassVar[str] = "chips"
    probe: bool = True  # measure each chip's default scoped-VMEM limit with libtpu


@dataclass(frozen=True)
class ChipsResult:
    chips: tuple[ChipSpec, ...]
    versions: dict[str, str | None] = field(default_factory=dict)  # the worker's jax/libtpu/... (the cache key)


@dataclass(frozen=True)
class ImportParams:
    OP: ClassVar[str] = "import"
    source: Sources


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    line: int  # 0-based def line


@dataclass(frozen=True)
class ImportResult:
    module: str
    path: str
    functions: tuple[FunctionInfo, ...] = ()
    constants: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InferredInput:
    """One argument of an inferred call: an array (``shape`` and ``dtype``) or a plain literal ``value``."""

    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    value: Any = None


@dataclass(frozen=True)
class InferredCall:
    """A task read from the file's own call at ``line`` (``analysis/inferred_inputs.py``): check ``entry``
    at these arguments when the file states no task (``runner/tasks/tasks_inferred.py``)."""

    entry: str
    line: int
    args: tuple[InferredInput, ...] = ()
    kwargs: dict[str, InferredInput] = field(default_factory=dict)


@dataclass(frozen=True)
class CallerRef:
    """A file of the workspace that calls the checked file (``analysis/callers.py``): run it, and the
    ``tests`` it holds, when the file states no task and its own code gives no shapes
    (``runner/tasks/tasks_callers.py``). ``alias``: the dotted name it imports the checked file by."""

    path: str
    shown: str
    alias: str
    tests: tuple[str, ...] = ()
    text: str | None = None


@dataclass(frozen=True)
class CheckParams:
    """Check one file: tiers 1-3 for ``chip``. ``entries``: only these entries (the client asks tier 2
    for the entries its results cache lacks); ``tier2_known``: tier-2 verdicts ("ok" | "error") the client
    reused, so those entries are not compiled; ``script``: run the file's __main__ (script mode);
    ``inferred``: tasks the client read from the file's own calls, used when the file states none;
    ``callers``: files of the workspace calling it, run when neither the file nor ``inferred`` gave shapes."""

    OP: ClassVar[str] = "check"
    source: Sources
    chip: str = DEFAULT_CHIP
    tiers: tuple[int, ...] = (1, 2)
    time_limit_s: float | None = None
    script: bool = False
    entries: tuple[str, ...] | None = None
    tier2_known: dict[str, str] = field(default_factory=dict)
    inferred: tuple[InferredCall, ...] = ()  # used only when the file states no task
    callers: tuple[CallerRef, ...] = ()  # the workspace's callers, used when nothing else gave shapes
    # model-written code: the module the judge tested and priced (TimeResult.module, as JSON text): tier 2
    # compiles it instead of a lowering the candidate's process made (runner/judging/compile_check.py)
    judged_module: str | None = None


@dataclass(frozen=True)
class InputSig:
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Tier3Info:
    seconds: float | None = None
    shapes: str | None = None
    shrunk: bool = False


@dataclass(frozen=True)
class BlockBuffer:
    """One VMEM buffer a pallas_call needs per grid step (runner/reach.py)."""

    role: str  # "in_specs" | "out_specs" | "scratch_shapes"
    index: int
    shape: tuple[int | None, ...]
    dtype: str
    bytes: int
    buffers: int  # 2: a pipelined (double-buffered) block; 1: scratch
    array: tuple[int, ...] | None = None  # a block's array shape (None: scratch, or not sent)


@dataclass(frozen=True)
class ReachedCall:
    """One pallas_call an entry makes (runner/reach.py): the checked file's lines on its call stack
    (1-based: the ``pallas_call(...)``, wrappers, callers), its kernel and its VMEM buffers."""

    lines: tuple[int, ...]
    kernel: str
    kernel_line: int | None = None  # 1-based def line, when the kernel is in the checked file
    kernel_module: str | None = None  # the module defining the kernel, when it is not the checked file
    scalar_prefetch: int = 0  # operands its grid spec prefetches (the lowering's args[i] counts them first)
    site: tuple[str, int] | None = None  # (file, 1-based line) of a library's pallas_call(...), not the checked file's
    buffers: tuple[BlockBuffer, ...] = ()
    vmem_bytes: int = 0
    # where the literals that made its dims were written in the checked file (runner/origin_values.py):
    # "in_specs[1][0]" / "out_specs[i][d]" / "scratch_shapes[i][d]" / "grid[d]" / "out_shape[i][d]" /
    # "vmem_limit_bytes" -> ((1-based line, column, end column), ...); "out_shape[i].made" -> ((line, column,
    # end line, end column),): the jax.ShapeDtypeStruct(...) expression that made output i
    origins: dict[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)
    partial: bool = False  # the entry's trace failed after this call: what else it reaches is unknown
    grid: tuple[int, ...] | None = None  # the grid it was made with (None: not sent, or not all ints)


@dataclass(frozen=True)
class CheckEntry:
    """One task entry's verdicts. ``measurements`` carry their provenance (tier 3: CPU interpret)."""

    name: str
    tiers: tuple[TierOutcome, ...]
    line: int | None = None
    format: str | None = None
    has_reference: bool = False
    tolerance: dict[str, Any] | None = None
    tunables: dict[str, Any] | None = None
    errors: tuple[ErrorRecord, ...] = ()
    memory: dict[str, int] | None = None  # tier 2 memory_analysis, bytes
    mosaic_calls: int | None = None
    lowered_hash: str | None = None
    inputs: tuple[InputSig, ...] = ()
    timings_s: dict[str, float] = field(default_factory=dict)  # wall time of each tier that ran, on the worker
    notes: tuple[str, ...] = ()
    tier3: Tier3Info | None = None
    measurements: tuple[Measurement, ...] = ()
    reached: tuple[ReachedCall, ...] | None = None  # the pallas_calls it makes; None: unknown
    called_from: tuple[str, int] | None = None  # (file, 1-based line): the workspace's call its shapes came from
    ran_lines: tuple[int, ...] | None = None  # tier 3: 1-based lines of the file its kernels ran (engine/findings/never_ran.py)

    def state(self, tier: int) -> TierOutcome | None:
        return next((t for t in self.tiers if t.tier == tier), None)

    def states(self) -> dict[str, str]:
        """``{"1": "ok", "2": "skipped: tier 1 failed"}``: each tier as a person reads it."""
        return {str(t.tier): t.display() for t in self.tiers}


@dataclass(frozen=True)
class ScriptInfo:
    calls: int
    distinct: int


@dataclass(frozen=True)
class CheckResult:
    chip: str
    tiers: tuple[int, ...]
    tasks_found: int = 0
    versions: Versions = Versions()
    errors: tuple[ErrorRecord, ...] = ()  # file-level: import failure, invalid task
    unavailable: dict[str, str] = field(default_factory=dict)  # tier -> why it could not run at all
    entries: tuple[CheckEntry, ...] = ()
    script: ScriptInfo | None = None
    notes: tuple[str, ...] = ()  # what the worker tried when it found no task (the workspace's callers run)


@dataclass(frozen=True)
class TimeParams:
    """Time a candidate against its reference (runner/measure/timing.py; docs/worker-protocol.md, "time and
    profile"). ``reference``: a separate reference file (JAXBench ``baseline.py``), whose
    ``reference``/``workload``/``computation`` (or ``reference_entry``) is the reference; without
    it, the task's own. ``config``: tunable name -> int, passed to the entry as keywords."""

    OP: ClassVar[str] = "time"
    source: Sources
    reference: Sources | None = None
    reference_entry: str | None = None
    entry: str | None = None
    config: dict[str, int] = field(default_factory=dict)
    # model-written code: the user's own file the judge loads the task and reference from, in a
    # process that never runs the candidate (runner/judging/judge.py); else ``reference`` is used
    trusted: Sources | None = None
    runs: int = 20
    warmup: int = 2
    seed: int | None = None  # None: fresh random inputs from a new seed
    extra_shape: bool = True  # also check at a second shape when the task allows one
    max_speedup: float = 20.0  # above it a speedup is flagged for a second look
    shrink: bool = False  # without a device: check at reduced shapes (runner/measure/timing_shrink.py)
    judge: str = "auto"  # (kept for older clients: every judged request runs the exported program)
    # the judge prices the candidate's exported module for this chip (runner/judging/priced.py), and the
    # reference by the same model when ``reference_estimate``; ``checks`` False: the estimate only
    chip: str | None = None
    reference_estimate: bool = False
    checks: bool = True


@dataclass(frozen=True)
class ProfileParams:
    """Profile a candidate: the ``time`` checks, then a trace, per-kernel time and the roofline.
    ``chip``: the chip whose roofline applies without a TPU; ``peak_*``: peaks to use instead."""

    OP: ClassVar[str] = "profile"
    source: Sources
    reference: Sources | None = None
    reference_entry: str | None = None
    entry: str | None = None
    config: dict[str, int] = field(default_factory=dict)
    runs: int = 5
    warmup: int = 2
    seed: int | None = None
    extra_shape: bool = False
    max_speedup: float = 20.0
    trace_dir: str | None = None
    chip: str | None = None
    peak_flops: float | None = None
    peak_bytes_per_s: float | None = None


@dataclass(frozen=True)
class Trick:
    """Why a candidate was rejected or flagged: the trick's name, a sentence naming it, figures."""

    trick: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeRecord:
    """Who judged a candidate, by pid (runner/judging/judge.py). ``how``: "exported
    program" (the judge ran the module the candidate's process exported); ``candidate_imported``:
    whether any module of the judge's process came from the candidate's file (never, when it judged);
    ``isolation``: how the candidate's side was kept and ended (its own PID namespace, or what held
    instead where none could be made: runner/judging/channel.py)."""

    how: str
    judge_pid: int | None = None
    candidate_pid: int | None = None
    candidate_imported: bool | None = None
    platform: str | None = None
    isolation: str | None = None
    processes: str | None = None  # how the verifier and the candidate's process were made (runner/judging/forked.py)


@dataclass(frozen=True)
class TimeResult:
    """The ``time`` and ``profile`` result. ``verdict``: "ok", "rejected" (never timed: the
    rejections say why) or "error" (could not time at all: ``error`` says why). ``checks``,
    ``spread``, ``speedup``, ``profile``: see docs/worker-protocol.md."""

    verdict: str
    entry: str | None = None
    path: str | None = None
    format: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    rejections: tuple[Trick, ...] = ()
    flags: tuple[Trick, ...] = ()
    checks: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    provenance: str | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    candidate: Measurement | None = None
    reference: Measurement | None = None
    spread: dict[str, Any] | None = None
    speedup: dict[str, Any] | None = None
    trace: str | None = None  # the trace file, on the worker's host
    notes: tuple[str, ...] = ()
    error: str | None = None
    profile: dict[str, Any] | None = None  # the profile op's figures
    judged_by: str | None = None  # "the judge" when runner/judging/judge.py judged it (analysis/verdict.JudgedBy)
    estimate: dict[str, Any] | None = None  # the judge's estimate (runner/judging/priced.py) when asked
    judge: JudgeRecord | None = None  # ... and by pid, where the judge ran the exported program
    # the module the judge tested and priced at the task's size (runner/judging/exported_run.judged_module):
    # {"module": base64 of its bytes, "signature": [[dims, dtype], ...], "entry": name, "sha256": hex}; tier 2
    # of model-written code compiles these very bytes (CheckParams.judged_module)
    module: dict[str, Any] | None = None


def time_result_from_plain(result: dict[str, Any]) -> TimeResult:
    """The worker's working form (rejections as flat dicts) as a typed ``TimeResult``."""
    plain = dict(result)
    for key in ("rejections", "flags"):
        plain[key] = [{"trick": r["trick"], "message": r["message"],
                       "details": {k: v for k, v in r.items() if k not in ("trick", "message")}}
                      for r in plain.get(key) or ()]
    return decode_as(TimeResult, to_json(plain), "time result")


# --------------------------------------------------------------------------- autotuning (issue 17)


@dataclass(frozen=True)
class EstimateParams:
    """Trace the task's entry under each configuration and run the cost model for ``chip``
    (runner/program/cost_model.py): nothing is compiled, nothing runs on a device. ``kinds`` says how each
    tunable reaches the code: "keyword" (an entry keyword), "constant" (a module constant),
    "tuned_params" (an entry of TUNED_PARAMS). ``reference``: estimate the task's reference by
    the same model (XLA's own cost analysis rides along); ``probe``: measure the chip's scoped-VMEM limit with libtpu when not cached."""

    OP: ClassVar[str] = "estimate"
    source: Sources
    chip: str = DEFAULT_CHIP
    entry: str | None = None
    configs: tuple[dict[str, int], ...] = ()  # () estimates the file as it is
    kinds: dict[str, str] = field(default_factory=dict)
    reference: bool = False
    probe: bool = True
    # model-written code: the user's own file; the judge estimates its reference and floors the
    # candidate's estimates, in a process that never runs the candidate (runner/judging/judge.py)
    trusted: Sources | None = None
    # a separate reference file (a JAXBench baseline.py for a kernel kept elsewhere: ``eval TASK
    # --kernel FILE``), as TimeParams.reference: its workload is the reference, its inputs the task's
    reference_source: Sources | None = None
    # the physical floors' figures of the user's own file (``EstimateResult.floors``): what ``pallasite
    # time`` holds a device's reply to, whatever that worker reports (engine/device_floor.py)
    floors: bool = False
    # price each configuration's exported program in the judge (runner/judging/configs.py): the process that
    # runs the file exports one module per configuration and never prices it (a confined worker always does)
    judged: bool = False


@dataclass(frozen=True)
class EstimateResult:
    entry: str
    spec: ChipSpec  # the chip priced for, with what the worker measured of it (its scoped VMEM limit)
    estimates: tuple[CostEstimate, ...]  # one per configuration, in order; failures are data
    # the reference by the same cost model (cost_model.estimate_reference: seconds, model, ...; XLA's
    # own cost analysis under "xla"), or {"error": ...}
    reference: dict[str, Any] | None = None
    inputs: tuple[InputSig, ...] = ()
    jax: str | None = None
    libtpu: str | None = None
    floors: dict[str, Any] | None = None  # {"outputs": [[shape, dtype]...], "floor_work": {...}} when asked
    # who priced the configurations: "the judge" (their exported programs, runner/judging/configs.py) or ""
    # (the process that traced them; analysis/verdict.JudgedBy's values)
    judged_by: str = ""


@dataclass(frozen=True)
class LocateParams:
    """After tier 3 found an entry's outputs wrong, NaN or unwritten, or its run failing with an error (an
    out-of-bounds read or DMA, a deadlock): find the statement that makes them so
    (runner/tier3/locate_step.py). Small mechanical edits of the statements that reach the failing pallas_call are
    each run through tier 3 at its reduced size, in this worker, until ``budget_s`` is spent; an edit that
    makes the run succeed and the outputs match is verified on ``fresh_sets`` fresh input sets."""

    OP: ClassVar[str] = "locate"
    source: Sources
    chip: str = DEFAULT_CHIP
    entries: tuple[str, ...] | None = None  # the entries tier 3 found wrong (None: every task of the file)
    budget_s: float = 60.0
    fresh_sets: int = 3
    # where tier 3 said each entry failed (an error raised at a statement: an out-of-bounds read, a deadlocked
    # wait) or, for wrong outputs, where it placed them (a dimension_semantics entry, an init's place, the
    # pallas_call): (entry, 1-based line); edits at or next to that line are tried first
    failed_at: tuple[tuple[str, int], ...] = ()
    # the entries whose NaN outputs tier 3 found computed from memory never written (an accumulator not reset on
    # the first step): an init's edits are tried first
    uninitialized: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceEdit:
    """One edit of the checked file: 1-based lines, code-point columns, end exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int
    new_text: str
    old_text: str
    what: str  # the change in words: "`rows > cols` -> `rows >= cols`"
    kind: str = ""  # runner/tier3/locate_edits.py's family: comparison, program-id-axis, when, cdiv, ...


@dataclass(frozen=True)
class LocatedEntry:
    """What the locate step found for one entry. ``state``: "fixed" (``fix`` made every check match, at the
    tier-3 shapes and on ``verified_sets`` fresh input sets), "not_found" (no edit did: ``tried`` says which,
    ``suspect`` the most suspicious statement), or "skipped" (``reason`` says why)."""

    entry: str
    state: str
    reason: str = ""
    kernel: str = ""  # the failing pallas_call's kernel function
    fix: SourceEdit | None = None
    verified_sets: int = 0
    suspect: SourceEdit | None = None
    tried: tuple[SourceEdit, ...] = ()  # the first edits tried, best ranked first
    tried_count: int = 0
    shapes: str = ""  # where the runs ran (CPU interpret mode)
    problem: str = ""  # what tier 3 saw at those shapes
    seconds: float = 0.0  # wall time of the step for this entry, on the worker (CPU)
    compared: bool = True  # the fix was checked against the entry's reference (False: it had none, and the fix
    #   makes a failing run succeed with every output written, its values unchecked)
    edge_sets: int = 0  # of ``verified_sets``, those that matched only within twice the tolerance (a few elements)


@dataclass(frozen=True)
class LocateResult:
    entries: tuple[LocatedEntry, ...] = ()


PARAMS: dict[str, type] = {cls.OP: cls for cls in (PingParams, VersionsParams, ChipsParams, ImportParams, CheckParams,
                                                   TimeParams, ProfileParams, EstimateParams, LocateParams)}
RESULTS: dict[str, type] = {"ping": PingResult, "versions": Versions, "chips": ChipsResult,
                            "import": ImportResult, "check": CheckResult, "time": TimeResult, "profile": TimeResult,
                            "estimate": EstimateResult, "locate": LocateResult}


# --------------------------------------------------------------------------- from the worker's working form


BACKWARD_SUFFIX = " (backward)"  # an entry that is another's backward pass (runner/tasks/tasks_backward.py)


def tier2_only_vmem(records: Any) -> bool:
    """Whether tier 2's records (``ErrorRecord``s or the worker's plain dicts) say only that the target's
    scoped VMEM is too small (E1001): the kernel's values do not depend on that, so tier 3 still runs."""
    mine = _of_tier(records, 2)
    return bool(mine) and all(_get(r, "vmem") or "E1001" in (_get(r, "mosaic_codes") or ()) for r in mine)


def _get(rec: Any, key: str) -> Any:
    """A field of an ``ErrorRecord`` or of the worker's plain dict."""
    return rec.get(key) if isinstance(rec, dict) else getattr(rec, key, None)


def _of_tier(records: Any, tier: int) -> list[Any]:
    return [r for r in records if _get(r, "tier") == tier or _get(r, "stage") == f"tier {tier}"]


MOSAIC_ONLY = ("VerificationError", "LoweringException")  # the TPU lowering's own verdicts on a kernel that traced
_UNIMPLEMENTED = re.compile(r"Unimplemented primitive in Pallas TPU lowering|not (?:yet )?(?:implemented|supported) "
                            r"(?:in|by) (?:the )?(?:Pallas )?(?:TPU|Mosaic)", re.I)


def lowering_only(records: Any, tier: int) -> bool:
    """Whether every error of ``tier`` (``ErrorRecord``s or plain dicts) is the TPU lowering's own rejection of a
    kernel that traced (a Mosaic verification error, an op it does not lower): interpret mode runs such a kernel
    all the same, so tier 3 still says whether its results are right - a second mistake is not hidden behind the
    first. A trace error (shapes, dtypes) is not: the interpret run would fail the same way."""
    mine = _of_tier(records, tier)
    return bool(mine) and all(_get(r, "type") in MOSAIC_ONLY or _UNIMPLEMENTED.search(str(_get(r, "message") or ""))
                              for r in mine)


def check_result_from_plain(result: dict[str, Any], tiers: Any = (1, 2)) -> CheckResult:
    """A check result as the worker builds it step by step (plain dicts, states spelled ``"ok"`` or
    ``"skipped: why"``, runner/errors.py records) as a typed ``CheckResult``. The tier-3 run's wall
    time becomes a ``Measurement`` with ``Provenance.INTERPRET`` (CPU interpret mode, never TPU time)."""
    found = dict(result.get("versions") or {})
    entries = []
    for entry in result.get("entries") or ():
        tier3 = entry.get("tier3")
        measurements: tuple[Measurement, ...] = ()
        if tier3 and tier3.get("seconds") is not None:
            ns = float(tier3["seconds"]) * 1e9
            measurements = (Measurement(status="ok", provenance=Provenance.INTERPRET, device_kind="cpu",
                                        method="tier 3: TPU interpret mode on CPU, wall clock of the whole run",
                                        samples_ns=(ns,), median_ns=ns, jax_version=found.get("jax"),
                                        libtpu_version=found.get("libtpu")),)
        entries.append(CheckEntry(
            name=str(entry["name"]),
            tiers=tuple(TierOutcome.of(int(t), state) for t, state in sorted((entry.get("tiers") or {}).items())),
            line=entry.get("line"),
            format=entry.get("format"),
            has_reference=bool(entry.get("has_reference")),
            tolerance=entry.get("tolerance"),
            tunables=entry.get("tunables"),
            errors=tuple(record_from_plain(r) for r in entry.get("errors") or ()),
            memory=entry.get("memory"),
            mosaic_calls=entry.get("mosaic_calls"),
            lowered_hash=entry.get("lowered_hash"),
            inputs=tuple(InputSig(tuple(shape), str(dtype)) for shape, dtype in entry.get("inputs") or ()),
            timings_s={str(k): float(v) for k, v in (entry.get("timings_s") or {}).items()},
            notes=tuple(str(n) for n in entry.get("notes") or ()),
            tier3=Tier3Info(seconds=tier3.get("seconds"), shapes=tier3.get("shapes"),
                            shrunk=bool(tier3.get("shrunk"))) if tier3 else None,
            measurements=measurements,
            reached=_reached_from_plain(entry.get("reached")),
            called_from=(str(entry["called_from"][0]), int(entry["called_from"][1]))
            if entry.get("called_from") else None,
            ran_lines=tuple(int(n) for n in entry["ran_lines"]) if entry.get("ran_lines") is not None else None,
        ))
    script = result.get("script")
    return CheckResult(
        chip=str(result.get("chip") or result.get("target")),  # "target": results recorded before 2026-12
        tiers=tuple(sorted(int(t) for t in (result.get("tiers") or tiers))),
        tasks_found=int(result.get("tasks_found") or 0),
        versions=Versions(jax=found.get("jax"), libtpu=found.get("libtpu")),
        errors=tuple(record_from_plain(r) for r in result.get("errors") or ()),
        unavailable={str(k): str(v) for k, v in (result.get("unavailable") or {}).items()},
        entries=tuple(entries),
        script=ScriptInfo(calls=int(script["calls"]), distinct=int(script["distinct"])) if script else None,
        notes=tuple(str(n) for n in result.get("notes") or ()),
    )


def _reached_from_plain(reached: Any) -> tuple[ReachedCall, ...] | None:
    if not isinstance(reached, list):
        return None
    return tuple(ReachedCall(lines=tuple(int(n) for n in r.get("lines") or ()), kernel=str(r.get("kernel") or ""),
                             kernel_line=r.get("kernel_line"), kernel_module=r.get("kernel_module"),
                             scalar_prefetch=int(r.get("scalar_prefetch") or 0),
                             site=(str(r["site"][0]), int(r["site"][1])) if r.get("site") else None,
                             vmem_bytes=int(r.get("vmem_bytes") or 0),
                             buffers=tuple(BlockBuffer(role=str(b["role"]), index=int(b["index"]),
                                                       shape=tuple(b["shape"]), dtype=str(b["dtype"]),
                                                       bytes=int(b["bytes"]), buffers=int(b["buffers"]),
                                                       array=tuple(int(d) for d in b["array"]) if b.get("array")
                                                       else None)
                                           for b in r.get("buffers") or ()),
                             origins={str(k): tuple(tuple(int(n) for n in p) for p in v)
                                      for k, v in (r.get("origins") or {}).items()},
                             partial=bool(r.get("partial")),
                             grid=tuple(int(d) for d in r["grid"]) if isinstance(r.get("grid"), list) else None)
                 for r in reached)


def record_from_plain(rec: dict[str, Any]) -> ErrorRecord:
    """A runner/errors.py record (plain) as an ``ErrorRecord``; keys it does not define are dropped."""
    names = set(ErrorRecord.__dataclass_fields__)
    plain = {k: v for k, v in rec.items() if k in names and v is not None}
    plain.setdefault("stage", "")
    plain.setdefault("type", "Error")
    plain.setdefault("sentence", plain.get("message", ""))
    plain.setdefault("message", plain.get("sentence", ""))
    plain["x64"] = bool(plain.get("x64"))
    return decode_as(ErrorRecord, plain, "error record")


# --------------------------------------------------------------------------- strict decoding


def decode_as(cls: type, data: Any, where: str = "") -> Any:
    """``data`` (plain JSON) as ``cls``; ProtocolError names the first missing or mistyped field."""
    _check(cls, data, where or cls.__name__)
    return from_json(cls, data)


def _check(tp: Any, data: Any, where: str) -> None:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if data is None:
            return
        errors = []
        for arg in args:
            try:
                _check(arg, data, where)
                return
            except ProtocolError as exc:
                errors.append(str(exc))
        raise ProtocolError(errors[0] if errors else f"{where}: unexpected value {data!r:.80}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise ProtocolError(f"{where}: expected an object ({tp.__name__}), got {type(data).__name__}")
        hints = type_hints(tp)
        for f in dataclasses.fields(tp):
            if f.name not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise ProtocolError(f"{where}: the field {f.name!r} is missing (a {tp.__name__} needs it)")
                continue
            _check(hints[f.name], data[f.name], f"{where}.{f.name}")
        return
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        if data not in values:
            raise ProtocolError(f"{where}: {data!r} is not one of {', '.join(map(str, values))}")
        return
    if origin is tuple:
        if not isinstance(data, list):
            raise ProtocolError(f"{where}: expected a list, got {type(data).__name__}")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            for i, v in enumerate(data):
                _check(args[0], v, f"{where}[{i}]")
        return
    if origin is dict:
        if not isinstance(data, dict):
            raise ProtocolError(f"{where}: expected an object, got {type(data).__name__}")
        return
    if tp is bool:
        if not isinstance(data, bool):
            raise ProtocolError(f"{where}: expected true/false, got {data!r:.80}")
    elif tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise ProtocolError(f"{where}: expected an integer, got {data!r:.80}")
    elif tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise ProtocolError(f"{where}: expected a number, got {data!r:.80}")
    elif tp is str:
        if not isinstance(data, str):
            raise ProtocolError(f"{where}: expected a string, got {data!r:.80}")
