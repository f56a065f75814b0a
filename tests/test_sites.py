"""KernelSite extraction from source: kernels, grids, BlockSpecs, scratch, grid specs, compiler
params, spans and backends, plus static task discovery (docs/task-convention.md)."""

from __future__ import annotations

from pallasite.analysis.source import Source
from pallasite.analysis.sites import find_sites
from pallasite.analysis.tasks import example_shapes, find_tasks

PREFETCH = '''
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM, BN = 128, 256
BK = 2 * BM


def kernel(idx_ref, x_ref, w_ref, o_ref, acc_ref, sem, *, scale):
    o_ref[...] = x_ref[...] * scale


def run(idx, x, w, *, tile: int = 512):
    x_spec = pl.BlockSpec(block_shape=(BM, BK), index_map=lambda i, j, idx_ref: (idx_ref[i], j))
    gs = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(8, x.shape[1] // BK),
        in_specs=[x_spec, pl.BlockSpec((BK, tile), lambda i, j, idx_ref: (j, 0), memory_space=pltpu.VMEM)],
        out_specs=pl.BlockSpec((None, BM, BN), lambda i, j, idx_ref: (0, i, 0)),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
    )
    return pl.pallas_call(
        functools.partial(kernel, scale=2.0),
        grid_spec=gs,
        out_shape=jax.ShapeDtypeStruct((1, 1024, BN), jnp.bfloat16),
        compiler_params=dict(mosaic=dict(dimension_semantics=("parallel", "arbitrary"))),
    )(idx, x, w)
'''


def _site(text):
    (site,) = find_sites(Source(text))
    return site


def test_prefetch_grid_spec_site():
    site = _site(PREFETCH)
    assert site.kernel_name == "kernel"
    assert site.kernel_params == ("idx_ref", "x_ref", "w_ref", "o_ref", "acc_ref", "sem")
    assert site.grid == (8, "x.shape[1] // BK")
    assert site.num_scalar_prefetch == 1
    assert site.enclosing_function == "run"
    assert site.backend == "tpu"
    assert site.dimension_semantics == ("parallel", "arbitrary")
    assert site.out_shape_count == 1 and site.out_shapes == ((1, 1024, 256),) and site.out_dtypes == ("bfloat16",)
    assert site.operands == ("idx", "x", "w")
    x_spec, w_spec = site.in_specs
    assert x_spec.block_shape == (128, 256) and x_spec.index_map_arity == 3 and x_spec.index_map_results == 2
    assert w_spec.block_shape == (256, 512) and w_spec.memory_space == "VMEM"
    (out,) = site.out_specs
    assert out.block_shape == (None, 128, 256) and out.role == "out"
    acc, sem = site.scratch_shapes
    assert (acc.kind, acc.shape, acc.dtype) == ("VMEM", (128, 256), "float32")
    assert sem.kind == "SemaphoreType.DMA"


def test_spans_point_at_the_source():
    text = PREFETCH
    lines = text.splitlines()
    site = _site(text)

    def at(span):
        assert span.line == span.end_line
        return lines[span.line][span.column:span.end_column]

    assert at(site.call_span) == "pl.pallas_call"
    assert at(site.kernel_name_span) == "functools.partial(kernel, scale=2.0)"
    assert at(site.dimension_semantics_span) == '("parallel", "arbitrary")'
    assert at(site.keyword_span("grid_spec")) == "grid_spec=gs"
    x_spec = site.in_specs[0]
    assert [at(s) for s in x_spec.dim_spans] == ["BM", "BK"]
    # the dims came from module constants: their definitions are recorded for error locators
    assert [at(s) for s in x_spec.dim_origins] == ["128", "2 * BM"]
    w_spec = site.in_specs[1]
    assert at(w_spec.dim_origins[1]) == "512"  # the tunable default of `tile`
    assert at(x_spec.index_map_span).startswith("lambda i, j, idx_ref")
    assert lines[site.kernel_def_span.line].startswith("def kernel(")


def test_direct_grid_and_older_compiler_params():
    text = '''
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import pallas_call as pcall

def k(a_ref, b_ref, o_ref):
    pass

def f(a, b):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    specs = [spec, spec]
    return pcall(k, grid=4, in_specs=specs, out_specs=spec, out_shape=a,
                 compiler_params=pltpu.TPUCompilerParams(dimension_semantics=[pltpu.PARALLEL]))(a, b)
'''
    site = _site(text)
    assert site.grid == (4,)
    assert [s.block_shape for s in site.in_specs] == [(8, 128), (8, 128)]
    assert site.dimension_semantics == ("parallel",)
    assert site.backend == "tpu"
    assert site.num_scalar_prefetch == 0 and site.scratch_shapes == ()
    assert site.out_shape_count is None  # `a` may be any pytree: not certain


def test_unresolvable_values_are_recorded_not_guessed():
    text = '''
from jax.experimental import pallas as pl

def f(x, block, specs):
    n = 4
    n = 8
    return pl.pallas_call(kern, grid=(n, block), in_specs=specs,
                          out_specs=pl.BlockSpec((block, n), idx_map),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
'''
    site = _site(text)
    assert site.kernel_name == "kern" and site.kernel_params is None and site.kernel_def_span is None
    assert site.grid == ("n", "block")
    assert site.in_specs == (site.in_specs[0],) and site.in_specs[0].certain is False
    (out,) = site.out_specs
    assert out.block_shape == ("block", "n") and out.index_map_arity is None
    assert site.out_shapes == ("x.shape",) and site.out_dtypes == ("x.dtype",)
    assert site.backend == "unknown"


