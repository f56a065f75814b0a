"""The seam types every layer shares: spans, findings, kernel sites, tasks, measurements, chip
names and specs, and the key of stored results with the one code hash.

Conventions, fixed here once:
- ``Span`` lines are 0-based and columns count Unicode code points (not bytes, not UTF-16 units);
  ``end`` is exclusive. The CLI prints 1-based lines/columns; the LSP layer converts to UTF-16.
- Everything is a frozen dataclass built from plain values, so it pickles, hashes and converts to
  JSON with ``to_json``/``from_json`` (used by the worker protocol and the results store).
- A number shown to a user always carries its ``Provenance``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib.metadata
import re
import json
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["error", "warning", "information", "hint"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "information", "hint")

# Tiers of `pallasite check`:
#   0 source rules (never executes), 1 Pallas->Mosaic lowering on CPU jaxlib,
#   2 the real TPU compiler (libtpu, deviceless), 3 TPU interpret-mode run.
TIERS: tuple[int, ...] = (0, 1, 2, 3)
DEFAULT_TIERS: tuple[int, ...] = (0, 1, 2)

# Tier 3's words when outputs are NaN because the kernel read memory it never wrote (an accumulator not reset):
# the runner writes them, the locate step's client reads them to rank an init's edits first.
NAN_COMPUTED = "the NaN is computed, not left over"


@dataclass(frozen=True, order=True)
class Span:
    """A range in one text: 0-based lines, code-point columns, end exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int

    @staticmethod
    def point(line: int, column: int = 0) -> "Span":
        return Span(line, column, line, column)

    @staticmethod
    def whole_line(line: int, text: str) -> "Span":
        lines = text.splitlines()
        width = len(lines[line]) if 0 <= line < len(lines) else 0
        return Span(line, 0, line, width)

    def contains(self, line: int, column: int) -> bool:
        return (self.line, self.column) <= (line, column) <= (self.end_line, self.end_column)


@dataclass(frozen=True)
class TextEdit:
    span: Span
    new_text: str


@dataclass(frozen=True)
class Fix:
    """A mechanical fix: replacing these spans of the checked text makes the finding go away."""

    title: str
    edits: tuple[TextEdit, ...]


@dataclass(frozen=True)
class Related:
    """Another location that explains a finding (the kernel def, the pallas_call, a folded dump)."""

    span: Span
    message: str
    path: str | None = None  # None: the same file as the finding


@dataclass(frozen=True)
class Finding:
    """One verdict about one place in a kernel file."""

    code: str  # a key of pallasite.analysis.codes.CODES
    message: str  # the meaningful sentence first
    span: Span
    severity: Severity = "error"
    tier: int = 0
    path: str | None = None  # None: the file being checked
    fix: Fix | None = None
    related: tuple[Related, ...] = ()
    detail: str | None = None  # long compiler output (MLIR etc.), folded away by clients
    origin: str = "pallasite rules"  # who spoke: "pallasite rules", "jax lowering", "libtpu compiler", "TPU interpreter"
    chip: str | None = None  # the target chip the verdict is for (tiers 1-3)
    kernel: str | None = None  # the kernel function's name, when known


class Provenance(str, enum.Enum):
    """Where a number came from. Never present `interpret` or `estimate` as TPU time."""

    DEVICE = "device"  # measured on a real accelerator (Measurement.device_kind names it)
    ESTIMATE = "estimate"  # the cost model's estimate for a chip
    INTERPRET = "interpret"  # CPU interpret mode: says nothing about TPU time
    HOST = "host"  # XLA on the host CPU (a reference timed where no accelerator is): not TPU time


