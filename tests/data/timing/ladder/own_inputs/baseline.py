"""Reference grouped row scaling that takes one more argument than the kernel: the static group size
(megablox's baseline takes max_expert_size), so it cannot run on the kernel's inputs."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_groups", "num_groups": 8, "group_rows": 64, "width": 128, "atol": 1e-5, "rtol": 1e-5}


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(2))
    x = jax.random.normal(k1, (CONFIG["num_groups"] * CONFIG["group_rows"], CONFIG["width"]), dtype)
    scales = jax.random.normal(k2, (CONFIG["num_groups"], CONFIG["width"]), dtype)
    return x, scales, CONFIG["group_rows"]


def workload(x, scales, group_rows):
    return (x.reshape(-1, group_rows, x.shape[-1]) * scales[:, None, :]).reshape(x.shape)
