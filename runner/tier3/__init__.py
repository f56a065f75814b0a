"""Tier 3: the kernel run in TPU interpret mode on the CPU against its reference (worker side).

The run and its guards (``interpret``, ``interpret_run``, ``interpret_guard``, ``interpret_config``), the
reduced inputs (``interpret_shrink``, ``interpret_distinct``), the comparison and its verdicts
(``interpret_compare``, ``interpret_verdicts``, ``nan_prefill``), where a wrong result is said
(``interpret_places``, ``interpret_diagnose``, ``missing_places``, ``traced_lines``) and the locate step that
finds the statement making it wrong (``locate_step``, ``locate_edits``). Correctness only: never TPU time.
"""
