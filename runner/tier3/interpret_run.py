"""One TPU interpret-mode run of a task's entry (worker side: imports jax).

``interpret_once(fn, args, ...)`` runs ``fn(*args)`` with every ``pallas_call`` forced into jax's
TPU interpret mode (``pltpu.InterpretParams``: race detection, NaN-filled fresh memory,
out-of-bounds reads raised, two simulated TensorCores and a shuffled order of "parallel" grid
steps by default) and never raises: the outputs or the exception, the race reports and what jax
printed meanwhile come back as a ``Run``. Variants used to explain a finding: other semantics
(``SemanticsOverride``), one core, zero-filled memory, DMAs completing at once, output blocks
refilled with NaN before each step (``refilling_kernel``), and grid axes run backward
(``runner/grid_order.py``). ``runner/tier3/interpret.py`` runs the tier, ``runner/tier3/interpret_diagnose.py``
reads the runs.
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu

from ..grid_order import Choose, ReversedAxes
from ..intercept import RecordedCall, SemanticsOverride, dimension_semantics, intercept_pallas_calls
from ..reach import entry_namespaces as namespaces  # noqa: F401  (the entry's module globals, for the reruns)

SIMULATED_CORES = 2  # megacore (v4, v5p): "parallel" grid axes are split between two cores
SEED = 7  # order of "parallel" grid steps; fixed so reruns are reproducible


@dataclass
class Run:
    """One interpret-mode run of the entry: outputs or the exception, race reports, time."""

    outputs: Any = None
    error: BaseException | None = None
    races: list[str] = field(default_factory=list)
    seconds: float = 0.0
    noise: str = ""  # what jax printed to stderr meanwhile (the user's stack of a failing operation)
    calls: list[RecordedCall] = field(default_factory=list)


def interpret_params(uninitialized: str = "nan", cores: int = SIMULATED_CORES, seed: int = SEED,
                     dma: str = "on_wait") -> Any:
    return pltpu.InterpretParams(
        detect_races=True,
        uninitialized_memory=uninitialized,
        out_of_bounds_reads="raise",
        num_cores_or_threads=cores,
        random_seed=seed,
        dma_execution_mode=dma,
    )


def shuffling_seed(calls: list[RecordedCall], tries: int = 64) -> int:
    """A seed under which the interpreter visits every "parallel" grid axis out of order.

    The interpreter permutes each parallel axis with ``jax.random.permutation`` of a key split from
    ``jax.random.key(seed)``; a seed that leaves an axis in order would hide a reduction axis
    wrongly marked parallel, so the first seed that moves every such axis (of size >= 2) is used.
    """
    axes: list[list[int]] = []
    for call in calls:
        sem = dimension_semantics(call.kwargs.get("compiler_params"))
        grid = call.kwargs.get("grid")
        if grid is None and call.kwargs.get("grid_spec") is not None:
            grid = getattr(call.kwargs["grid_spec"], "grid", None)
        if isinstance(grid, int):
            grid = (grid,)
        if sem and grid and len(sem) == len(grid) and all(isinstance(g, int) for g in grid):
            axes.append([g if s == "parallel" else 0 for s, g in zip(sem, grid)])
    if not any(g >= 2 for sizes in axes for g in sizes):
        return SEED
    for seed in range(tries):
        if all(_moves_every_axis(seed, sizes) for sizes in axes):
            return seed
    return SEED


def _moves_every_axis(seed: int, sizes: list[int]) -> bool:
    key = jax.random.key(seed or 0)
    for size in sizes:
        if size == 0:
            continue  # "arbitrary": the interpreter draws nothing for it
        key, sub = jax.random.split(key)
        if size >= 2 and bool(np.all(np.asarray(jax.random.permutation(sub, jnp.arange(size, dtype=jnp.int32))) == np.arange(size))):
            return False
    return True


def interpret_once(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    uninitialized: str = "nan",
    cores: int = SIMULATED_CORES,
    seed: int = SEED,
    dma: str = "on_wait",
    semantics: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None,
    user_files: tuple[str, ...] = (),
    modules: tuple[Any, ...] = (),
    refill_outputs: bool = False,
    reverse: Choose | None = None,
    time_limit_s: float | None = None,
) -> Run:
    """Run ``fn(*args)`` with every pallas_call in TPU interpret mode; never raises.

    ``refill_outputs``: every kernel's blocked float outputs are filled with NaN at the start of
    each grid step (``refilling_kernel``), so a block a step leaves unwritten comes back NaN instead
    of keeping what an earlier step left in the buffer. ``reverse(semantics, grid)``: the grid axes
    each call runs backward (``runner/grid_order.py``). ``time_limit_s``: the run ends with ``RunPastLimit`` as
    its error at its first ref access past it (``interpret_deadlock.deadline``)."""
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc

    from . import interpret_deadlock, interpret_views

    interpret_views.install()  # refs viewed through a reshape or bitcast (was: PLS306, tier 3 could not run them)
    interpret_deadlock.install()  # a DMA wait nothing will signal raises at once (was: a hang to the time limit)
    interpret_views.VIEWED.clear()
    run = Run()
    captured = io.StringIO()
    noise = io.StringIO()  # tracebacks the interpreter's callback threads print
    override = SemanticsOverride(semantics)
    rewrite, wrap = override, refilling_kernel if refill_outputs else None
    if reverse is not None:  # axes run backward: chosen from the call as written, before the override
        order = ReversedAxes(reverse)
        rewrite = lambda kwargs: override(order.rewrite(kwargs))  # noqa: E731
        wrap = _chained(wrap, order.wrap_kernel)
    pltpu.reset_tpu_interpret_mode_state()
    if semantics is not None:  # the override acts while pallas_call is traced: a jitted entry's program
        jax.clear_caches()  # from an earlier run would otherwise run its old dimension_semantics again
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(noise), pltpu.force_tpu_interpret_mode(
            interpret_params(uninitialized, cores, seed, dma)
        ), intercept_pallas_calls(rewrite=rewrite, user_files=user_files, modules=modules, wrap_kernel=wrap) as calls, \
                interpret_deadlock.deadline(time_limit_s):
            run.calls = calls
            out = fn(*_own_copies(args))
            run.outputs = jax.tree.map(np.asarray, jax.block_until_ready(out))
    except Exception as exc:  # noqa: BLE001 - the interpreter's verdict
        run.error = exc
    finally:
        run.seconds = time.perf_counter() - start
    run.races, unsure = interpret_views.unviewed_races(_race_reports(captured.getvalue()))
    run.noise = noise.getvalue()[-200_000:]
    if run.races or (ipc.races is not None and ipc.races.races_found and not run.races and not unsure):
        run.races = run.races or ["RACE DETECTED (the interpreter gave no location)"]
    pltpu.reset_tpu_interpret_mode_state()
    return run


def _own_copies(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The inputs as arrays of this run's own: an entry that donates its arguments (``donate_argnums``)
    deletes what it is given, and tier 3 runs the entry again, and the reference, on the same inputs (the
    second run raised "Array has been deleted": a false PLS300 on tokamax's and tpu-inference's MLA)."""
    return jax.tree.map(lambda a: jnp.array(a, copy=True) if isinstance(a, jax.Array) else a, args)


