"""``pallasite check DIR --jobs N``'s pool (engine/pool.py, ``grow_checks_when_worth``): a check worker
beyond the first starts only when the files waiting are worth its start-up. Small files after a
long cold start keep one worker (two ran 0.83x as fast as one on 24 small kernel files); files
that each take as long as a start-up get the second worker. Workers here are in-process stand-ins
whose first request is their cold start."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pallasite.engine.backend import Reply
from pallasite.engine.pool import PoolBackend


@dataclass
class TimedWorker:
    cold_s: float
    warm_s: float
    served: list[int] = field(default_factory=list)
    handshake: object = None

    async def start(self):
        return None

    async def request(self, params, *, purpose="check", timeout_s=None, on_progress=None) -> Reply:
        await asyncio.sleep(self.warm_s if self.served else self.cold_s)
        self.served.append(params)
        return Reply("ok", result=params)

    async def close(self) -> None:
        pass


def _run(cold_s: float, warm_s: float, files: int, *, grow: bool) -> list[TimedWorker]:
    made: list[TimedWorker] = []

    def make(purpose: str) -> TimedWorker:
        made.append(TimedWorker(cold_s, warm_s))
        return made[-1]

    async def go() -> list[Reply]:
        pool = PoolBackend(make, {"check": 2, "job": 0, "device": 0}, kind="fake", grow_checks_when_worth=grow)
        try:
            return await asyncio.gather(*(pool.request(n) for n in range(files)))
        finally:
            await pool.close()

    replies = asyncio.run(go())
    assert sorted(r.result for r in replies) == list(range(files))  # every file answered once
    assert sorted(n for w in made for n in w.served) == list(range(files))
    return made


def test_small_files_after_a_long_cold_start_keep_one_worker():
    made = _run(cold_s=0.3, warm_s=0.005, files=24, grow=True)
    assert len(made) == 1


def test_files_worth_a_start_up_get_the_second_worker():
    made = _run(cold_s=0.05, warm_s=0.05, files=24, grow=True)
    assert len(made) == 2 and all(len(w.served) >= 3 for w in made), [len(w.served) for w in made]


def test_other_pools_start_every_worker_at_once():
    made = _run(cold_s=0.3, warm_s=0.005, files=24, grow=False)
    assert len(made) == 2 and all(w.served for w in made)
