"""The space of tunable configurations, never built in memory, and its exploration by the cost model.

A ``Space`` is the product of every tunable's candidate values. JAXBench's attention kernels have
11-14 tunables and 10^7-10^10 configurations, so a configuration is made only when it is wanted:
by its index (mixed radix), at random, or as a one-step neighbour of another. Memory stays
proportional to what is estimated, never to the size of the space.

``explore(space, score, budget=...)`` picks which configurations to trace and estimate (one trace in
a worker each, 10-300 ms), at most ``budget`` of them:

- **exhaustive** when the whole space fits the budget: every configuration, the current one first;
- otherwise **seeded random + local moves**: the current configuration and a random sample drawn
  from ``seed`` (a quarter of the budget), then local moves: the best-estimated configuration not
  yet expanded (one per traced program: configurations that trace to the same program are one)
  gets each of its one-step neighbours estimated (one tunable moved one value along its sorted
  candidates). When the ``TOP`` best are all expanded (local optima), a fresh random sample
  restarts the climb; two restarts that find nothing better end the search. Last, the best is
  estimated with each value put back to the current one: a value the program never reads stays as
  it was in the file instead of a random draw. A tunable whose moves
  never changed the traced program (``INERT_AFTER`` moves, same program hash each time) is no
  longer moved: its value cannot change the estimate (say, the backward-pass block sizes of a
  forward-only workload).

``score(configs) -> [Scored]`` is the seam (engine/tuning/tune.py: the worker's estimate, the results
store, the feasibility rules). Nothing here imports JAX or knows about TPUs; the same seed and the
same scores give the same exploration, so a re-run finds every estimate in the store.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field

from ...analysis.types import Tunable

from .tune_search import Config

DEFAULT_ESTIMATES = 1024  # configurations traced and estimated at most, by default
TOP = 4  # local moves continue from the best this many distinct programs
INERT_AFTER = 3  # moves of a tunable that never changed the traced program before it stops moving
RESTARTS = 2  # random restarts in a row that find nothing better end the search
PASSES = 3  # passes putting the best's values back to the current ones


@dataclass(frozen=True)
class Scored:
    """One configuration's estimate: seconds (None: rejected before compiling, or failed to trace)
    and the hash of the program it traced to (None when it did not trace)."""

    seconds: float | None
    program: str | None = None


Score = Callable[[Sequence[Config]], Awaitable[Sequence[Scored]]]


@dataclass(frozen=True)
class Space:
    names: tuple[str, ...]  # sorted
    values: tuple[tuple[int, ...], ...]  # each name's candidates, sorted, distinct

    @classmethod
    def of(cls, tunables: Sequence[Tunable]) -> Space:
        by_name = {t.name: t for t in tunables}
        names = tuple(sorted(by_name))
        return cls(names, tuple(tuple(sorted(set(by_name[n].candidates or (by_name[n].default,)))) for n in names))

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.values)

    def __iter__(self) -> Iterator[Config]:
        for combo in itertools.product(*self.values):
            yield tuple(zip(self.names, combo))

    def __contains__(self, config: object) -> bool:
        return (isinstance(config, tuple) and tuple(n for n, _ in config) == self.names
                and all(v in values for (_, v), values in zip(config, self.values)))

    def config(self, index: int) -> Config:
        """The ``index``-th configuration in the order of ``iter`` (0 <= index < size)."""
        picked = []
        for values in reversed(self.values):
            index, digit = divmod(index, len(values))
            picked.append(values[digit])
        return tuple(zip(self.names, reversed(picked)))

    def sample(self, rng: random.Random, count: int, skip: Callable[[Config], bool]) -> list[Config]:
        """Up to ``count`` distinct random configurations for which ``skip`` is false."""
        out: dict[Config, None] = {}
        for _ in range(20 * count):
            if len(out) >= count:
                break
            config = self.config(rng.randrange(self.size))
            if not skip(config):
                out[config] = None
        return list(out)

    def neighbours(self, config: Config, frozen: frozenset[str] = frozenset()) -> list[Config]:
        """Configurations one step away along one tunable's sorted candidates (tunables in ``frozen``
        stay); a value outside the candidates steps to the nearest candidate on each side."""
        out = []
        for i, (name, value) in enumerate(config):
            if name in frozen or i >= len(self.values):
                continue
            values = self.values[i]
            for j in (bisect.bisect_left(values, value) - 1, bisect.bisect_right(values, value)):
                if 0 <= j < len(values) and values[j] != value:
                    out.append(config[:i] + ((name, values[j]),) + config[i + 1:])
        return out


@dataclass
class Exploration:
    size: int  # configurations in the space
    seen: dict[Config, Scored] = field(default_factory=dict)  # estimated, in order
    strategy: str = "exhaustive"
    stopped: str = ""
    seed: int = 0
    sampled: int = 0  # drawn at random (the current configuration included)
    moved: int = 0  # reached by local moves
    inert: tuple[str, ...] = ()  # tunables no longer moved: they never changed the traced program

    def summary(self) -> str:
        """How much of the space was seen, and how."""
        share = 100.0 * len(self.seen) / self.size if self.size else 100.0
        programs = len({s.program for s in self.seen.values() if s.program})
        text = (f"estimated {len(self.seen):,} of {self.size:,} configurations ({share:.3g}% of the space; "
                f"{programs:,} distinct traced programs)")
        if self.strategy != "exhaustive":
            text += f": {self.sampled:,} at random (seed {self.seed}), {self.moved:,} by local moves"
        return text


def _ranked(seen: dict[Config, Scored]) -> list[Config]:
    """Feasible configurations by estimate, one per traced program (the first seen)."""
    first: dict[str, Config] = {}
    for config, scored in seen.items():
        if scored.seconds is not None:
            first.setdefault(scored.program or repr(config), config)
    return sorted(first.values(), key=lambda c: (seen[c].seconds, c))


async def explore(space: Space, score: Score, *, budget: int = DEFAULT_ESTIMATES, seed: int = 0,
                  current: Config | None = None, batch: int = 32,
                  on_progress: Callable[[Exploration], None] | None = None) -> Exploration:
    """Estimate at most ``budget`` configurations of ``space`` (see the module docstring); a random
    restart draws ``batch`` configurations."""
    budget = max(1, budget)
    ex = Exploration(size=space.size, seed=seed)

    async def run(configs: Sequence[Config], limit: int = budget) -> list[Config]:
        """Estimate the unseen ones (one score() call: the seam splits it), up to ``limit`` in all."""
        todo = [c for c in dict.fromkeys(configs) if c not in ex.seen][: limit - len(ex.seen)]
        if todo:
            for config, scored in zip(todo, await score(todo)):
                ex.seen[config] = scored
            if on_progress is not None:
                on_progress(ex)
        return todo

    first = [current] if current is not None else []
    if space.size + (current is not None and current not in space) <= budget:
        await run(first + list(space))
        ex.stopped = "every configuration estimated"
        return ex
    ex.strategy = "seeded random + local moves"
    rng = random.Random(seed)
    spare = min(2 * PASSES * len(space.names), budget // 4) if current is not None else 0  # for _closer_to_current
    searching = max(1, budget - spare)
    ex.sampled += len(await run(first + space.sample(rng, max(1, searching // 4), ex.seen.__contains__), searching))
    expanded: set[Config] = set()
    moves = _Moves(space.names)
    fruitless = 0
    while len(ex.seen) < searching:
        ranked = _ranked(ex.seen)
        origin = next((c for c in ranked[:TOP] if c not in expanded), None)
        if origin is not None:
            expanded.add(origin)
            neighbours = space.neighbours(origin, frozenset(moves.inert))
            ex.moved += len(await run(neighbours, searching))
            moves.learn(origin, neighbours, ex.seen)
            continue
        if fruitless >= RESTARTS:  # local optima, and restarts found nothing better
            ex.stopped = (f"the best {min(TOP, len(ranked))} distinct programs are local optima and {RESTARTS} "
                          "random restarts found nothing better")
            break
        best = ex.seen[ranked[0]].seconds if ranked else None
        drawn = await run(space.sample(rng, batch, ex.seen.__contains__), searching)
        if not drawn:
            ex.stopped = "no configuration left to draw"
            break
        ex.sampled += len(drawn)
        after = _ranked(ex.seen)
        fruitless = 0 if after and (best is None or ex.seen[after[0]].seconds < best) else fruitless + 1
    else:
        ex.stopped = f"the budget of {budget:,} estimates is spent"
    ex.inert = tuple(sorted(moves.inert))
    if current is not None and (ranked := _ranked(ex.seen)):
        ex.moved += await _closer_to_current(ranked[0], current, ex, run)
    return ex


class _Moves:
    """Which tunables matter: a tunable whose moves kept the traced program (or its estimate: see
    ``_same_cost``) ``INERT_AFTER`` times, and never changed it, is inert (no longer moved)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.kept = {name: 0 for name in names}  # -1 once a move changed the program
        self.inert: set[str] = set()

    def learn(self, origin: Config, neighbours: Sequence[Config], seen: dict[Config, Scored]) -> None:
        for other in neighbours:
            if other not in seen:
                continue
            moved = next(n for (n, a), (_, b) in zip(origin, other) if a != b)
            if self.kept[moved] < 0 or seen[other].program is None:
                continue  # a value that does not trace (a minor block above its major) says nothing
            if _same_cost(seen[other], seen[origin]):
                self.kept[moved] += 1
                if self.kept[moved] >= INERT_AFTER:
                    self.inert.add(moved)
            else:
                self.kept[moved] = -1


