"""Pins the dtype-dependent tier-0 rule PLS010 (8-bit blocks need 32 rows) to the REAL TPU
compiler: libtpu's deviceless compile (v4, v5e, v5p, v6e), in a subprocess, for the fixture pair and
its variants.
Also pins the claim of examples/bad_reshape.py (only the compiler rejects it), and checks that
every broken fixture in tests/data/tier0/ really fails in the TPU pipeline and every fixed twin
really compiles.

Marked tpu_compiler: skipped when libtpu is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.analysis.source import apply_edits
from pallasite.analysis.tier0 import analyze

pytestmark = pytest.mark.tpu_compiler

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "tier0"

TOPOLOGIES = ("v4:2x2x1", "v5e:2x2", "v5p:2x2x1", "v6e:2x2")

PROBE = r'''
import importlib.util, json, sys
import jax
from jax.experimental import topologies

results = []
for topology, path, source in json.loads(sys.stdin.read()):
    dev = topologies.get_topology_desc(topology_name=topology, platform="tpu").devices[0]
    spec = importlib.util.spec_from_loader("probe_module", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    x64 = jax.config.jax_enable_x64
    try:
        exec(compile(source, path, "exec"), module.__dict__)
        entry = [v for k, v in vars(module).items() if callable(v) and getattr(v, "__module__", "") == "probe_module"
                 and not k.startswith("_") and not k.endswith("_kernel") and k not in ("example_inputs", "reference")][0]
        sharding = jax.sharding.SingleDeviceSharding(dev)
        args = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) for s in module.example_inputs()]
        with jax.default_device(dev):
            jax.jit(entry).trace(*args).lower().compile()
        results.append({"ok": True, "error": ""})
    except Exception as err:
        results.append({"ok": False, "error": f"{type(err).__name__}: {err}"[:2000]})
    finally:
        jax.config.update("jax_enable_x64", x64)
print("PROBE-RESULT " + json.dumps(results))
'''


def _has_libtpu() -> bool:
    return importlib.util.find_spec("libtpu") is not None


def _compile(cases: list[tuple[str, str, str]]) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TPU_", "JAX_"))}
    env.update(JAX_PLATFORMS="cpu", TPU_WORKER_HOSTNAMES="localhost", TPU_SKIP_MDS_QUERY="1",
               ALLOW_MULTIPLE_LIBTPU_LOAD="1")  # other processes may hold /tmp/libtpu_lockfile
    proc = subprocess.run([sys.executable, "-c", PROBE], input=json.dumps(cases), capture_output=True,
                          text=True, env=env, timeout=600)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("PROBE-RESULT ")]
    assert lines, f"probe failed (rc {proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("PROBE-RESULT "):])


def _pls010_variants() -> dict[str, str]:
    bad = (DATA / "pls010_int8_rows_bad.py").read_text()
    return {
        "int8 x 8 rows": bad,
        "int8 x 32 rows": (DATA / "pls010_int8_rows_ok.py").read_text(),
        "int8 x 16 rows": bad.replace("ROWS = 8\n", "ROWS = 16\n"),
        "bf16 x 8 rows": bad.replace("jnp.int8", "jnp.bfloat16"),
        "bad_reshape example": (ROOT / "examples" / "bad_reshape.py").read_text(),
    }


def _fixed_fixtures() -> dict[str, str]:
    """Each broken fixture with its rule's mechanical fix applied (PLS011 left out: with
    jax_enable_x64 on, the index_maps' Python ints are int64 too, which Mosaic rejects)."""
    fixed = {}
    for path in sorted(DATA.glob("pls*_bad.py")):
        text = path.read_text()
        findings = [f for f in analyze(text).findings if f.fix is not None and f.code != "PLS011"]
        if findings:
            fixed[path.name] = apply_edits(text, findings[0].fix.edits)
    return fixed


@pytest.fixture(scope="module")
def compiled():
    """All cases compiled in ONE probe process (jax + libtpu start once): key -> (result, text)."""
    if not _has_libtpu():
        pytest.skip("libtpu not installed (pip install 'pallasite[tpu]')")
    cases: dict[tuple[str, str], tuple[str, str]] = {}
    for topology in TOPOLOGIES:
        for name, text in _pls010_variants().items():
            cases[("pls010", topology, name)] = (topology, text)
    for path in sorted(DATA.glob("pls*.py")):
        cases[("fixture", "v6e:2x2", path.name)] = ("v6e:2x2", path.read_text())
    for path in sorted((ROOT / "examples").glob("*.py")):
        cases[("example", "v6e:2x2", path.name)] = ("v6e:2x2", path.read_text())
    for name, text in _fixed_fixtures().items():
        cases[("fixed", "v6e:2x2", name)] = ("v6e:2x2", text)
    keys = list(cases)
    results = _compile([(cases[k][0], f"{k[2]}", cases[k][1]) for k in keys])
    return {key: (result, cases[key][1]) for key, result in zip(keys, results)}