@dataclass(frozen=True)
class Measurement:
    """The outcome of running or timing one kernel configuration. Failures are data too."""

    status: Literal["ok", "compile_error", "runtime_error", "wrong_result", "timeout", "crash", "oom"]
    provenance: Provenance  # required: where the number came from
    device_kind: str  # e.g. "TPU v6 lite", "cpu", or the chip the estimate is for
    method: str  # how it was produced, e.g. "wall clock, block_until_ready", "xprof device time"
    samples_ns: tuple[float, ...] = ()
    median_ns: float | None = None
    config: tuple[tuple[str, Any], ...] = ()  # tunable name -> value, sorted by name
    jax_version: str | None = None
    libtpu_version: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class BlockSpecInfo:
    """One BlockSpec as written in the source.

    ``block_shape`` holds an int where the dim resolved to a literal or module constant, ``None``
    for ``None``/``pl.Squeezed()`` dims, and the source text for anything not resolvable.
    """

    span: Span
    block_shape: tuple[int | str | None, ...] | None = None
    block_shape_span: Span | None = None
    dim_spans: tuple[Span, ...] = ()
    index_map_span: Span | None = None
    index_map_arity: int | None = None  # parameters of the index_map lambda/function
    index_map_results: int | None = None  # entries of the tuple it returns
    # an index_map written as a function of the file (``def q_map(b, i): ...``, passed by name):
    # its ``def`` line up to the parameters, where its arity is written (None for a lambda)
    index_map_def_span: Span | None = None
    memory_space: str | None = None  # e.g. "VMEM", "SMEM", "ANY" when given
    role: Literal["in", "out"] = "in"
    position: int = 0  # index among in_specs / out_specs
    # Added by tier 0: where each dim's value came from when it resolved through a module constant
    # or a tunable default (None for literals), so errors can point at the constant.
    dim_origins: tuple[Span | None, ...] = ()
    certain: bool = True  # False: the entry was not a readable BlockSpec and may stand for several
    # Added by tier 0: when the spec was built by a helper function of the same file
    # (``in_specs=make_specs(bn)``), the span of that helper call in the pallas_call; ``span`` and
    # the dim spans then point into the helper's body.
    via_span: Span | None = None


@dataclass(frozen=True)
class ScratchInfo:
    span: Span
    kind: str  # "VMEM", "SMEM", "SemaphoreType.DMA", ...
    shape: tuple[int | str | None, ...] | None = None
    dtype: str | None = None


@dataclass(frozen=True)
class KernelSite:
    """One ``pallas_call`` as read from the source."""

    kernel_name: str | None  # the kernel function passed first (None if not a plain name)
    span: Span  # the whole pallas_call(...) expression
    call_span: Span  # just the callee, e.g. ``pl.pallas_call``
    enclosing_function: str | None = None  # the module-level function containing the call
    kernel_def_span: Span | None = None  # the kernel's def line, when defined in this file
    kernel_params: tuple[str, ...] | None = None
    grid: tuple[int | str, ...] | None = None
    grid_span: Span | None = None
    in_specs: tuple[BlockSpecInfo, ...] | None = None
    out_specs: tuple[BlockSpecInfo, ...] | None = None
    out_shape_count: int | None = None
    scratch_shapes: tuple[ScratchInfo, ...] | None = None
    num_scalar_prefetch: int | None = None
    dimension_semantics: tuple[str, ...] | None = None
    dimension_semantics_span: Span | None = None
    compiler_params_span: Span | None = None
    keyword_spans: tuple[tuple[str, Span], ...] = ()  # each keyword argument's span
    backend: Literal["tpu", "gpu", "unknown"] = "unknown"
    # Added by tier 0: each output's shape (dims, or the shape expression's source text) and dtype
    # as written in out_shape; the texts of the operands the call is applied to; the kernel arg's span.
    out_shapes: tuple[tuple[int | str | None, ...] | str | None, ...] | None = None
    out_dtypes: tuple[str | None, ...] | None = None
    operands: tuple[str, ...] | None = None
    kernel_name_span: Span | None = None

    def keyword_span(self, name: str) -> Span | None:
        return dict(self.keyword_spans).get(name)


@dataclass(frozen=True)
class Tunable:
    """A value autotuning may change: a keyword-only int parameter of a task's entry function
    (see docs/task-convention.md), a module constant used as a block size, an entry of a
    ``TUNED_PARAMS`` dict, or a block size passed as a keyword to a library's callable (``BlockSizes(block_q=512)``)
    (analysis/tunables.py finds them)."""

    name: str
    default: int
    candidates: tuple[int, ...] = ()
    span: Span | None = None
    kind: Literal["keyword", "constant", "tuned_params", "call"] = "keyword"
    value_span: Span | None = None  # the default's literal, the span an applied config replaces
    callee: str | None = None  # "call": the imported name whose call takes it as a keyword (``BlockSizes``)


