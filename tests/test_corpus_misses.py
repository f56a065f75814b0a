"""Issue 57's held-out misses, rebuilt from their descriptions (the held-out files stay unseen): a kernel
applied under jax.jit to an array sharded over an Auto mesh (no finding before), the same over an Explicit
mesh (at its line), and index maps naming a block past the end that the finding did not reach: one built
inside ``emit_pipeline`` and one of a scalar-prefetch grid spec (both said at the ``pallas_call`` before)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "misses"


def findings(name: str, tiers: str) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", str(DATA / name), "--tiers", tiers,
                           "--no-store", "--format", "json"], capture_output=True, text=True, timeout=280)
    (file,) = json.loads(proc.stdout)["files"]
    return file["findings"]


@pytest.mark.parametrize("name", ["auto_mesh_jit.py", "explicit_mesh_jit.py"])
def test_a_kernel_under_jit_on_an_array_sharded_over_a_mesh_is_said_at_the_call(name):
    (found,) = [f for f in findings(name, "0,1") if f["code"] == "PLS115"]
    assert found["line"] == 30 and found["severity"] == "error", found
    assert "wrap the call in a shard_map" in found["message"]


def test_the_same_kernel_inside_shard_map_is_fine():
    assert not [f for f in findings("auto_mesh_jit_fixed.py", "0,1") if f["code"] == "PLS115"]


@pytest.mark.parametrize("name, line, words", [
    ("pipeline_past_end.py", 17, "the pipeline's index map of input 0 returns block (4, 0)"),
    ("prefetch_past_end.py", 22, "the index_map of input x_ref returns block (4, 0)"),
])
def test_an_index_map_naming_a_block_past_the_end_is_said_at_the_map(name, line, words):
    (found,) = [f for f in findings(name, "0,1,3") if f["code"] == "PLS302"]
    assert found["line"] == line and words in found["message"], found