def _same_cost(a: Scored, b: Scored) -> bool:
    return same_cost(a.program, a.seconds, b.program, b.seconds)


def same_cost(program: str | None, seconds: float | None, other: str | None, other_seconds: float | None) -> bool:
    """Two estimates of one traced program, or equal estimates of two: a forward entry's ``custom_vjp``
    carries the backward pass's block sizes in its parameters, so they change the program and
    nothing the forward costs (JAXBench 1p's best for v6e moved ``block_q_dkv`` and
    ``block_q_major_dkv`` 128 -> 256 for no gain). False where either did not trace."""
    if program is None or other is None:
        return False
    return program == other or (seconds is not None and seconds == other_seconds)


async def _closer_to_current(best: Config, current: Config, ex: Exploration,
                             run: Callable[[Sequence[Config]], Awaitable[list[Config]]]) -> int:
    """Put ``best``'s values back to the current ones where that keeps its traced program (a value
    the program never reads, drawn at random, is not worth an edit). Each pass: every value put
    back alone, then those that kept the program put back one after another (each prefix in one
    batch; a minor block size can go back only once its major one has); the longest prefix that
    still traces to the same program is the next start. engine/tuning/tune.py picks, per program, the
    configuration closest to the current one. A put-back that keeps the estimate from another
    program is kept too (``_same_cost``). Returns how many were estimated."""
    target = ex.seen[best]

    def same(config: Config) -> bool:
        return config in ex.seen and _same_cost(ex.seen[config], target)

    done = 0
    for _ in range(PASSES):
        if target.program is None:
            break
        index = {name: i for i, (name, _) in enumerate(best)}
        resets = [best[:index[n]] + ((n, v),) + best[index[n] + 1:] for (n, v), (_, b) in zip(current, best) if v != b]
        done += len(await run(resets))
        kept = [next(pair for pair, was in zip(c, best) if pair != was) for c in resets if same(c)]
        prefixes, config = [], best
        for name, value in kept:
            config = config[:index[name]] + ((name, value),) + config[index[name] + 1:]
            prefixes.append(config)
        done += len(await run(prefixes))
        held = [c for c in prefixes if same(c)]
        longest = next((p for p, q in zip(prefixes, [*prefixes[1:], None]) if p in held and q not in held), None)
        if longest is None or longest == best:
            break
        best = longest
    return done
