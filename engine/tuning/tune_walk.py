"""The walk down a ranking until a configuration passes tier 2 (the compile for the chip).

The cost model ranks configurations it cannot compile: its VMEM count leaves out what the compiler adds
(internal scratch, temporaries), so the best-ranked may not compile. ``walk`` takes the ranking best
first and a ``compile`` callable (the checker's tiers 0-2, or any judge that answers a ``CompileResult``
for one configuration) and compiles one configuration after another until one passes, at most
``budget`` compiles. It learns from each rejection: a configuration at least as large as one the
compiler ran out of VMEM for (every VMEM block elementwise, the scratch, the buffers, and every tunable
value; ``analysis/feasibility.at_least_as_large``) is skipped without compiling. ``accept`` is a further
check of a configuration that compiled (tune's interpret-mode check); a configuration it refuses is
walked past. Each step is data (``Step``): what was compiled, what the compiler said, what was skipped
and why, so the report can show every reason.

Nothing here imports JAX; the compile is the caller's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ...analysis import feasibility
from ...analysis.types import CostEstimate
from ...analysis.verdict import CompileResult

from .tune_search import Config

Compile = Callable[[Config], Awaitable[CompileResult]]
Accept = Callable[[Config], Awaitable["bool | None"]]  # None: refused, and stop walking

PASSED, REJECTED, SKIPPED, UNCHECKED, REFUSED = "passed", "rejected", "skipped", "unchecked", "refused"


@dataclass(frozen=True)
class Step:
    """One configuration on the walk: ``state`` is "passed" (compiled for the chip), "rejected" (the compiler
    said no: ``compile`` says why), "skipped" (not compiled: ``like`` is the rejected configuration it is at
    least as large as), "unchecked" (the compile did not finish: a limit or a crash, no verdict either way)
    or "refused" (compiled, but ``accept`` refused it)."""

    config: Config
    state: str
    compile: CompileResult | None = None
    like: Config | None = None
    out_of_vmem: bool = False
    # the pre-check's count and, for an out-of-VMEM rejection, what the compiler said it needed, and its limit
    counted: int | None = None
    needed: int | None = None
    limit: int | None = None


@dataclass
class Walk:
    steps: list[Step] = field(default_factory=list)
    picked: Config | None = None
    budget: int = 0
    stopped: str = ""

    def count(self, state: str) -> int:
        return sum(s.state == state for s in self.steps)

    @property
    def compiled(self) -> int:
        """Configurations put through the compiler (passed, rejected, refused or stopped by a limit)."""
        return sum(s.state != SKIPPED for s in self.steps)


def larger_values(big: Config, small: Config, ignore: frozenset[str] = frozenset()) -> bool:
    """Every tunable value of ``big`` at least ``small``'s (the same tunables), but those in ``ignore``."""
    return len(big) == len(small) and all(a[0] == b[0] and (a[0] in ignore or a[1] >= b[1]) for a, b in zip(big, small))


async def walk(ranked: Sequence[Config], compile: Compile, estimates: Mapping[Config, CostEstimate], *,
               budget: int, accept: Accept | None = None, out_of_vmem: Sequence[Config] = (),
               ignore: frozenset[str] = frozenset()) -> Walk:
    """Compile ``ranked`` best first until one passes (and ``accept`` takes it), at most ``budget`` compiles;
    ``out_of_vmem``: configurations already known to run out of VMEM (the current one, say); ``ignore``:
    tunables whose values never changed the traced program (they cannot change what VMEM it needs)."""
    result = Walk(budget=budget)
    oom = list(out_of_vmem)
    spent = 0
    for config in ranked:
        est = estimates.get(config)
        like = next((c for c in oom if est is not None and c in estimates and larger_values(config, c, ignore)
                     and feasibility.at_least_as_large(est, estimates[c])), None)
        if like is not None:
            result.steps.append(Step(config, SKIPPED, like=like))
            continue
        if spent >= budget:
            result.stopped = f"the compile budget ({budget}) was spent before a configuration passed"
            return result
        spent += 1
        compiled = await compile(config)
        counted = feasibility.counted_vmem(est) if est is not None else None
        if compiled.ok is True:
            taken = True if accept is None else await accept(config)
            if not taken:
                result.steps.append(Step(config, REFUSED, compiled, counted=counted))
                if taken is None:
                    result.stopped = "the checks after compiling were spent on configurations they refused"
                    return result
                continue
            result.steps.append(Step(config, PASSED, compiled, counted=counted))
            result.picked = config
            result.stopped = f"{_ordinal(len(result.steps))} of the ranking passed"
            return result
        if compiled.ok is None:
            result.steps.append(Step(config, UNCHECKED, compiled, counted=counted))
            continue
        vmem = feasibility.out_of_vmem(compiled.why, compiled.evidence)
        sizes = feasibility.compiler_vmem(compiled.evidence) if vmem else None
        result.steps.append(Step(config, REJECTED, compiled, out_of_vmem=vmem, counted=counted,
                                 needed=sizes[0] if sizes else None, limit=sizes[1] if sizes else None))
        if vmem:
            oom.append(config)
    result.stopped = f"the ranking ({len(ranked)}) ended before a configuration passed"
    return result


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
