"""Autotuning (client side): ``tune`` (tunables -> estimates -> feasibility -> search -> walk -> one verdict), its
space (``tune_space``), search (``tune_search``), walk down the ranking (``tune_walk``), worker requests
(``tune_workers``), what it stores (``tune_store``), and a run's autotune phase beside its judge (``judge_tune``).
"""
