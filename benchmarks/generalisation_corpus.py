"""The generalisation benchmark's kernel files: real kernels this checker was not developed on.

Read where they are (nothing of them is copied into this project): jax's own TPU kernels from the
installed jax (``jax:<path under jax/>``), JAXBench's hand-tuned kernels and MaxKernel from a
checkout of AI-Hypercomputer/accelerator-agents (``jaxbench:<task folder>/optimized.py``), tokamax
from a checkout of openxla/tokamax (``tokamax:<path>``). jax's and tokamax's kernel files have no
task: a short one written for this benchmark (``TASKS``) is appended, as a user would add one.
MaxKernel's task folders hold references and inputs but no Pallas kernel, so they add none.

Families group near-copies (JAXBench's flash attention and MLA are jax's flash attention; its GQA
and sparse attention are splash attention; its megablox is jax's gmm), so that no family sits in
both halves of the split (``benchmarks/mutations.py`` says how it is made).

A third set (the kernels marked ``third=True``, scored separately from both halves, out of sample: added in the third round
of issue 29 with this rule written down before any of its mutants was generated or checked): every
file under jax's ``experimental/pallas/ops/tpu`` that contains ``pallas_call`` and that neither half
nor the in-sample benchmark uses, except near-copies of a family already used (jax's
``splash_attention_kernel.py`` and ``ragged_paged_attention/kernel.py`` are the development half's
splash and ragged paged attention; ``paged_attention_kernel.py`` is the in-sample paged attention).
That leaves ``random/philox.py`` (its own family: another generator than threefry's) and
``all_gather.py`` (a ring all-gather over a mesh axis: on this one-device CPU machine its entry
returns its input without reaching a pallas_call, so it can have no mutant; it is listed anyway so
that the rule, not a result, decides). JAXBench has no ``optimized.py`` with a ``pallas_call`` that
the halves or the in-sample benchmark do not use.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Kernel:
    id: str
    family: str
    base: str  # "jax:...", "jaxbench:...", "tokamax:..."
    task: str = ""  # appended to the file (jax's and tokamax's files have no task)
    third: bool = False  # in the third set (out of sample, scored apart from both halves)
    fourth: bool = False  # in the set of 2026-12-04 (benchmarks/generalisation_rule_2026-12-04.md)

    @property
    def held_out(self) -> bool:
        return held_out(self.family)

    @property
    def set_name(self) -> str:
        """"fourth", "third", "held-out" or "dev"."""
        return "fourth" if self.fourth else "third" if self.third else "held-out" if self.held_out else "dev"


def held_out(family: str) -> bool:
    """The split rule, fixed before any result: held out when sha256(family)'s first byte is odd."""
    return hashlib.sha256(family.encode()).digest()[0] % 2 == 1


_HEADER = "\n\n# --- task appended by benchmarks/generalisation_corpus.py (not part of the kernel's file) ---\n"

FLASH_TASK = _HEADER + '''BENCH_BLOCKS = dict(block_q=256, block_k_major=256, block_k=128, block_b=1)
PALLASITE_ENTRY = "bench_attention"


def bench_attention(q, k, v):
    return flash_attention(q, k, v, causal=True, sm_scale=0.125, block_sizes=BlockSizes(**BENCH_BLOCKS))


def example_inputs():
    s = jax.ShapeDtypeStruct((1, 2, 1024, 128), jnp.float32)
    return (s, s, s)


def reference(q, k, v):
    return mha_reference(q, k, v, None, causal=True, sm_scale=0.125)
'''

EXAMPLE_TASK = _HEADER + '''import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "double"


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 256), jnp.float32),)


def reference(x):
    return x * 2
'''

GMM_TASK = _HEADER + '''GROUPS = (128, 256, 64, 64)
PALLASITE_ENTRY = "bench_gmm"


def bench_gmm(lhs, rhs, group_sizes):
    return gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32, tiling=(128, 128, 128))


def example_inputs():
    lhs = jax.random.normal(jax.random.key(0), (512, 256), jnp.float32)
    rhs = jax.random.normal(jax.random.key(1), (len(GROUPS), 256, 384), jnp.float32)
    return (lhs, rhs, jnp.array(GROUPS, jnp.int32))


def reference(lhs, rhs, group_sizes):
    return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=jnp.float32)
'''

