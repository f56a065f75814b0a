"""A candidate's exported program as the judge runs it: the deserialized module, what the verifier read
from it, and the signature it was exported at. Worker side: imports jax when called."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class Program:
    exported: Any
    facts: dict[str, Any]
    signature: list[list[Any]]

    def __call__(self, *args: Any) -> Any:
        import jax

        return self.exported.call(*jax.tree.leaves(args))
