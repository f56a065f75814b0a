"""What the interpreter of the TPU program reports instead of outputs (worker side, no jax).

- ``Unsupported(op_name, where)``: the program uses an op or attribute the interpreter does not
  cover. The judge says "not verified: the TPU program uses <op> (<where>)", never a pass.
- ``KernelFault(message)``: the kernel did something a TPU would fault or hang on (an out-of-bounds
  DMA or index, a wait no DMA or signal can satisfy, a read of a DMA's target before its wait, a
  runaway loop past the step budget); the message names the kernel and the op's source line.

``where(op, kernel)`` is an op's place for both: its MLIR location's ``file:line`` (the candidate's
source line when jax recorded one), else the kernel's name.
"""

from __future__ import annotations

from typing import Any

from ..program.mlir_tree import Op, source_line


class Unsupported(Exception):
    """An op (or attribute) the interpreter does not run: the program is not verified."""

    def __init__(self, op_name: str, where: str, detail: str = "") -> None:
        self.op_name = op_name
        self.where = where
        self.detail = detail
        text = f"the TPU program uses {op_name} ({where})"
        super().__init__(f"{text}: {detail}" if detail else text)


class KernelFault(Exception):
    """The kernel did what a TPU would fault or hang on."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def where(op: Op | None, kernel: str) -> str:
    """``op``'s source line (``file:line``) with the kernel's name, or the kernel's name alone."""
    line = source_line(op) if op is not None else ""
    return f"{line}, kernel '{kernel}'" if line else f"kernel '{kernel}'"


def fault(op: Op | None, kernel: str, what: str) -> KernelFault:
    """A KernelFault for ``what`` the op at ``op`` did."""
    name = f"{op.name} at " if op is not None else ""
    return KernelFault(f"{what} ({name}{where(op, kernel)})")


def unsupported(op: Op, kernel: str, detail: str = "", name: str | None = None) -> Unsupported:
    return Unsupported(name or op.name, where(op, kernel), detail)


def describe(value: Any) -> str:
    """A short text of a value for messages (a shape and dtype for arrays)."""
    shape = getattr(value, "shape", None)
    if shape is not None and len(shape):
        return f"{getattr(value, 'dtype', '')}{list(shape)}"
    return str(value)
