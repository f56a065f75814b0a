"""Mutation operators for the generalisation benchmark (``benchmarks/bench_generalisation.py``).

Written down before any mutant was checked: what each operator changes, when a mutant counts as
a real bug (valid), and which lines are its true lines. The benchmark scores a finding as
"located" when its primary position (start line) is within ±1 of one of the true lines.

Every edit keeps the file's line count (a removed statement becomes ``pass`` on its first line
and blank lines after), so lines of the base and of the mutant correspond. Sites are found with
Python's ``ast`` here, never with pallasite's own analysis; whether a value really reaches a
pallas_call is decided by an oracle that runs the task's entry under ``jax.eval_shape`` with
``pallas_call`` recorded (``benchmarks/mutation_oracle.py``: grid, block and array shapes, dtypes,
memory spaces, scratch, compiler params, kernel source lines), for the base and for the mutant.
"Inside a kernel" means inside the source lines of a kernel function the base's oracle run
recorded (so kernels the task never reaches are not mutated).

Operators
---------

``block-misaligned`` — block not a multiple of 8/128.
    Any int literal ``v`` (``v % 8 == 0``, ``16 <= v <= 65536``) outside kernel bodies becomes
    ``v - 4``. Valid when the entry's inputs are unchanged (not a problem size) and either (a) a
    recorded VMEM block's last dim changed to a value that is not a multiple of 128, or its
    second-to-last to one not a multiple of 8, and differs from that array dim; or (b) the base
    traces and the mutant raises while tracing (a check in jax or in the kernel library rejected
    the value). True line: the literal's line.

``vmem-overflow`` — blocks too big for VMEM.
    The same literals become ``v * 2**k`` for the smallest ``k`` in 1..6 such that a recorded call's
    VMEM blocks x 2 buffers (x ``buffer_count`` for ``pl.Buffered``) + VMEM scratch exceed the scoped
    VMEM limit the call runs under (its ``vmem_limit_bytes``, else the chip's default scoped limit
    measured for the target with libtpu), with every changed block dim still dividing its array dim
    and inputs unchanged. At most one vmem mutant per literal. True line: the literal's line.

``index-map-arity`` — index_map takes the wrong number of grid indices.
    The index_map of a BlockSpec (a lambda, or a function of the file named there) loses its last
    parameter (or gains a parameter ``_extra`` when it has one). Valid when the mutant raises while
    tracing and the base does not. True line: the lambda's line (the ``def`` line of a function).

``index-map-results`` — index_map returns the wrong number of indices.
    The index_map's returned tuple gains a trailing ``0``. Valid when the mutant raises while tracing
    and the base does not. True line: the line of the returned tuple.

``out-shape-dtype`` — wrong ``out_shape`` dtype.
    The dtype argument of a ``jax.ShapeDtypeStruct(...)`` becomes ``jnp.int32``. Valid when a
    recorded pallas_call's out_shape dtype changed from a floating dtype to int32 and the inputs are
    unchanged. True line: the dtype argument's line.

``output-unwritten`` — an output never written (store removed).
    Inside a kernel, the only store statement to an output ref (``o_ref[...] = v``, augmented or
    ``pl.store``/``pltpu.store``) becomes ``pass``. Valid by construction (the output has no other
    store statement in the kernel). True lines: the removed store's line, and the line of the
    kernel parameter naming that output.

``output-guard-never`` — an output written under a condition that is never true.
    Inside a kernel, a ``pl.when(A == B)`` whose body holds every store to an output, with ``B``
    mentioning ``num_programs`` or ending in ``- 1``, becomes ``pl.when(A == B + 1)``. Valid by
    construction (program ids stay below ``num_programs``). True line: the ``pl.when`` line.

``accumulator-not-zeroed`` — an accumulator's init removed.
    Inside a kernel, in a ``pl.when(A == 0)`` body, a store to a ref that the kernel also reads
    elsewhere (an accumulator: scratch or output) becomes ``pass``. Valid by construction (the
    ref is then read before it is written on the first step). True lines: the removed store's
    line, and the ``pl.when`` line(s) heading that body (decorator and ``def``).

``oob-read`` — an out-of-bounds slice.
    Inside a kernel, a ref index ``pl.ds(start, size)`` (or ``pl.dslice``) becomes
    ``pl.ds(start + size, size)``; an int-literal slice ``a:b`` of a ref becomes
    ``a+(b-a):b+(b-a)``. Valid by construction (the window moves by its own size: past the ref's end
    on the last window, or onto data that is not the one meant). True line: the line of the index.

``parallel-reduction`` — a reduction axis marked "parallel" on a multi-core chip.
    An ``"arbitrary"`` entry of ``dimension_semantics`` (strings or ``pltpu.ARBITRARY``) becomes
    ``"parallel"`` when the kernel initialises a ref under ``pl.when(pl.program_id(axis) == 0)``
    for that axis (the axis carries an accumulator). Checked for a two-TensorCore target (v5p).
    Valid when the recorded dimension_semantics changed. True line: the changed entry's line.

Per kernel file and operator, at most ``CAP`` valid mutants are kept, chosen by a hash of
(file, operator, line, column) so the choice does not depend on the checker.

Scoring
-------

Each base file and each mutant is checked with ``pallasite check --format json --tiers 0-3``
(target v6e; v5p for ``parallel-reduction``, whose base is checked at v5p too). A mutant is
"caught" when its report has a finding the base's report does not have (same code, line and
message) that is an error, or a warning that is not a "could not check" code (time or memory
limits, tiers skipped, interpreter unable to run: PLS205, PLS306, PLS307, PLS9xx). It is
"located" when one of those findings starts within ±1 line of a true line.

Corpus and split
----------------

Kernel files the checker was not developed on, grouped into families of near-copies (JAXBench's
flash attention is jax's; its GQA and sparse attention are splash attention): jax's own
``pallas/ops/tpu`` kernels (with a small task appended where the file has none), JAXBench's
hand-tuned ``optimized.py`` files, and tokamax's TPU kernels where their imports are available.
Families whose files this project's own benchmark mutates (jax's ``matmul.py``, JAXBench's GEMM
and paged attention) are in-sample and left out. A family is in the held-out half when the first
byte of sha256(family name) is odd, else in the development half; the held-out half is scored
only at the end.
"""

from __future__ import annotations

CAP = 6
OPERATORS = (
    "block-misaligned",
    "vmem-overflow",
    "index-map-arity",
    "index-map-results",
    "out-shape-dtype",
    "output-unwritten",
    "output-guard-never",
    "accumulator-not-zeroed",
    "oob-read",
    "parallel-reduction",
)
