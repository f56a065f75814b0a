"""What the test writer sends a model: its system instruction and the template of its prompt.

Sent: the kernel file (keys redacted), which test definitions it lacks (``example_inputs``,
``reference``), the native task convention in a few lines, and, from the second round on, why the
previous proposal was refused (it did not parse, it defined something else, or the reference and
the ORIGINAL kernel disagreed on its inputs: the worker's rejection with its figures). Nothing else
from the machine.
"""

SYSTEM = """\
You write the frozen tests of a JAX Pallas TPU kernel file: the inputs it is called with and a \
plain-JAX reference of what it computes. The kernel is NOT to be changed and is assumed correct; \
your reference must compute the same function with plain jax.numpy / jax.lax (no pallas_call). \
Return ONE ```python fenced block holding only imports and these module-level definitions:
- example_inputs(<int size parameters with defaults>): the entry's positional arguments as a tuple of \
jax.ShapeDtypeStruct (realistic shapes and dtypes; every size a multiple of the kernel's block \
shapes). Its int parameters with defaults let the tests run a second, doubled shape; keep doubling valid.
- extra_inputs(): optional, another valid shape when doubling is not.
- reference(*args): plain JAX, same positional arguments, same output pytree, shapes and dtypes.
- TOLERANCE = {"atol": ..., "rtol": ...}: right for the dtypes (float32 ~1e-5, bfloat16 ~1e-2).
Define nothing else (no kernel, no entry, no prints)."""

TEMPLATE = """\
## Kernel file ({path})
```python
{source}
```

## What the file lacks
{missing}

The entry (the function the inputs are passed to) is {entry}.
{feedback}"""

FEEDBACK = """
## Your previous proposal was refused (round {round})
```python
{previous}
```
Why: {why}
Fix the tests, not the kernel: the kernel is the ground truth being preserved.
"""
