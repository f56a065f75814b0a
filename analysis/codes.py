"""The code registry: every finding code pallasite can report, with a title and a one-line hint.

Codes are stable (tools and suppression comments depend on them). Families:
- PLS0xx  source rules (tier 0, never executes anything)
- PLS1xx  Pallas->Mosaic lowering (tier 1, CPU jaxlib)
- PLS2xx  the real TPU compiler (tier 2, libtpu deviceless)
- PLS3xx  TPU interpret-mode runs (tier 3)
- PLS9xx  running the check itself: tasks, imports, worker health, limits. Every one means "could
          not check" (a file that failed to import or run, a limit, a crash, a missing tier or
          module, an invalid task, no kernel call): a warning or information, never an error;
          `--strict` turns "not fully checked" into a failing exit status.

The long explanations live in the knowledge layer's catalog (one entry per code here).
"""

from __future__ import annotations

from dataclasses import dataclass

from .types import Severity


@dataclass(frozen=True)
class Code:
    code: str
    title: str
    hint: str  # one line: what to do about it
    severity: Severity = "error"


def _codes(*entries: Code) -> dict[str, Code]:
    table: dict[str, Code] = {}
    for entry in entries:
        assert entry.code not in table, f"duplicate code {entry.code}"
        table[entry.code] = entry
    return table