THREEFRY_TASK = _HEADER + '''PALLASITE_ENTRY = "bench_bits"


def bench_bits(key):
    return plthreefry_random_bits(key, 32, (512, 1024))


def example_inputs():
    return (jnp.array([0, 42], jnp.uint32),)
'''

PHILOX_TASK = _HEADER + '''PALLASITE_ENTRY = "bench_philox_bits"


def bench_philox_bits(key):
    return philox_random_bits(key, 32, (512, 1024))


def example_inputs():
    return (jnp.array([0, 42], jnp.uint32),)
'''

ALL_GATHER_TASK = _HEADER + '''PALLASITE_ENTRY = "bench_all_gather"


def bench_all_gather(x):
    mesh = jax.sharding.Mesh(jax.devices(), ("x",))
    return all_gather(x, mesh=mesh, axis_name="x")


def example_inputs():
    return (jax.ShapeDtypeStruct((len(jax.devices()) * 8, 128), jnp.float32),)
'''

# The set of 2026-12-04: its rule (which files, which operators) is benchmarks/generalisation_rule_2026-12-04.md,
# committed (5f75939) before these tasks were written and before any mutant was generated. The files are read
# from a snapshot of vllm-project/tpu-inference (``mirror:<owner+name>@<commit>:<path>``); each task is the
# smallest call of the file's public entry its own asserts accept, written from its signature.
TPU_INFERENCE = "mirror:vllm-project+tpu-inference@b8692ff01fa191343836996c27a39dc95f008b88"

MHC_POST_TASK = _HEADER + '''PALLASITE_ENTRY = "bench_mhc_post"


def bench_mhc_post(x, residual, post_layer_mix, comb_res_mix):
    return mhc_post(x, residual, post_layer_mix, comb_res_mix)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 512), jnp.bfloat16), jax.ShapeDtypeStruct((256, 4, 512), jnp.bfloat16),
            jax.ShapeDtypeStruct((256, 4, 1), jnp.float32), jax.ShapeDtypeStruct((256, 4, 4), jnp.float32))
'''

TRIANGLE_TASK = _HEADER + '''PALLASITE_ENTRY = "bench_triangle_inverse"


def bench_triangle_inverse(a):
    return decompose_triangular_matrix_inverse_pallas(a, n_block_size=64, block_size=16)


def example_inputs():
    return (jax.ShapeDtypeStruct((1, 4, 32, 64, 64), jnp.float32),)
'''

ROPE_TASK = _HEADER + '''PALLASITE_ENTRY = "bench_rope"


def bench_rope(x, positions, cos_sin_cache):
    return rope(x, positions, cos_sin_cache)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 8, 512), jnp.bfloat16), jax.ShapeDtypeStruct((64,), jnp.int32),
            jax.ShapeDtypeStruct((4096, 64), jnp.float32))
'''

PROJ_SAVE_TASK = _HEADER + '''PALLASITE_ENTRY = "bench_proj_and_save_state"


def bench_proj_and_save_state(hidden_states, wkv_wgate, ape, positions, slot_mapping, cache):
    return proj_and_save_state(hidden_states, wkv_wgate, ape, positions, slot_mapping, cache, compress_ratio=4)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 1024), jnp.bfloat16), jax.ShapeDtypeStruct((1024, 256), jnp.bfloat16),
            jax.ShapeDtypeStruct((4, 128), jnp.float32), jax.ShapeDtypeStruct((16,), jnp.int32),
            jax.ShapeDtypeStruct((16,), jnp.int32), jax.ShapeDtypeStruct((8, 16, 4, 128), jnp.uint8))
'''

