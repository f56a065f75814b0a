"""The judging wing: how a candidate (model-written code, or the user's own file as the original) is
judged without believing anything its process says.

- ``channel``: frames between the judge and the candidate's process, which is a fresh interpreter
  (``spawn``) holding one socket and nothing of the judge's, and its end (``end``); ``nest``: that process in
  a PID namespace of its own, which ends with it;
- ``candidate``: that process's main: load the candidate, export its program at the signatures the
  judge names, answer nothing else that is read;
- ``trusted``: the trusted side (the user's own file, the task's reference file) in the judge;
- ``sizes``: the sizes the judge tests, prices and times at;
- ``throwaway``: the verifier process that deserializes, checks and compiles the candidate's bytes
  where a crash ends only itself; ``module_check``: what a module may contain;
- ``judge``: the ``time`` op's judge; ``exported_run``: its work on the modules; ``correct``: the one
  comparison with the reference;
- ``compile_check``: the ``check`` op for model-written code (tier 2 compiled by the judge from the
  lowered modules the candidate's process sends).

Worker side: what runs inside ``pallasite worker`` and may import jax.
"""

ACTIVE = False  # set in a sandboxed child of a confined worker (runner/worker.py): model-written code
CONFINED = False  # ... and that child is in the sandbox (not opted in without one): see channel.end
