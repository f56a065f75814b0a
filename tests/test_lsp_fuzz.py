"""The bounded LSP fuzz (tests/lsp_fuzz.py) against `pallasite serve`: random edits including control
and non-BMP characters, requests at random and invalid positions, malformed messages; the server's
text compared with the client's after every step. ~1,000 steps in the default suite (once per
position encoding family); 10,000 as a benchmark (`pytest -m benchmark tests/test_lsp_fuzz.py -s`).
Every run prints its figures: deaths, unanswered requests, divergences, hangs over 5 s."""

from __future__ import annotations

import pytest

from lsp_fuzz import Fuzzer
from lsp_wire import WireClient


def run_fuzz(tmp_path, steps: int, seed: int, encoding: str):
    client = WireClient(tmp_path / "home", settings={"tiers": [0], "check": {"debounceMs": 0}})
    try:
        reply = client.initialize(tmp_path, encodings=[encoding])
        assert reply["result"]["capabilities"]["positionEncoding"] == encoding
        figures = Fuzzer(client, tmp_path, seed=seed, encoding=encoding).run(steps)
        alive = client.proc.poll() is None
    finally:
        client.close()
    print(f"\nLSP fuzz (seed {seed}, {encoding}): {figures.line()}")
    for note in figures.notes[:10]:
        print("  ", note)
    assert alive and figures.deaths == 0
    assert (figures.unanswered, figures.divergences, figures.hangs) == (0, 0, 0), figures.notes[:10]
    return figures


@pytest.mark.parametrize("encoding, seed", [("utf-16", 12), ("utf-8", 8)])
def test_lsp_fuzz_default(tmp_path, encoding, seed):
    run_fuzz(tmp_path, 1_000, seed, encoding)


@pytest.mark.benchmark
@pytest.mark.parametrize("encoding, seed", [("utf-16", 1012), ("utf-8", 1008), ("utf-32", 1032)])
def test_lsp_fuzz_benchmark(tmp_path, encoding, seed):
    run_fuzz(tmp_path, 10_000 if encoding == "utf-16" else 3_000, seed, encoding)