def _group(compiled, kind: str) -> dict[str, dict]:
    return {name: result for (k, _, name), (result, _) in compiled.items() if k == kind}


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_pls010_agrees_with_the_compiler(compiled, topology):
    for name in ("int8 x 8 rows", "int8 x 32 rows", "int8 x 16 rows", "bf16 x 8 rows"):
        result, text = compiled[("pls010", topology, name)]
        codes = [f.code for f in analyze(text, target=topology.split(":")[0]).findings]
        if result["ok"]:
            assert codes == [], (name, codes)
        else:
            assert "Misaligned" in result["error"] or "E2002" in result["error"], (name, result["error"][:400])
            assert codes == ["PLS010"], (name, codes)
    assert not compiled[("pls010", topology, "int8 x 8 rows")][0]["ok"]
    assert compiled[("pls010", topology, "int8 x 32 rows")][0]["ok"]
    assert compiled[("pls010", topology, "bf16 x 8 rows")][0]["ok"]


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_bad_reshape_example_is_only_caught_by_the_compiler(compiled, topology):
    result, text = compiled[("pls010", topology, "bad_reshape example")]
    assert not result["ok"] and "shape cast" in result["error"], result["error"][:400]
    assert analyze(text).findings == ()


def _information_only() -> set[str]:
    import json

    from pallasite.analysis.codes import CODES

    expected = json.loads((DATA / "expected.json").read_text())
    return {name for name, found in expected.items() if not name.startswith("_")
            and all(CODES[f["code"]].severity == "information" for f in found)}


_INFORMATION_ONLY = _information_only()
# a mistake the compiler accepts on every chip: PLS016's carried axis marked "parallel" compiles, and
# gives wrong results only when two TensorCores split the axis (v4/v5p) at run time; PLS017's
# unwritten output and PLS018's uninitialised accumulator compile and compute garbage; PLS020's grid
# one block past the output compiles (v6e and v5p, and so does an `i + 1` map): the block index is
# computed at run time on the scalar core and the DMA then touches rows the output does not own.
# Only a constant index past the end is seen by the compiler, and that aborts the whole compiling
# process (an LLO CHECK failure), so no fixture can show it here. PLS021/PLS022's floor-divided grids compile:
# the blocks they reach are all inside the arrays, the tail is simply never written or read
_COMPILES_BUT_WRONG = {"pls016_parallel_carry_bad.py", "pls017_output_unwritten_bad.py", "pls018_scratch_uninit_bad.py",
                       "pls020_block_past_end_bad.py", "pls021_tail_unwritten_bad.py", "pls022_tail_unread_bad.py"}


def test_fixture_pairs_are_real_kernels_for_the_compiler(compiled):
    """Every broken fixture fails in the real TPU pipeline (trace, lowering or compile) and every
    fixed twin compiles: the tier-0 rules describe real mistakes."""
    verdicts = _group(compiled, "fixture")
    assert len(verdicts) == 2 * len(list(DATA.glob("pls*_bad.py")))
    assert {n: r["error"][:300] for n, r in verdicts.items() if n.endswith("_ok.py") and not r["ok"]} == {}
    # an information finding (PLS014: kernels tier 0 cannot read) is not a mistake: its "bad" file compiles
    accepted = _INFORMATION_ONLY | _COMPILES_BUT_WRONG
    assert [n for n, r in verdicts.items() if n.endswith("_bad.py") and r["ok"] and n not in accepted] == []
    assert all(verdicts[n]["ok"] for n in _COMPILES_BUT_WRONG), {n: verdicts[n]["error"][:300] for n in _COMPILES_BUT_WRONG}


def test_examples_compile_or_fail_as_their_comments_say(compiled):
    verdicts = _group(compiled, "example")
    assert {n: r["ok"] for n, r in verdicts.items()} == {n: not n.startswith("bad_") for n in verdicts}, {
        n: r["error"][:200] for n, r in verdicts.items()}


def test_mechanical_fixes_make_the_broken_fixtures_compile(compiled):
    """Applying a rule's fix to its broken fixture gives a kernel the real compiler accepts."""
    verdicts = _group(compiled, "fixed")
    assert len(verdicts) >= 6
    assert {n: r["error"][:300] for n, r in verdicts.items() if not r["ok"]} == {}