def test_gpu_backend_from_imports_and_params():
    text = '''
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

def f(x):
    return pl.pallas_call(k, out_shape=x, compiler_params=plgpu.CompilerParams(num_warps=4))(x)
'''
    assert _site(text).backend == "gpu"


def test_every_call_in_a_file_in_order():
    text = "from jax.experimental import pallas as pl\n" + "\n".join(
        f"def f{i}(x):\n    return pl.pallas_call(k{i}, out_shape=x)(x)\n" for i in range(3))
    assert [s.kernel_name for s in find_sites(Source(text))] == ["k0", "k1", "k2"]


# ---------------------------------------------------------------------------- tasks

SHORT_FORM = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]

def _launch(x, y, rows):
    spec = pl.BlockSpec((rows, 512), lambda i: (i, 0))
    return pl.pallas_call(add_kernel, grid=(x.shape[0] // rows,), in_specs=[spec, spec],
                          out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

def add(x, y, *, block_rows: int = 256, unroll: bool = False, name="add"):
    return _launch(x, y, block_rows)

def example_inputs():
    s = jax.ShapeDtypeStruct((4096, 512), jnp.float32)
    return (s, jax.ShapeDtypeStruct((4096, 512), jnp.bfloat16))

def reference(x, y):
    return x + y

TOLERANCE = {"atol": 1e-6, "rtol": 1e-5}
TUNABLES = {"block_rows": [128, 256, 512]}
'''


def test_short_form_task():
    source = Source(SHORT_FORM)
    (task,) = find_tasks(source, "add.py")
    assert (task.entry, task.inputs, task.reference, task.format) == ("add", "example_inputs", "reference", "native")
    assert (task.atol, task.rtol) == (1e-6, 1e-5)
    (tunable,) = task.tunables
    assert (tunable.name, tunable.default, tunable.candidates) == ("block_rows", 256, (128, 256, 512))
    line = SHORT_FORM.splitlines()[tunable.span.line]
    assert line[tunable.span.column:tunable.span.end_column] == "block_rows: int = 256"
    assert example_shapes(source, "example_inputs") == (((4096, 512), "float32"), ((4096, 512), "bfloat16"))


def test_entry_named_explicitly_and_ambiguity():
    two = SHORT_FORM.replace("def example_inputs", "def add2(x, y):\n    return _launch(x, y, 8)\n\ndef example_inputs")
    assert find_tasks(Source(two), "f.py") == ()  # two public entries: PALLASITE_ENTRY needed
    named = two + '\nPALLASITE_ENTRY = "add2"\n'
    (task,) = find_tasks(Source(named), "f.py")
    assert task.entry == "add2" and task.tunables == ()


def test_long_form_tasks():
    text = SHORT_FORM.replace("def example_inputs", "def add_inputs").replace("def reference", "def add_reference")
    text += '''
def twice(x, *, bm: int = 64):
    return _launch(x, x, bm)

def twice_inputs():
    return jax.ShapeDtypeStruct((64, 512), jnp.float32)

twice_tunables = {"bm": [64, 128]}
'''
    tasks = {t.entry: t for t in find_tasks(Source(text), "f.py")}
    assert set(tasks) == {"add", "twice"}
    assert tasks["add"].reference == "add_reference" and tasks["twice"].reference is None
    assert tasks["twice"].tunables[0].candidates == (64, 128)
    assert example_shapes(Source(text), "twice_inputs") == (((64, 512), "float32"),)


def test_no_task_without_inputs():
    assert find_tasks(Source(SHORT_FORM.replace("def example_inputs", "def make_inputs")), "f.py") == ()


def test_jaxbench_task_file(tmp_path):
    text = SHORT_FORM.replace("def add(", "def workload(").replace("def example_inputs", "def create_inputs")
    text = "CONFIG = {'rows': 4096}\n" + text
    (tmp_path / "baseline.py").write_text("def workload(x, y):\n    return x + y\n")
    (task,) = find_tasks(Source(text), str(tmp_path / "task.py"))
    assert (task.format, task.entry, task.inputs) == ("jaxbench", "workload", "create_inputs")
    assert task.reference_path == str(tmp_path / "baseline.py")
    assert [t.name for t in task.tunables] == ["block_rows"]


def test_pallas_call_as_a_partial_decorator():
    text = '''
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

@functools.partial(
    pl.pallas_call,
    out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
    grid=(2,),
    in_specs=[pl.BlockSpec((8, 128), lambda i, j: (0, 0))],
)
def add_one(x_ref, o_ref, extra_ref):
    o_ref[...] = x_ref[...] + 1
'''
    site = _site(text)
    lines = text.splitlines()
    assert site.kernel_name == "add_one" and site.kernel_params == ("x_ref", "o_ref", "extra_ref")
    assert lines[site.call_span.line].strip() == "pl.pallas_call,"
    assert site.grid == (2,) and site.operands is None
    from pallasite.analysis.tier0 import analyze

    codes = sorted(f.code for f in analyze(text).findings)
    assert codes == ["PLS002", "PLS005"]  # 2 index_map params for a 1-D grid; 3 kernel refs for 2 arrays
    fixed = text.replace("lambda i, j:", "lambda i:").replace(", extra_ref)", ")")
    assert analyze(fixed).findings == ()
