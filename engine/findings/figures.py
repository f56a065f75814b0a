"""The figures that make a compiler message actionable, read from the raw record (client side).

Mosaic's "unsupported shape cast" names no shapes in its first line; the MLIR operation it quotes
does (``(vector<8x128xf32>) -> vector<32x32xf32>``). ``shape_cast_sentence`` puts them in the
finding's message: "unsupported shape cast from f32[8,128] to f32[32,32]".
"""

from __future__ import annotations

import re
from typing import Any, Mapping

_CAST = re.compile(r"\(vector<(?P<src>[0-9x]+)x(?P<sdt>[a-z]+\d*)>\)\s*->\s*vector<(?P<dst>[0-9x]+)x(?P<ddt>[a-z]+\d*)>")


def _shape(dims: str, dtype: str) -> str:
    return f"{dtype}[{','.join(dims.split('x'))}]"


def shape_cast_sentence(sentence: str, rec: Mapping[str, Any]) -> str:
    """``sentence`` with the cast's source and result shapes, when the record quotes the operation."""
    text = "\n".join(str(rec.get(k) or "") for k in ("detail", "message"))
    m = _CAST.search(text)
    if m is None or "from " in sentence:
        return sentence
    return (f"{sentence.rstrip('.')} from {_shape(m['src'], m['sdt'])} to {_shape(m['dst'], m['ddt'])}: the "
            "TPU keeps the last two dims in (8, 128) tiles, and this reshape moves data across them")
