"""Seeded synthetic tuning landscapes for judging autotune search strategies without a device.

Committed before the search was written or tuned (issue 17): the search must not be fitted to
these landscapes after the fact. Each landscape is a block-size search space for one kernel shape
with two functions over it:

- ``true_time(config)``: what a device would measure (seconds), or ``None`` for a configuration
  that fails (a compile error or a wrong result the feasibility check cannot foresee). It is a
  roofline over HBM bytes and MXU-weighted FLOPs plus per-grid-step overhead, multiplied by
  *hidden* effects the cost model does not know: a per-dimension preference of the hardware
  (e.g. a DMA engine that likes long rows), occasional cliffs (a configuration 1.5-3x slower
  than its neighbours, as bank conflicts or spills do), and per-configuration roughness.
- ``estimate(config)``: what a static cost model would say: the same roofline with *nominal*
  constants (its own overhead per step, bandwidth and MXU-fill guesses), without the hidden
  effects. So estimate and truth are correlated, imperfectly, as a real cost model's would be.
- ``measure(config, repeat)``: ``true_time`` with a little deterministic timing noise (~1-2%).

Three families: a tiled matmul (bm, bn, bk), a flash-attention-style kernel (block_q, block_k,
optionally block_d) and a row-wise kernel (block_rows, block_cols). Infeasible configurations
(VMEM over the limit, non-dividing blocks) are never in ``space``: pallasite rejects those before
any compile, so they cost no device evaluation either way.

Everything is a pure function of the seed: ``landscape(seed)`` returns the same landscape on any
machine and Python version (``random.Random`` with an integer seed, hashes by ``hashlib``).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from dataclasses import dataclass, field

Config = tuple[tuple[str, int], ...]  # sorted (name, value) pairs


def _unit(*parts: object) -> float:
    """A deterministic uniform number in [0, 1) from its parts."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def _normal(*parts: object) -> float:
    """A deterministic standard normal number (Box-Muller) from its parts."""
    u1 = max(_unit(*parts, "a"), 1e-12)
    u2 = _unit(*parts, "b")
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2 * math.pi * u2)


@dataclass(frozen=True)
class Model:
    """The constants of one roofline (the truth's or the estimate's)."""

    flops_per_s: float
    bytes_per_s: float
    step_overhead_s: float
    mxu: int


@dataclass
class Landscape:
    seed: int
    family: str
    problem: dict[str, int]
    space: dict[str, tuple[int, ...]]  # tunable -> candidates (feasible combinations only, see configs)
    configs: list[Config]
    truth: Model
    nominal: Model
    hidden: dict[str, object] = field(default_factory=dict)
    _true: dict[Config, float | None] = field(default_factory=dict, repr=False)
    _est: dict[Config, float] = field(default_factory=dict, repr=False)

    def true_time(self, config: Config) -> float | None:
        return self._true[config]

    def estimate(self, config: Config) -> float:
        return self._est[config]

    def measure(self, config: Config, repeat: int = 0) -> float | None:
        t = self._true[config]
        if t is None:
            return None
        return t * math.exp(0.015 * _normal(self.seed, config, repeat, "measure"))

    def optimum(self) -> tuple[Config, float]:
        ok = [(t, c) for c, t in self._true.items() if t is not None]
        t, c = min(ok)
        return c, t


def _pow2(lo: int, hi: int) -> list[int]:
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    return out


def _fill(block: int, mxu: int) -> float:
    """How much of an MXU pass a block dim fills (1.0 for multiples of the MXU size)."""
    passes = math.ceil(block / mxu)
    return block / (passes * mxu)