CODES: dict[str, Code] = _codes(
    # ---------------------------------------------------------------- tier 0: source rules
    Code("PLS000", "Python syntax error", "Fix the syntax at the marked position; nothing else can be checked until the file parses."),
    Code("PLS001", "Block shape breaks the TPU (8, 128) tiling rule",
         "Make the last block dim a multiple of 128 and the second-to-last a multiple of 8, or equal to the full array dim."),
    Code("PLS002", "index_map arity does not match the grid rank",
         "Give the index_map one parameter per grid dimension (plus the scalar-prefetch refs, if any)."),
    Code("PLS003", "index_map result count does not match the block rank",
         "Return one block index per dimension of block_shape."),
    Code("PLS004", "dimension_semantics length does not match the grid rank",
         "List one of \"parallel\"/\"arbitrary\" per grid dimension."),
    Code("PLS005", "Kernel parameter count does not match inputs + outputs + scratch",
         "The kernel takes one ref per input, per output and per scratch buffer, in that order (scalar-prefetch refs first)."),
    Code("PLS006", "Python control flow on a program_id value",
         "program_id is a traced value: use jax.lax.cond / pl.when instead of Python if/while."),
    Code("PLS007", "API removed from or renamed in the installed jax",
         "Use the current name shown in the message."),
    Code("PLS008", "Number of out_specs does not match out_shape",
         "Give one BlockSpec per output in out_shape."),
    Code("PLS009", "Kernel function returns a value",
         "Pallas kernels write results through their output refs and return None."),
    Code("PLS010", "Block rows below the dtype's sublane tiling",
         "Use a multiple of the dtype's row tiling (8 for 32-bit, 16 for 16-bit, 32 for 8-bit types) on TPU.",
         "warning"),
    Code("PLS011", "64-bit dtype in a TPU kernel",
         "TPUs have no 64-bit vector support: use 32-bit types inside the kernel."),
    Code("PLS012", "Grid is not a tuple of ints",
         "grid must be an int or a tuple of ints (static at trace time)."),
    Code("PLS013", "Static ref slice outside the block",
         "Keep the slice (start + size) within the ref's block shape, or widen the BlockSpec's block_shape / scratch shape."),
    Code("PLS014", "Kernels launched in a way tier 0 cannot read",
         "Tier 0 checks pallas_calls written in this file (or through a wrapper defined here); the compiler tiers check the rest.",
         "information"),
    Code("PLS015", "Blocks exceed the scoped VMEM limit",
         "Shrink the blocks (or scratch), or raise vmem_limit_bytes in the compiler params up to the chip's VMEM."),
    Code("PLS016", "A grid axis that carries state across steps is marked parallel on a two-TensorCore chip",
         "Mark the axis \"arbitrary\": its steps must run in order on one core (step 0 initialises what the others read).",
         "warning"),
    Code("PLS017", "The kernel never writes one of its outputs",
         "Store the result into the output ref on every path (o_ref[...] = value, or a DMA into it), or alias it to an input with input_output_aliases."),
    Code("PLS018", "A scratch buffer is read on the first grid step before anything writes it",
         "Initialise the scratch under @pl.when(pl.program_id(k) == 0) (zeros for a sum, -inf for a running max) before the first read."),
    Code("PLS019", "BlockSpec arguments in the old order (index_map first)",
         "Write pl.BlockSpec(block_shape, index_map): the block shape comes first since jax 0.4.31."),
    Code("PLS020", "An index_map names a block past the end of the array",
         "Make the grid cover the array (pl.cdiv(dim, block) blocks), or fix the index the map returns for that axis."),
    Code("PLS021", "The grid's floor division leaves the tail of an output unwritten",
         "Use a block size that divides the dim, or pl.cdiv(dim, block) grid steps with the tail masked: the last partial block is padded."),
    Code("PLS022", "The grid's floor division leaves the tail of an input unread",
         "Use a block size that divides the dim, or pl.cdiv(dim, block) grid steps with the tail masked (a contraction over the padding must not add it).",
         "warning"),
    # ---------------------------------------------------------------- tier 1: lowering
    Code("PLS100", "Pallas TPU lowering failed", "Read the message; the marked line is where the lowering stopped."),
    Code("PLS101", "Block shape not tileable on TPU", "Make the last two block dims divisible by (8, 128) or equal to the array dims."),
    Code("PLS102", "index_map returns the wrong number of indices", "Return one block index per dimension of block_shape."),
    Code("PLS103", "Operation not supported by the Pallas TPU lowering",
         "Rewrite with supported operations (see the docs passages) or move it outside the kernel."),
    Code("PLS104", "Store or load shape/dtype mismatch", "Make the stored value's shape and dtype match the ref slice."),
    Code("PLS105", "dimension_semantics rejected by the lowering", "Give one semantics entry per grid dimension."),
    Code("PLS106", "index_map returns non-integer indices", "Block indices must be int32: use // instead of /, and jnp.int32 values."),
    Code("PLS107", "64-bit type in TPU lowering", "Use 32-bit types in the kernel, or disable jax_enable_x64 for it."),
    Code("PLS108", "Memory-space misuse (vector load from SMEM or scalar store to VMEM)",
         "SMEM holds scalars: read single elements; use VMEM refs for vector loads and stores."),
    Code("PLS109", "Number of BlockSpecs does not match the arguments", "Give one BlockSpec per input and per output."),
    Code("PLS110", "Kernel shape or signature rejected during tracing", "Match the kernel's parameters to inputs, outputs and scratch."),
    Code("PLS111", "API missing from the installed jax (removed or renamed)",
         "Use the current name (e.g. pltpu.CompilerParams, pltpu.MemorySpace / pltpu.SMEM); see the message."),
    Code("PLS112", "Block rank does not match the array rank", "Give block_shape one entry per array dimension (None or pl.Squeezed() to drop one)."),
    Code("PLS113", "Grid is not a tuple of ints", "Compute the grid with integer division (//) or pl.cdiv."),
    Code("PLS114", "A model-written candidate runs its pallas_call in interpret mode (nothing compiled for the TPU)",
         "Remove interpret (or set it to False): a proposal or candidate must compile for the TPU, not run as plain JAX."),
    Code("PLS115", "Kernel applied to operands sharded over several devices outside shard_map",
         "Wrap the call in jax.shard_map(f, mesh=..., in_specs=..., out_specs=...): each device then runs the kernel on its own shard."),
    Code("PLS117", "input_output_aliases joins an input and an output of different shape or dtype",
         "Alias only an input and an output of the same shape and dtype (or drop the alias, or declare the output like the input)."),
    Code("PLS116", "out_shape under shard_map(check_vma=True) without the manual axis type",
         "Pass manual_axis_type=jax.typeof(x).manual_axis_type to the out_shape's jax.ShapeDtypeStruct (vma= before jax 0.10), or check_vma=False to shard_map."),
    # ---------------------------------------------------------------- tier 2: TPU compiler
    Code("PLS200", "TPU compiler (Mosaic) rejected the kernel", "Read the compiler's message; the marked line is the operation it names."),
    Code("PLS201", "VMEM out of memory", "Shrink the blocks or scratch buffers, or raise vmem_limit_bytes in the compiler params."),
    Code("PLS202", "Unsupported shape cast or relayout", "Keep the last two dims' layout: reshape only leading dims, or reshape outside the kernel."),
    Code("PLS203", "Dynamic lane offset not provably aligned", "Use pl.multiple_of(offset, 128) or a statically aligned offset."),
    Code("PLS204", "Block shape misaligned with the dtype's tiling", "Use the dtype's row tiling (e.g. 32 rows for int8)."),
    Code("PLS205", "TPU compiler ran past the time limit (not checked)",
         "Raise the time limit (--time-limit / timeLimit) for large kernels; smaller blocks or fewer unrolled steps compile faster.",
         "warning"),
    # ---------------------------------------------------------------- tier 3: interpret-mode runs
    Code("PLS300", "Kernel failed when run in TPU interpret mode", "Read the message; the marked line is where it failed."),
    Code("PLS301", "Data race (an async copy, or two TensorCores, on one buffer)",
         "Order the two accesses the message names: for an async copy, wait on its semaphore before reading or reusing the buffer; for two TensorCores writing one output block, mark that grid axis \"arbitrary\" or give each core its own output block."),
    Code("PLS302", "Out-of-bounds read or DMA", "Clamp the index or pad the input; interpret=True alone silently clamps."),
    Code("PLS303", "Output region left unwritten or NaN", "Write every output block on every grid step, or initialise the accumulator."),
    Code("PLS304", "Result differs from the reference", "Check accumulator initialisation and dimension_semantics of reduction axes."),
    Code("PLS305", "TPU interpreter and TPU compiler disagree", "The real compiler is the authority for what compiles; the interpreter for what runs.", "warning"),
    Code("PLS306", "Tier 3 not checked: jax's TPU interpreter could not run this kernel",
         "A limitation of jax's interpreter, not of your kernel: tiers 1-2 still apply; check the numbers another way.",
         "warning"),
    Code("PLS307", "Tier 3 not checked: the interpret run reached a resource limit",
         "Raise the time or memory limit, or give smaller example inputs; tiers 1-2 keep their verdicts.", "warning"),
    Code("PLS308", "Kernel code no check ran",
         "Add a call that reaches it (a task or test whose inputs take this path): code no check runs is not tested.",
         "information"),
    # ---------------------------------------------------------------- running the check
    Code("PLS900", "No task: compiler tiers need example inputs",
         "Add example_inputs() (see docs/task-convention.md) so tiers 1-3 know the shapes.", "information"),
    Code("PLS901", "The file raised an exception when imported (or when run, in script mode): not fully checked",
         "Fix the error at the marked line if it is one; the message says which pallas_calls were still checked (importing: the file's other top-level statements still ran; script mode: the calls made before it).",
         "warning"),
    Code("PLS902", "Check worker crashed (not fully checked)", "The worker process died; it has been restarted. The message says how it ended.",
         "warning"),
    Code("PLS903", "Check ran past its time limit (not fully checked)",
         "Raise the time limit setting (--time-limit / timeLimit), or shrink the example inputs / blocks.", "warning"),
    Code("PLS904", "Check ran past its memory limit (not fully checked)",
         "Raise the memory limit setting, or shrink the example inputs.", "warning"),
    Code("PLS905", "Task definition is invalid (not checked)", "Follow docs/task-convention.md: the message says which part is wrong.",
         "warning"),
    Code("PLS906", "Check tier unavailable", "Install what the message names (e.g. jax's tpu extra, libtpu, for tier 2).", "information"),
    Code("PLS907", "The script made no pallas_call (nothing checked)",
         "Make the file's __main__ call its kernel (a TPU-only branch is fine: it runs on the target chip's abstract device), or add example_inputs().",
         "warning"),
    Code("PLS908", "The script stopped in code that is not a kernel (its later calls not checked)",
         "The calls made before the marked line were checked; move the failing host-side code after the kernel calls, or add example_inputs() to check without running the script.",
         "warning"),
    Code("PLS909", "A module the file imports is not installed for the check worker (not checked)",
         "Install the module into the worker's interpreter (the `interpreter` setting), or check in the project's own environment.",
         "warning"),
)


def code(name: str) -> Code:
    """The registry entry for ``name``; unknown codes are a programming error."""
    return CODES[name]


# Findings that say a check could not finish or could not run (time limit, worker trouble, tier
# unavailable): the file was not fully checked, which is never a pass.
COULD_NOT_CHECK = frozenset({"PLS205", "PLS900", "PLS903", "PLS904", "PLS906", "PLS907", "PLS908", "PLS909"})