# A name that says it is a block size (``block_q``, ``bk``, ``tile_m``, ``num_kv_pages_per_block``): analysis/tunables.py
# takes only such keywords of a library's call as tunables; tier 3 moves only such values, or declared ones, to compare
# the kernel with itself at another tiling (runner/tier3/interpret_tilings.py).
BLOCK_SIZE_NAME = re.compile(r"^(?:block|tile|tiling|chunk)|_block(?:_|s?$)|^num_\w+_per_block$|^b(?:q|k|kv|m|n|d)(?:_|$)|"
                             r"^t[mnk]$")


@dataclass(frozen=True)
class KernelTask:
    """How to run one kernel: entry, example inputs, optional reference, tolerances, tunables."""

    path: str
    entry: str  # the function that calls pallas_call (directly or not)
    format: Literal["native", "jaxbench", "maxkernel", "script", "kernelbench", "inferred"] = "native"
    inputs: str | None = None  # name of the function that makes the example inputs
    reference: str | None = None  # name of the plain-JAX reference, if any
    reference_path: str | None = None  # file holding it, when not ``path`` (e.g. baseline.py)
    atol: float | None = None
    rtol: float | None = None
    tunables: tuple[Tunable, ...] = ()


@dataclass(frozen=True)
class KernelVerdict:
    """Per kernel, per tier: "ok", "error", "skipped: <why>", or "not run"."""

    name: str
    span: Span
    tiers: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class TracedBlock:
    """One VMEM buffer of a pallas_call as the check's run made it: shape, dtype and bytes per buffer;
    ``buffers`` 2 for a pipelined (double-buffered) block, 1 for scratch."""

    role: str  # "in_specs" | "out_specs" | "scratch_shapes"
    index: int
    shape: tuple[int | None, ...]
    dtype: str
    bytes: int
    buffers: int


@dataclass(frozen=True)
class TracedCall:
    """What the last check's run learned about one pallas_call a task entry made (the worker traced the
    entry with its example inputs): the inputs, the blocks as traced, the grid, and the VMEM the compiler
    allocated (tier 2, libtpu's VMEM report) or why that is not known. Lines are the checked text's."""

    entry: str
    lines: tuple[int, ...]  # 1-based lines of the checked file on the call's stack (the pallas_call first)
    kernel: str
    kernel_line: int | None = None  # 1-based def line of the kernel, when in the checked file
    inputs: tuple[tuple[tuple[int, ...], str], ...] = ()  # the entry's example inputs: (shape, dtype)
    blocks: tuple[TracedBlock, ...] = ()
    vmem_bytes: int = 0  # the blocks' VMEM per grid step, pipelined blocks twice
    grid: tuple[int, ...] | None = None
    compiled_vmem_bytes: int | None = None  # libtpu's own scoped VMEM allocation for this kernel (tier 2)
    compiled_vmem_why: str = ""  # why ``compiled_vmem_bytes`` is None


@dataclass(frozen=True)
class FileReport:
    """What `pallasite check` knows about one file."""

    path: str
    findings: tuple[Finding, ...] = ()
    kernels: tuple[KernelVerdict, ...] = ()
    notes: tuple[str, ...] = ()  # file-level messages (e.g. "tier 2 skipped: libtpu not installed")
    skipped: str | None = None  # why nothing was checked because nothing applies (a file without Pallas)
    calls: tuple[TracedCall, ...] = ()  # what the run learned about each pallas_call it made (hovers)
    wrong_outputs: tuple[str, ...] = ()  # entries whose tier-3 outputs were wrong, NaN or unwritten, or whose run
    #   failed with an error (the locate step's)
    failed_at: tuple[tuple[str, int], ...] = ()  # of those, the ones whose run failed: (entry, 1-based line tier 3 said)
    uninitialized: tuple[str, ...] = ()  # of those, the ones whose NaN tier 3 found computed from memory never written


