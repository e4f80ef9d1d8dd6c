"""The array types that the encodings and the codecs share, below both: a table's element
types and its rows, consecutive blocks of rows joined, and the largest position a row may
have (numpy only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

DType = Literal["float32", "float64", "float16"]
DTYPES: Final[tuple[DType, ...]] = get_args(DType)
Rows = NDArray[np.floating]
# Positions are int32 position ids: the accuracy promise holds up to here, not past it.
POSITION_CEILING: Final = (1 << 31) - 1


def joined(parts: Sequence[Rows]) -> Rows:
    """Consecutive blocks of rows as one array (the block itself when there is one)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