def _chained(first: Callable[..., Any] | None, then: Callable[..., Any]) -> Callable[..., Any]:
    """Two ``wrap_kernel`` hooks, one after the other."""
    if first is None:
        return then
    return lambda kernel, out_shape, kwargs: then(first(kernel, out_shape, kwargs), out_shape, kwargs)


def refilling_kernel(kernel: Callable[..., Any], out_shape: Any, kwargs: dict[str, Any]) -> Callable[..., Any]:
    """``kernel`` preceded, at every grid step, by filling its blocked VMEM float outputs with NaN.

    The kernel's refs come in order: scalar prefetch, inputs, outputs, scratch; the outputs are
    found from the end (the scratch count and the outputs' count are known). Outputs left in
    HBM/ANY memory (written by DMA) are not touched."""
    grid_spec = kwargs.get("grid_spec")
    specs = kwargs.get("out_specs") if grid_spec is None else getattr(grid_spec, "out_specs", None)
    scratch = kwargs.get("scratch_shapes") if grid_spec is None else getattr(grid_spec, "scratch_shapes", None)
    outs = jax.tree.leaves(out_shape, is_leaf=lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))
    spec_list = list(specs) if isinstance(specs, (list, tuple)) else [specs] * len(outs)
    n_scratch = len(jax.tree.leaves(list(scratch or ())))  # each leaf is one scratch ref
    blocked = []
    for i, o in enumerate(outs):
        spec = spec_list[i] if i < len(spec_list) else None
        space = str(getattr(spec, "memory_space", "") or "").upper()
        blocked.append(getattr(spec, "block_shape", None) is not None and "ANY" not in space and "HBM" not in space
                       and "SMEM" not in space and jnp.issubdtype(jnp.dtype(o.dtype), jnp.floating))
    if not any(blocked):
        return kernel

    def refilled(*refs: Any, **params: Any) -> Any:
        first = len(refs) - n_scratch - len(outs)
        for i, fill in enumerate(blocked):
            ref = refs[first + i] if 0 <= first + i < len(refs) else None
            if fill and ref is not None and hasattr(ref, "shape"):
                ref[...] = jnp.full(ref.shape, jnp.nan, ref.dtype)
        return kernel(*refs, **params)

    refilled.__name__ = getattr(kernel, "__name__", "kernel")
    return refilled


def _race_reports(text: str) -> list[str]:
    return [("RACE DETECTED" + part).strip() for part in text.split("RACE DETECTED")[1:]]


def all_arbitrary(sem: tuple[str, ...]) -> tuple[str, ...]:
    return ("arbitrary",) * len(sem)


def no_semantics(sem: tuple[str, ...]) -> None:
    return None  # every grid axis "arbitrary", however many vmap added