@dataclass(frozen=True)
class ChipSpec:
    """One TPU generation as the installed jax (and a libtpu probe) describe it.

    Rates and capacities are per TensorCore (jax's convention); the ``chip_*`` properties
    multiply by the physical cores. Measured worker-side (runner/chip_probe.py); the client side
    gets it from the worker's "chips" op or the JSON cache (knowledge/chips.py), never by importing jax.
    """

    name: str  # "v5e"
    device_kind: str  # the abstract device kind tier 1 lowers for, e.g. "TPU v5 lite"
    topology: str  # the deviceless libtpu topology tier 2 compiles for, e.g. "v5e:2x2"
    generation: int
    cores_per_chip: int  # physical TensorCores on one chip
    device_cores: int  # TensorCores per logical device in ``topology`` (2 = megacore)
    megacore: bool  # whether the chip can run as one megacore device
    bf16_flops: float  # per TensorCore, per second
    int8_ops: float
    fp8_ops: float
    hbm_bytes: int
    hbm_bytes_per_s: float
    vmem_bytes: int
    smem_bytes: int
    mxu_size: int  # MXU column size
    num_mxus: int
    lanes: int
    sublanes: int
    scoped_vmem_limit_bytes: int | None = None  # the compiler's default scoped-VMEM limit
    scoped_vmem_source: str = "not measured"  # how the limit was found, e.g. "libtpu 0.0.42.1 probe"
    source: str = ""  # where the rest came from, e.g. "jax 0.10.2 get_tpu_info_for_chip"

    @property
    def chip_bf16_flops(self) -> float:
        return self.bf16_flops * self.cores_per_chip

    @property
    def chip_hbm_bytes_per_s(self) -> float:
        return self.hbm_bytes_per_s * self.cores_per_chip

    @property
    def chip_hbm_bytes(self) -> int:
        return self.hbm_bytes * self.cores_per_chip


@dataclass(frozen=True)
class BlockCost:
    """One operand's blocks over a grid, as the cost model counted them (runner/program/cost_model.py)."""

    role: Literal["in", "out"]
    position: int
    origin: str  # jax's name for the operand, e.g. "args[0]", "outputs[0]"
    array_shape: tuple[int, ...]
    block_shape: tuple[int | None, ...]  # None: a squeezed dim (block of 1)
    dtype: str
    memory_space: str  # "vmem" (pipelined), "smem", "any" (left in HBM; the kernel copies itself)
    buffers: int  # VMEM buffers the pipeline keeps (2 = double buffering)
    fetches: int  # block copies between HBM and VMEM over the grid (unchanged index: no copy)
    hbm_bytes: int  # bytes those copies move


@dataclass(frozen=True)
class CallCost:
    """What one pallas_call costs, counted statically from its traced program (no device)."""

    kernel: str
    grid: tuple[int, ...]
    steps: int
    blocks: tuple[BlockCost, ...]
    scratch_bytes: int
    vmem_bytes: int  # blocks x buffers + scratch
    vmem_limit_bytes: int | None  # vmem_limit_bytes from the call's compiler params, if set
    hbm_bytes: int
    flops: int  # all arithmetic, MXU included, over the whole grid
    mxu_flops: int  # dot_general's share
    transcendentals: int
    mxu_efficiency: float  # how the matmul operand dims fill the chip's MXU (1.0 = full passes)
    dimension_semantics: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    dma_bytes: int = 0  # bytes the kernel's own DMAs move (pl.ANY operands; runner/program/mosaic_counts.py)
    dma_copies: int = 0
    dma_count: str = "exact"  # "exact", "upper bound", "lower bound", "bounded both ways" (runner/program/step_counts.py)
    flops_count: str = "exact"  # the same words for the work: pl.when/while decided by known values or bounded
    kernel_class: str = ""  # what kind of kernel the rules priced (runner/program/checked_classes.py), e.g. "blocked matmul"


@dataclass(frozen=True)
class CostEstimate:
    """The cost model's answer for one configuration on one chip: always an estimate, never
    device time (``label``). ``status`` "ok" or "trace_error" (``error`` says why)."""

    chip: str
    config: tuple[tuple[str, Any], ...]
    status: Literal["ok", "trace_error", "implausible"]  # implausible: below the physical floor (runner/judging/judge.py)
    calls: tuple[CallCost, ...] = ()
    seconds: float | None = None  # the roofline time (runner/program/cost_model.py, model ``model``)
    compute_s: float | None = None
    memory_s: float | None = None
    overhead_s: float | None = None
    bound: str | None = None  # "compute", "memory" or "overhead": the largest term
    program_hash: str | None = None  # same hash: the same traced program (timed once)
    error: str | None = None
    assumptions: tuple[str, ...] = ()
    model: str = ""  # the cost model's name and version, e.g. "pallasite roofline v5"
    xla_bytes: int | None = None  # HBM bytes of the plain XLA ops around the kernels
    xla_flops: int | None = None
    # the achieved-efficiency factors the figure used, (name, value, where it came from): fitted ones
    # say what they were fitted on (runner/program/cost_model.FACTORS)
    factors: tuple[tuple[str, Any, str], ...] = ()
    # (low, high) seconds: the figure over the model's measured error on published TPU times it was not
    # fitted on (leave-family-out; runner/program/cost_model.interval says how), None where the model has no figure
    interval: tuple[float, float] | None = None
    # what the figure is made of, (term, seconds): compute, HBM, per-op overhead (launches), per-step overhead
    terms: tuple[tuple[str, float], ...] = ()
    # what the figure rests on, in words: each kernel's class and whether the model's rules for it were checked
    # out of sample against published TPU times ("rules not yet checked against a TPU" where not), and which
    # of the inputs' values it was priced for (runner/program/checked_classes.py)
    rests_on: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"estimate ({self.chip})"


