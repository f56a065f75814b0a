"""The program a TPU would run, read and priced: the one cost model (worker side).

Exporting an entry for the TPU (``program_export``), reading its StableHLO and Mosaic (``mlir_tree``,
``mosaic_ir``, ``module_read``, ``module_facts``, ``module_values``) and pricing it (``program_price`` ->
``module_cost``: ``kernel_cost``, ``mosaic_counts``, ``body_counts``, ``step_counts``, ``loop_bounds``,
``module_xla``, ``compiled_ops``; the roofline and its fitted factors in ``roofline``, re-exported by
``cost_model``; what each figure rests on in ``checked_classes`` and ``certain_work``).
"""