def _matmul_cost(model: Model, p: dict[str, int], c: dict[str, int]) -> tuple[float, int, float]:
    m, n, k = p["m"], p["n"], p["k"]
    bm, bn, bk = c["bm"], c["bn"], c["bk"]
    steps = (m // bm) * (n // bn) * (k // bk)
    # grid (i, j, kk) with kk innermost: A re-fetched for every j, B for every i, out written once
    hbm = 2 * (m * k * (n // bn) + k * n * (m // bm)) + 4 * m * n
    eff = _fill(bm, model.mxu) * _fill(bn, model.mxu) * min(1.0, bk / model.mxu)
    compute = 2 * m * n * k / (model.flops_per_s * eff)
    return max(compute, hbm / model.bytes_per_s), steps, compute


def _attention_cost(model: Model, p: dict[str, int], c: dict[str, int]) -> tuple[float, int, float]:
    b, s, d = p["b"], p["s"], p["d"]
    bq, bk = c["block_q"], c["block_k"]
    bd = c.get("block_d", d)
    steps = b * (s // bq) * (s // bk) * (d // bd)
    hbm = 2 * (b * s * d) + 2 * 2 * b * s * d * (s // bq) + 2 * b * s * d
    eff = _fill(bq, model.mxu) * _fill(bk, model.mxu) * min(1.0, bd / model.mxu)
    compute = 4 * b * s * s * d / (model.flops_per_s * eff) + 3 * b * s * s / (model.flops_per_s / 8)
    return max(compute, hbm / model.bytes_per_s), steps, compute


def _rowwise_cost(model: Model, p: dict[str, int], c: dict[str, int]) -> tuple[float, int, float]:
    r, w = p["rows"], p["cols"]
    br, bc = c["block_rows"], c["block_cols"]
    steps = (r // br) * (w // bc)
    hbm = 2 * 4 * r * w
    compute = 5 * r * w / (model.flops_per_s / 16)
    lane_eff = min(1.0, bc / 512) ** 0.5
    return max(compute, hbm / (model.bytes_per_s * lane_eff)), steps, compute


def _vmem_ok(family: str, c: dict[str, int], limit: int) -> bool:
    if family == "matmul":
        used = 2 * 2 * (c["bm"] * c["bk"] + c["bk"] * c["bn"]) + 2 * 4 * c["bm"] * c["bn"] + 4 * c["bm"] * c["bn"]
    elif family == "attention":
        bd = c.get("block_d", 128)
        used = 2 * 2 * (c["block_q"] * bd + 2 * c["block_k"] * bd) + 2 * 4 * c["block_q"] * bd + 4 * c["block_q"] * c["block_k"]
    else:
        used = 2 * 2 * 4 * c["block_rows"] * c["block_cols"]
    return used <= limit


def landscape(seed: int) -> Landscape:
    """The landscape for one seed (family, sizes, hidden effects all drawn from it)."""
    rng = random.Random(seed)
    family = ("matmul", "matmul", "attention", "rowwise")[seed % 4]
    mxu = rng.choice((128, 256))
    truth = Model(flops_per_s=rng.uniform(1.5e14, 9e14), bytes_per_s=rng.uniform(0.8e12, 3.5e12),
                  step_overhead_s=rng.uniform(0.25e-6, 0.6e-6), mxu=mxu)
    nominal = Model(flops_per_s=truth.flops_per_s * rng.uniform(0.8, 1.25),
                    bytes_per_s=truth.bytes_per_s * rng.uniform(0.8, 1.25),
                    step_overhead_s=0.35e-6, mxu=mxu)
    if family == "matmul":
        problem = {"m": rng.choice((1024, 2048, 4096, 8192)), "n": rng.choice((1024, 2048, 4096, 8192)),
                   "k": rng.choice((1024, 2048, 4096, 8192))}
        space = {"bm": tuple(_pow2(64, 1024)), "bn": tuple(_pow2(128, 2048)), "bk": tuple(_pow2(128, 2048))}
        cost = _matmul_cost
    elif family == "attention":
        problem = {"b": rng.choice((8, 16, 32)), "s": rng.choice((2048, 4096, 8192)), "d": rng.choice((128, 256))}
        space = {"block_q": tuple(_pow2(64, 2048)), "block_k": tuple(_pow2(64, 2048))}
        if problem["d"] == 256 and rng.random() < 0.5:
            space["block_d"] = (128, 256)
        cost = _attention_cost
    else:
        problem = {"rows": rng.choice((4096, 16384, 65536)), "cols": rng.choice((1024, 4096, 8192))}
        space = {"block_rows": tuple(_pow2(8, 2048)), "block_cols": tuple(_pow2(128, 8192))}
        cost = _rowwise_cost
    limit = rng.choice((16, 32, 64)) << 20
    dims = {"bm": "m", "bn": "n", "bk": "k", "block_q": "s", "block_k": "s", "block_d": "d",
            "block_rows": "rows", "block_cols": "cols"}
    names = sorted(space)
    configs: list[Config] = []
    for values in itertools.product(*(space[n] for n in names)):
        c = dict(zip(names, values))
        if any(problem[dims[n]] % v or v > problem[dims[n]] for n, v in c.items()):
            continue
        if not _vmem_ok(family, c, limit):
            continue
        configs.append(tuple(sorted(c.items())))
    # hidden effects: a preferred size per dim, cliffs, roughness
    prefer = {n: (rng.choice(space[n]), rng.uniform(0.0, 0.25)) for n in names}
    cliff_rate = rng.uniform(0.02, 0.08)
    rough = rng.uniform(0.03, 0.12)
    fail_rate = rng.uniform(0.0, 0.06)
    est_noise = rng.uniform(0.05, 0.25)
    land = Landscape(seed=seed, family=family, problem=problem, space={n: space[n] for n in names},
                     configs=configs, truth=truth, nominal=nominal,
                     hidden={"prefer": prefer, "cliff_rate": cliff_rate, "roughness": rough,
                             "fail_rate": fail_rate, "estimate_noise": est_noise, "vmem_limit": limit})
    for config in configs:
        c = dict(config)
        roof, steps, _ = cost(truth, problem, c)
        t = roof + steps * truth.step_overhead_s
        for n, (best, strength) in prefer.items():
            distance = abs(math.log2(c[n]) - math.log2(best))
            t *= 1.0 + strength * min(distance, 3) / 3
        if _unit(seed, config, "cliff") < cliff_rate:
            t *= 1.5 + 1.5 * _unit(seed, config, "cliff size")
        t *= math.exp(rough * _normal(seed, config, "rough"))
        land._true[config] = None if _unit(seed, config, "fail") < fail_rate else t
        roof_e, steps_e, _ = cost(nominal, problem, c)
        land._est[config] = (roof_e + steps_e * nominal.step_overhead_s) * math.exp(est_noise * _normal(seed, config, "est"))
    return land


def landscapes(count: int = 24, first_seed: int = 1000) -> list[Landscape]:
    """``count`` landscapes with at least 12 configurations each (smaller ones are searched
    exhaustively anyway and say nothing about a search strategy)."""
    out: list[Landscape] = []
    seed = first_seed
    while len(out) < count:
        land = landscape(seed)
        if len(land.configs) >= 12 and any(land.true_time(c) is not None for c in land.configs):
            out.append(land)
        seed += 1
    return out


if __name__ == "__main__":
    for land in landscapes():
        best, t = land.optimum()
        print(f"seed {land.seed:5d} {land.family:9s} {len(land.configs):4d} configs  optimum {dict(best)} "
              f"{t * 1e6:9.1f} us")
