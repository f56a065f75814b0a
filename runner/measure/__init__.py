"""Measuring: the time, profile and reduced sizes of a kernel and its reference (worker side).

The ``time`` op's request and loading (``timing``), its inputs (``timing_inputs``), the reduced-size ladder
(``timing_ladder``, ``timing_shrink``), the plausibility guards (``timing_guards``) and profiles
(``timing_profile``, ``profiling``). The judge (runner/judging/) calls these; figures say their provenance.
"""
