"""The autotune search: which configurations to spend device evaluations on, and in what order.

Plain functions over a narrow seam: ``evaluate(configs) -> [seconds or None]`` (None: the
configuration failed — compile error, wrong result, timeout), awaited one batch at a time so a
backend can run a batch in parallel. The cost model's estimate of every candidate seeds it.

- **Exhaustive** when the space is within the budget: every candidate, best estimate first (an
  interrupted run has then measured the most promising ones).
- **Cost-model-seeded** otherwise: the top of the estimate ranking first (and the current
  configuration, the "vs current" baseline), then rounds chosen by a surrogate refined with every
  timing: ``predicted(c) = estimate(c) * exp(r(c))`` where ``r`` is the distance-weighted mean of
  the measured log-residuals ``log(measured / estimate)`` (distance in steps of the candidate
  lists, so what the model gets wrong near a measured point carries to its neighbours). Each round
  takes the best predicted of the unmeasured. It stops at the budget, or once the best has its
  whole neighbourhood measured and two rounds passed without improving it. (Forcing the best's
  neighbours into every round was tried first: on the committed landscapes it found the optimum
  on 22 of 24, against 23 of 24 for the surrogate alone.)

``known`` holds results from earlier (interrupted) runs: they count as measured and are never
evaluated again; they count against the budget, so a resumed search spends only what the
interrupted one had left, and a finished one spends nothing. Nothing here imports JAX or knows about TPUs.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

Config = tuple[tuple[str, int], ...]  # sorted (name, value) pairs
Evaluate = Callable[[Sequence[Config]], Awaitable[Sequence[float | None]]]

SMALL_SPACE = 16  # spaces this small are always searched exhaustively
DEFAULT_BUDGET_FRACTION = 0.25


@dataclass
class SearchResult:
    order: list[Config] = field(default_factory=list)  # evaluated this run, in order
    results: dict[Config, float | None] = field(default_factory=dict)  # known + evaluated
    strategy: str = "exhaustive"
    budget: int = 0
    stopped: str = ""  # why the search ended

    @property
    def best(self) -> tuple[Config, float] | None:
        ok = [(t, c) for c, t in self.results.items() if t is not None]
        if not ok:
            return None
        t, c = min(ok)
        return c, t


def default_budget(n: int) -> int:
    return n if n <= SMALL_SPACE else max(SMALL_SPACE // 2, math.ceil(DEFAULT_BUDGET_FRACTION * n))


def _positions(candidates: Sequence[Config]) -> dict[str, dict[int, int]]:
    values: dict[str, set[int]] = {}
    for c in candidates:
        for name, v in c:
            values.setdefault(name, set()).add(v)
    return {name: {v: i for i, v in enumerate(sorted(vs))} for name, vs in values.items()}


def _distance(a: Config, b: Config, pos: dict[str, dict[int, int]]) -> int:
    return sum(abs(pos[n][va] - pos[n][vb]) for (n, va), (_, vb) in zip(a, b))


def neighbours(config: Config, candidates: Sequence[Config], pos: dict[str, dict[int, int]] | None = None) -> list[Config]:
    """Candidates one step away in one tunable's (sorted) candidate list."""
    pos = pos or _positions(candidates)
    return [c for c in candidates if _distance(config, c, pos) == 1]


def predicted(candidates: Sequence[Config], estimate: Mapping[Config, float], results: Mapping[Config, float | None],
              pos: dict[str, dict[int, int]]) -> dict[Config, float]:
    """The surrogate: each estimate corrected by nearby measured residuals (see module docstring)."""
    residuals = [(c, math.log(t / estimate[c])) for c, t in results.items()
                 if t is not None and c in estimate and estimate[c] > 0]
    out: dict[Config, float] = {}
    for c in candidates:
        if not residuals:
            out[c] = estimate[c]
            continue
        weights = [(1.0 / (1 + _distance(c, m, pos)) ** 2, r) for m, r in residuals]
        total = sum(w for w, _ in weights)
        out[c] = estimate[c] * math.exp(sum(w * r for w, r in weights) / total)
    return out


async def search(candidates: Sequence[Config], estimate: Mapping[Config, float], evaluate: Evaluate, *,
                 budget: int | None = None, known: Mapping[Config, float | None] | None = None,
                 batch: int = 4, current: Config | None = None,
                 on_result: Callable[[Config, float | None], None] | None = None) -> SearchResult:
    """Spend at most ``budget`` evaluations (default ``default_budget``) to find the fastest."""
    candidates = sorted(set(candidates), key=lambda c: (estimate[c], c))
    n = len(candidates)
    budget = default_budget(n) if budget is None else max(0, budget)
    result = SearchResult(results={c: t for c, t in (known or {}).items() if c in estimate}, budget=budget)
    todo = [c for c in candidates if c not in result.results]
    if n <= budget:
        result.strategy = "exhaustive"
        await _run(todo, evaluate, result, batch, on_result)
        result.stopped = "every candidate evaluated"
        return result
    result.strategy = "cost-model seeded"
    pos = _positions(candidates)
    n_known = len(result.results)  # earlier runs' results count against the budget: a resumed
    seed = max(0, max(batch, budget // 3) - n_known)  # search continues, a finished one stops
    first = ([current] if current in estimate and current not in result.results else []) + todo
    first = list(dict.fromkeys(first))[:seed]
    await _run(first, evaluate, result, batch, on_result)
    stale, best_before = 0, result.best
    while len(result.order) + n_known < budget:
        best = result.best
        guess = predicted(candidates, estimate, result.results, pos)
        unmeasured = [c for c in candidates if c not in result.results]
        if not unmeasured:
            result.stopped = "every candidate evaluated"
            return result
        near = sorted((c for c in neighbours(best[0], candidates, pos) if c not in result.results),
                      key=lambda c: guess[c]) if best else []
        if best and not near and stale >= 2:
            result.stopped = "the best configuration's neighbourhood is measured and two rounds found nothing better"
            return result
        take = min(batch, budget - n_known - len(result.order))
        pick = sorted(unmeasured, key=lambda c: guess[c])[:take]
        await _run(pick, evaluate, result, batch, on_result)
        after = result.best
        stale = stale + 1 if (after and best_before and after[1] >= best_before[1]) else 0
        best_before = after
    result.stopped = f"budget of {budget} evaluations spent"
    return result


async def _run(configs: Sequence[Config], evaluate: Evaluate, result: SearchResult, batch: int,
               on_result: Callable[[Config, float | None], None] | None) -> None:
    for start in range(0, len(configs), max(1, batch)):
        chunk = list(configs[start:start + batch])
        times = await evaluate(chunk)
        for c, t in zip(chunk, times):
            result.results[c] = t
            result.order.append(c)
            if on_result is not None:
                on_result(c, t)
