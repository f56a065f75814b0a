"""The command line's subcommands, one module each (``cmd_<name>.py``: argparse in, the typed request out,
the engine or an agent service does the work), and what only they share: the flag vocabulary (``flags``),
progress on stderr (``console``, ``check_progress``), writing a result into the user's file (``apply_file``) and
step mode's review files (``plan_files``). The table of subcommands is ``table``.
"""