@dataclass(frozen=True)
class ChipTarget:
    """How pallasite names one TPU generation: jax's ChipVersion value, the device kind tier 1
    lowers for, the deviceless topology tier 2 compiles for (both verified against libtpu by
    tests/test_chips.py)."""

    name: str
    chip_version: str  # jax's pltpu.ChipVersion value
    device_kind: str
    topology: str
    device_cores: int  # TensorCores per logical device libtpu reports for ``topology``


# The generations a check can target (every layer reads the names here: the checker's options,
# the worker's tiers, the chip table). With jax 0.10.2 + libtpu 0.0.42.1, 7x's tier-1 lowering
# ("TPU7x") and deviceless tier-2 compile (tpu7x:2x2x1) both work; its table row needs a jax that
# knows it.
CHIP_TARGETS: tuple[ChipTarget, ...] = (
    ChipTarget("v4", "v4", "TPU v4", "v4:2x2x1", 1),  # libtpu gives v4 split (8 devices)
    ChipTarget("v5e", "v5e", "TPU v5 lite", "v5e:2x2", 1),
    ChipTarget("v5p", "v5p", "TPU v5", "v5p:2x2x1", 2),  # megacore
    ChipTarget("v6e", "v6e", "TPU v6 lite", "v6e:2x2", 1),
    ChipTarget("7x", "7x", "TPU7x", "tpu7x:2x2x1", 1),
)
DEFAULT_CHIP = "v6e"  # the chip checked when none is named
# the one word for something nothing checked (a tier that could not run, a compile part never asked for): said
# "not checked" alone, or "not checked: <why>" as a tier's state (NOT_CHECKED_STATE); never "passed", never "failed"
NOT_CHECKED = "not checked"
NOT_CHECKED_STATE = f"{NOT_CHECKED}: "


def chip_target(name: str) -> ChipTarget:
    """The target called ``name`` (also accepts its device kind or topology); ValueError lists them."""
    for t in CHIP_TARGETS:
        if name in (t.name, t.device_kind, t.topology):
            return t
    raise ValueError(f"unknown TPU chip {name!r}; known: {', '.join(t.name for t in CHIP_TARGETS)}")


# --------------------------------------------------------------------------- stored results


def reaching(direct: Iterable[str], calls: Mapping[str, set[str]]) -> set[str]:
    """``direct`` plus every function that calls (by name) one already in the set, to a fixed point: the one
    call-graph closure, for tier 0's entry discovery (analysis/callgraph.py) and the worker's (runner/tasks/)."""
    found = set(direct)
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            if name not in found and called & found:
                found.add(name)
                changed = True
    return found


def code_hash(kind: Literal["lowered", "source"], *parts: str | bytes) -> str:
    """``kind:<sha256>`` over ``parts`` in order: the one way code is hashed for stored results.

    ``lowered``: the tier-1 lowered module's text (the worker hashes it: equal modules compile the
    same); ``source``: a kernel file's text plus its local imports (analysis/local_imports.py)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
    return f"{kind}:{h.hexdigest()}"


VERSIONED = ("pallasite", "jax", "jaxlib", "libtpu")


@functools.lru_cache(maxsize=1)
def _installed() -> tuple[tuple[str, str | None], ...]:
    out = []
    for dist in VERSIONED:
        try:
            out.append((dist, importlib.metadata.version(dist)))
        except importlib.metadata.PackageNotFoundError:
            out.append((dist, None))
    return tuple(out)


def installed_versions() -> dict[str, str | None]:
    """The one reader of the pallasite, jax, jaxlib and libtpu versions installed for this
    interpreter (None: absent), from package metadata without importing them, once per process
    (a process keeps the versions it imported). The worker reports them, verdicts and stored
    results are keyed by them (``ResultKey``), the chip table's cache is named by them."""
    return dict(_installed())


