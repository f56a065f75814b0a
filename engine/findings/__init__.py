"""Where a finding lands (client side, no JAX): a worker's raw record read (``classify``, ``figures``) and put at
the right span of the user's file (``locate``, ``origin_findings``, ``odd_declaration``, ``store_dtype``,
``vmem_limit_origin``), folded with the tier-0 rule that agrees (``agreement``), failed replies said
(``reply_failures``), the locate step's verdict at its statement (``locate_step``), and what no check reached
(``reach``, ``never_ran``).
"""