KERNELS: tuple[Kernel, ...] = (
    # held out or not is decided by the family's hash (held_out), not chosen here
    Kernel("jax-flash-attention", "flash_attention", "jax:experimental/pallas/ops/tpu/flash_attention.py", FLASH_TASK),
    Kernel("jaxbench-flash-attention", "flash_attention", "jaxbench:1p_Flash_Attention/optimized.py"),
    Kernel("jaxbench-mla-attention", "flash_attention", "jaxbench:3p_MLA_Attention/optimized.py"),
    Kernel("jax-example-kernel", "example_kernel", "jax:experimental/pallas/ops/tpu/example_kernel.py", EXAMPLE_TASK),
    Kernel("jaxbench-gqa-attention", "splash_attention", "jaxbench:2p_GQA_Attention/optimized.py"),
    Kernel("jaxbench-sparse-attention", "splash_attention", "jaxbench:4p_Sparse_Attention/optimized.py"),
    Kernel("jaxbench-ragged-paged-attention", "ragged_paged_attention", "jaxbench:7p_Ragged_Paged_Attention/optimized.py"),
    Kernel("jax-megablox-gmm", "megablox", "jax:experimental/pallas/ops/tpu/megablox/gmm.py", GMM_TASK),
    Kernel("jaxbench-megablox-gmm", "megablox", "jaxbench:11p_Megablox_GMM/optimized.py"),
    Kernel("jax-threefry", "random", "jax:experimental/pallas/ops/tpu/random/threefry.py", THREEFRY_TASK),
    # the third set (rule in the module doc)
    Kernel("jax-philox", "philox", "jax:experimental/pallas/ops/tpu/random/philox.py", PHILOX_TASK, third=True),
    Kernel("jax-all-gather", "all_gather", "jax:experimental/pallas/ops/tpu/all_gather.py", ALL_GATHER_TASK, third=True),
    # the set of 2026-12-04 (rule in benchmarks/generalisation_rule_2026-12-04.md); gdn_decode, spmm and
    # streamindex_topk are eligible but got no task this round (their inputs need packed metadata and
    # schedules the files build elsewhere), so they contribute no mutant
    Kernel("tpuinf-mhc-post", "mhc", f"{TPU_INFERENCE}:tpu_inference/kernels/experimental/deepseek_v4/mhc/post_kernel.py",
           MHC_POST_TASK, fourth=True),
    Kernel("tpuinf-triangle-solver", "triangle_solver", f"{TPU_INFERENCE}:tpu_inference/kernels/gdn/triangle_solver.py",
           TRIANGLE_TASK, fourth=True),
    Kernel("tpuinf-rope", "rope", f"{TPU_INFERENCE}:tpu_inference/kernels/experimental/deepseek_v4/rope.py",
           ROPE_TASK, fourth=True),
    Kernel("tpuinf-proj-save-state", "proj_and_save_state",
           f"{TPU_INFERENCE}:tpu_inference/kernels/experimental/deepseek_v4/compress_and_store/proj_and_save_state.py",
           PROJ_SAVE_TASK, fourth=True),
)


def base_text(kernel: Kernel, jaxbench: Path | None, tokamax: Path | None) -> str | None:
    """The kernel file with its task appended; None when its checkout was not given."""
    kind, _, rel = kernel.base.partition(":")
    if kind.startswith("mirror"):  # mirror:<owner+name>@<commit>:<path>, read from the snapshot's git directory
        import subprocess

        where, _, path_in_repo = rel.partition(":")
        repo, _, commit = where.partition("@")
        git_dir = Path("/work/.mirror") / repo / "repo"
        if not git_dir.exists():
            return None
        shown = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path_in_repo}"],
                               capture_output=True, text=True, check=True)
        return shown.stdout + kernel.task
    if kind == "jax":
        spec = importlib.util.find_spec("jax")
        path = Path(spec.origin).parent / rel
    elif kind == "jaxbench":
        if jaxbench is None:
            return None
        path = jaxbench / "benchmark" / rel
    elif kind == "tokamax":
        if tokamax is None:
            return None
        path = tokamax / rel
    else:
        raise ValueError(kernel.base)
    return path.read_text(encoding="utf-8") + kernel.task
