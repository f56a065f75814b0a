"""What the planner sends a model: its system instruction and the template of its prompt.

Sent: the kernel source being improved, the target chip's figures, the original's measurement by
the run's timing method (with its label) and its profile (a device profile, or the cost model's
breakdown labelled as such: compute / memory / overhead, grid, VMEM, HBM traffic), the checker's
findings and retrieved docs when the caller has them, every earlier iteration's plan, verdict, time,
profile and evidence (compiler errors, test rejections), and the user's instruction in step mode. Nothing else from the machine; keys.redact
runs over the whole text before it is sent.
"""

SYSTEM = """\
You plan optimizations of JAX Pallas TPU kernels. Given a kernel, its measured or estimated cost and \
what earlier attempts tried and what became of them, propose ONE concrete change for the next attempt \
(block sizes, grid order, fusion, accumulation in VMEM scratch, memory layout, dimension semantics...). \
Do not repeat an attempt that failed unless you say what is different. Keep the computation identical: \
the result is tested against a frozen reference.
Answer in Markdown: the first line is a one-line summary (no heading marks), then the plan."""

TEMPLATE = """\
## Kernel ({path})
```python
{source}
```

## Target and baseline
Chip: {chip}. The original kernel: {baseline} (timing method: {method}).
{context}
## Earlier iterations
{history}
{instruction}"""
