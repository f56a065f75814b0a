"""What each agent sends a model (``fix_prompt``, ``planner_prompt``, ``implementer_prompt``,
``test_writer_prompt``), and no machine paths in any of it (``prompt_paths``).
"""