@dataclass(frozen=True)
class ResultKey:
    """What a stored result (a tier's verdict, a measurement, a tuning run) is about: the code,
    the entry, the inputs' shapes/dtypes, the configuration (tunable -> value), the chip, the
    jax/libtpu versions and the backend. The checker builds it, the results store keys rows by
    ``digest()``.

    The stored form (``to_json``, and what ``digest`` hashes) keeps the field names of the store's
    first schema ("source_hash", "source_kind"), so results stored before the key types were merged
    are still found."""

    code_hash: str  # code_hash("lowered", module) or code_hash("source", file + local imports)
    kernel: str | None = None  # the entry / kernel name within the file
    inputs: tuple[tuple[tuple[int, ...], str], ...] = ()  # (shape, dtype) of each input leaf
    config: tuple[tuple[str, Any], ...] = ()  # tunable -> value (sorted by name when digested)
    chip: str | None = None  # target, e.g. "v6e"
    jax_version: str | None = None
    libtpu_version: str | None = None
    backend: str = "local"  # "local", "command:<launcher>", "ssh:<host>", "ray", ...

    @property
    def code_kind(self) -> str:
        """"lowered" or "source": which code the hash is of."""
        return "lowered" if self.code_hash.startswith("lowered:") else "source"

    def _stored(self) -> dict[str, Any]:
        return {"source_hash": self.code_hash, "source_kind": self.code_kind, "kernel": self.kernel,
                "inputs": to_json(self.inputs), "config": to_json(self.config), "chip": self.chip,
                "jax_version": self.jax_version, "libtpu_version": self.libtpu_version, "backend": self.backend}

    def digest(self) -> str:
        """SHA-256 of the canonical stored form: stable across processes, Python versions and
        config order."""
        data = self._stored()
        data["config"] = sorted([str(k), v] for k, v in self.config)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()

    def without_config(self) -> "ResultKey":
        return dataclasses.replace(self, config=())

    def to_json(self) -> str:
        """The stored form as JSON text."""
        return json.dumps(self._stored(), sort_keys=True, default=str)

    @staticmethod
    def from_json(text: str) -> "ResultKey":
        data = json.loads(text)
        return ResultKey(
            code_hash=data["source_hash"], kernel=data.get("kernel"),
            inputs=tuple((tuple(shape), str(dtype)) for shape, dtype in data.get("inputs", ())),
            config=tuple((str(k), v) for k, v in data.get("config", ())),
            chip=data.get("chip"), jax_version=data.get("jax_version"),
            libtpu_version=data.get("libtpu_version"), backend=data.get("backend", "local"))


# --------------------------------------------------------------------------- JSON conversion


def to_json(value: Any) -> Any:
    """A dataclass tree as plain JSON values (enums by value, tuples as lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def from_json(cls: type, data: Any) -> Any:
    """Inverse of ``to_json`` for the dataclasses in this module."""
    return _from(_target(cls), data)


@functools.lru_cache(maxsize=None)
def _target(cls: type) -> Any:
    return typing.get_type_hints(_holder(cls))["x"]


@functools.lru_cache(maxsize=None)
def type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints`` of a dataclass, computed once per class (it compiles every string
    annotation each time: the protocol's readers call it for every value)."""
    return typing.get_type_hints(cls)


def _holder(cls: type) -> type:
    class _H:
        x: cls  # type: ignore[valid-type]

    _H.__annotations__ = {"x": cls}
    return _H


def _from(tp: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        hints = type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        return tp(**{k: _from(hints[k], v) for k, v in data.items() if k in names})
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from(args[0], v) for v in data)
        return tuple(_from(a, v) for a, v in zip(args, data))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        for arg in typing.get_args(tp):
            if arg is type(None):
                continue
            try:
                return _from(arg, data)
            except (TypeError, ValueError, AttributeError):
                continue
        return data
    return data
