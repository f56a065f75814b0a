"""The implementer: a new kernel file from a plan (the whole file, in one fenced block).

``request(source, plan, note)`` builds the model call; ``parse(text)`` takes the source out of the
reply (the last ```python block, or the whole reply when it is plainly code), None when there is
none; ``diff`` is what step mode shows before a candidate is applied.
"""

from __future__ import annotations

import re

from .llm import keys
from .edits import unified_diff
from .prompts.implementer_prompt import SYSTEM, TEMPLATE
from .llm.providers import ModelRequest

_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def request(source: str, plan: str, note: str = "", timeout_s: float = 120.0) -> ModelRequest:
    text = TEMPLATE.format(plan=plan, source=source,
                           note=f"\n## Revision note from the engineer\n{note}\n" if note else "")
    return ModelRequest(system=SYSTEM, prompt=keys.redact(text), timeout_s=timeout_s, max_output_tokens=16384)


def parse(text: str) -> str | None:
    blocks = _BLOCK.findall(text)
    if blocks:
        code = blocks[-1]
    elif re.search(r"^(import|from|def) ", text, re.M):
        code = text
    else:
        return None
    code = code.strip("\n") + "\n"
    return code if code.strip() else None


def diff(old: str, new: str, path: str) -> str:
    return unified_diff(old, new, path)
