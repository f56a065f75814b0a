"""Tune spaces of any size: the space is never built (10^9 and 10^12 configurations in bounded
memory), it is explored by seeded random sampling and local moves within the estimate budget,
tunables that never change the traced program stop moving, and ``TUNED_PARAMS`` list entries are
tunables. The wide kernel (tests/data/tune/wide_space.py) is estimated by the real cost model in
this process; the landscapes with a known optimum are synthetic."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import tracemalloc

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

from pallasite.analysis.source import Source, apply_edits  # noqa: E402
from pallasite.analysis.tunables import apply_config, find_tunables  # noqa: E402
from pallasite.analysis.types import CostEstimate, Tunable  # noqa: E402
from pallasite.engine.tuning.tune import TuneOptions, tune  # noqa: E402
from pallasite.engine.tuning.tune_space import Scored, Space, explore  # noqa: E402
from pallasite.knowledge.store import ResultsStore  # noqa: E402

WIDE = os.path.join(os.path.dirname(__file__), "data", "tune", "wide_space.py")
VALUES = (8, 16, 24, 32, 64, 128, 256, 512, 1024, 2048)
USED = ("block_k", "block_shape[0]", "block_shape[1]")
OPTIMUM = {"block_shape[0]": 512, "block_shape[1]": 1024, "block_k": 256}


def _wide() -> tuple[str, tuple[Tunable, ...]]:
    with open(WIDE, encoding="utf-8") as f:
        text = f.read()
    return text, find_tunables(Source(text), WIDE)


def _landscape(config) -> Scored:
    """A known optimum (OPTIMUM) over the used tunables; the others never change the program."""
    d = dict(config)
    if d["block_shape[1]"] < 128:
        return Scored(None, None)  # rejected, like lanes below 128
    used = tuple(d[n] for n in USED)
    seconds = 1e-4 * (1 + sum(abs(math.log2(d[n] / v)) for n, v in OPTIMUM.items()))
    return Scored(seconds, repr(used))


def test_the_space_is_made_one_configuration_at_a_time():
    space = Space(("a", "b", "c"), ((1, 2), (10, 20, 30), (5, 6)))
    assert space.size == 12 and [space.config(i) for i in range(12)] == list(space)
    assert sorted(space.neighbours((("a", 1), ("b", 20), ("c", 5)))) == [
        (("a", 1), ("b", 10), ("c", 5)), (("a", 1), ("b", 20), ("c", 6)), (("a", 1), ("b", 30), ("c", 5)),
        (("a", 2), ("b", 20), ("c", 5))]
    # a current value outside the candidates steps to the nearest candidate on each side
    assert sorted(space.neighbours((("a", 1), ("b", 25), ("c", 5)), frozenset({"a", "c"}))) == [
        (("a", 1), ("b", 20), ("c", 5)), (("a", 1), ("b", 30), ("c", 5))]
    text, tunables = _wide()
    wide = Space.of(tunables)
    assert wide.size == 10 ** 9 and wide.config(wide.size - 1) == tuple((n, 2048) for n in wide.names)


def test_a_10_to_the_12_space_is_explored_in_bounded_memory_and_finds_the_optimum():
    names = sorted(USED + tuple(f"unused_{i}" for i in range(9)))
    space = Space(tuple(names), tuple(VALUES for _ in names))
    assert space.size == 10 ** 12
    current = tuple((n, 256 if n.startswith("block_shape") else 128) for n in names)
    scored = []

    async def score(configs):
        scored.extend(configs)
        return [_landscape(c) for c in configs]

    tracemalloc.start()
    try:
        ex = asyncio.run(explore(space, score, budget=300, seed=7, current=current))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20, f"{peak / 2**20:.1f} MiB traced"  # 10^12 configurations would be terabytes
    assert len(scored) == len(set(scored)) == len(ex.seen) <= 300  # nothing estimated twice, within budget
    best = min((c for c in ex.seen if ex.seen[c].seconds is not None), key=lambda c: ex.seen[c].seconds)
    assert {n: v for n, v in best if n in USED} == OPTIMUM
    assert set(ex.inert) == {n for n in names if n.startswith("unused_")}
    assert ex.strategy == "seeded random + local moves" and ex.sampled + ex.moved == len(ex.seen)
    assert "of 1,000,000,000,000 configurations" in ex.summary()
    # the same seed explores the same configurations; another seed draws others
    again = asyncio.run(explore(space, score, budget=300, seed=7, current=current))
    other = asyncio.run(explore(space, score, budget=300, seed=8, current=current))
    assert list(again.seen) == list(ex.seen) and list(other.seen) != list(ex.seen)


def test_a_space_within_the_budget_is_estimated_exhaustively():
    space = Space(("a", "b"), ((1, 2, 3), (4, 5)))

    async def score(configs):
        return [Scored(float(sum(v for _, v in c)), repr(c)) for c in configs]

    ex = asyncio.run(explore(space, score, budget=6, current=(("a", 1), ("b", 4))))
    assert ex.strategy == "exhaustive" and sorted(ex.seen) == sorted(space)


def _template_reply():
    """A real worker reply for the wide kernel (the chip row, the entry), estimates replaced."""
    from pallasite.engine.sources import sources_for
    from pallasite.wire.messages import EstimateParams
    from pallasite.runner.tune_ops import handle_estimate

    return handle_estimate(EstimateParams(source=sources_for(WIDE), chip="v5e", probe=False))


def test_tuning_a_10_to_the_9_space_keeps_memory_bounded_and_the_best_changes_only_what_matters(tmp_path):
    text, tunables = _wide()
    template = _template_reply()
    asked = []

    async def estimator(configs, kinds):
        asked.extend(configs)
        out = []
        for c in configs:
            key = tuple(sorted(c.items()))
            s = _landscape(key)
            out.append(CostEstimate(chip="v5e", config=key, status="ok" if s.seconds else "trace_error",
                                    seconds=s.seconds, bound="compute", program_hash=s.program,
                                    error=None if s.seconds else "lanes below 128"))
        return dataclasses.replace(template, estimates=tuple(out))

    tracemalloc.start()
    try:
        report = asyncio.run(tune(WIDE, text, TuneOptions(chip="v5e", estimates=400, seed=1), estimator))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak / 2**20:.1f} MiB traced"
    assert report.space_size == 10 ** 9 and len(report.outcomes) == len(asked) <= 400
    assert "of 1,000,000,000 configurations" in report.explored
    best = dict(report.best)
    assert {n: best[n] for n in USED} == OPTIMUM
    current = dict(report.current)
    assert {n for n in best if best[n] != current[n]} <= set(USED)  # backward sizes stay as written
    assert any("block_q_dkv" in n and "cannot change the estimate" in n for n in report.notes)
    # the edit writes the list entry's elements in place
    new = apply_edits(text, apply_config(tunables, best))
    assert '"block_shape": [512, 1024],' in new and '"block_k": 256,' in new


def test_the_wide_kernel_is_estimated_by_the_real_cost_model_and_reused_from_the_store(tmp_path):
    from pallasite.engine.sources import sources_for
    from pallasite.wire.messages import EstimateParams
    from pallasite.runner.tune_ops import handle_estimate
    from pallasite.server.commands.cmd_tune import format_report

    text, tunables = _wide()
    assert {t.name: (t.kind, t.default) for t in tunables if t.name.startswith("block_shape")} == {
        "block_shape[0]": ("tuned_params", 256), "block_shape[1]": ("tuned_params", 256)}
    calls = []

    async def estimator(configs, kinds):
        calls.append(len(configs))
        return handle_estimate(EstimateParams(source=sources_for(WIDE, text), chip="v5e", configs=tuple(configs),
                                              kinds=dict(kinds), probe=False))

    # the list elements reach the kernel: moving one changes the traced program and its estimate
    current = {t.name: t.default for t in tunables}
    kinds = {t.name: t.kind for t in tunables}
    one, other = asyncio.run(estimator([current, {**current, "block_shape[0]": 512}], kinds)).estimates
    assert one.program_hash != other.program_hash and one.seconds != other.seconds
    calls.clear()
    options = TuneOptions(chip="v5e", estimates=40, seed=3)
    with ResultsStore(tmp_path / "r.sqlite") as store:
        report = asyncio.run(tune(WIDE, text, options, estimator, store=store))
        assert sum(calls) == len(report.outcomes) <= 40
        by_config = {o.config: o for o in report.outcomes}
        ok = [o for o in report.outcomes if o.verdict.timing is not None and o.duplicate_of is None]
        changed = lambda o: sum(a != b for a, b in zip(o.config, report.current))  # noqa: E731
        assert report.best == min(ok, key=lambda o: (o.estimate_s, changed(o), o.config)).config  # ties: fewest edits
        assert by_config[report.current].verdict.timing is not None
        rejected = [o for o in report.outcomes if o.verdict.compile.ok is False]
        assert rejected and all(o.verdict.why() and o.verdict.timing is None for o in rejected)
        table = format_report(report, top=len(report.outcomes))
        rows = [line for line in table.splitlines() if " not compiled: " in line]
        assert rows and not any("x (est.)" in row or "x (device)" in row for row in rows)
        again = asyncio.run(tune(WIDE, text, options, estimator, store=store))
        assert sum(calls) == len(report.outcomes)  # the same seed asks for the same estimates: all stored
        assert again.best == report.best and any("reused from the results store" in n for n in again.notes)


def test_a_test_stopped_by_a_limit_is_no_verdict(tmp_path):
    """JAXBench's 2p_GQA/3p_MLA: the check of each best-ranked configuration hit the worker's memory limit, and
    each was marked failed, leaving "nothing to apply". A run stopped by a limit says nothing about the numbers:
    the best estimate stays the best, said not verified (the judge's test, Judge.test), and is not stored."""
    from pallasite.engine.workers.backend import Reply
    from pallasite.engine.checker import CheckOptions
    from pallasite.engine.judge import Judge, Trusted
    from test_tune import _estimator, _read

    class Backend:
        def __init__(self):
            self.sent = 0

        async def request(self, params, *, purpose, **kw):
            self.sent += 1
            return Reply("memory", message="the worker went past its memory limit of 4096 MiB and was stopped")

    class Engine:
        def backend(self, options, *, untrusted=False):
            return backend

    path, text = _read("matmul")
    make, _ = _estimator()
    backend = Backend()
    with ResultsStore(tmp_path / "r.sqlite") as store:
        for _ in range(2):
            judge = Judge(Engine(), CheckOptions(target="v5e"), Trusted.of_file(path, text), confined=False)
            report = asyncio.run(tune(path, text, TuneOptions(chip="v5e"), make(path, text), tester=judge.test,
                                      store=store))
            ranked = sorted((o for o in report.outcomes if o.verdict.timing is not None and o.duplicate_of is None),
                            key=lambda o: (o.estimate_s, o.config))
            assert report.best == ranked[0].config and report.best_provenance == "estimate (v5e)"
            test = report.outcome(report.best).verdict.test
            assert test.outcome == "not verified" and "went past its memory limit" in test.why
    assert backend.sent == 2  # one try per run (not three), and not remembered: the next run tries again


def test_values_that_change_the_program_but_not_the_estimate_are_put_back_to_the_files():
    """A forward entry's custom_vjp carries the backward pass's block sizes in its parameters: moving them
    changes the traced program and not the estimate. JAXBench 1p's best for v6e moved two of them (block_q_dkv,
    block_q_major_dkv 128 -> 256) for no gain; the exploration now puts them back."""
    backward = tuple(f"bwd_{i}" for i in range(4))
    names = sorted(USED + backward)
    space = Space(tuple(names), tuple(VALUES for _ in names))
    current = tuple((n, 256 if n.startswith("block_shape") else 128) for n in names)

    async def score(configs):
        out = []
        for c in configs:
            got = _landscape(c)
            out.append(Scored(got.seconds, None if got.program is None else repr(c)))  # every value in the program
        return out

    ex = asyncio.run(explore(space, score, budget=300, seed=7, current=current))
    best_s = min(s.seconds for s in ex.seen.values() if s.seconds is not None)
    tied = [c for c, s in ex.seen.items() if s.seconds == best_s]
    assert any(all(v == 128 for n, v in c if n in backward) for c in tied), \
        [{n: v for n, v in c if n in backward} for c in tied]


def test_a_value_that_does_not_trace_does_not_make_a_tunable_matter():
    """A backward-pass minor block above its major one does not trace (flash attention's block_q_dkv over
    block_q_major_dkv); such a move used to mark the tunable as changing the program, so it kept moving and
    JAXBench 1p's best for v6e changed it. A move that does not trace now says nothing."""
    from pallasite.engine.tuning.tune_space import INERT_AFTER, _Moves

    moves = _Moves(("major", "minor"))
    seen = {}
    for step in range(INERT_AFTER):
        origin = (("major", 128), ("minor", 16 << step))
        up, down = (("major", 128), ("minor", 256)), (("major", 128), ("minor", 8 << step))
        seen.update({origin: Scored(1.0, "forward"), up: Scored(None, None), down: Scored(1.0, "forward")})
        moves.learn(origin, [up, down], seen)
    assert moves.inert == {"minor"}
