"""Tasks: what a kernel file is checked, tested and timed on (worker side).

The task types (``task_types``), each format's reader (``tasks_runtime``: ``example_inputs()``, JAXBench,
``tasks_kernelbench``, ``maxkernel``), tasks inferred from the file or its callers (``tasks_inferred``,
``tasks_callers``) and the calls an import recorded (``tasks_recorded``).
"""
