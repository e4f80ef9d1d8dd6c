"""The presets' own parameters, one declaration each: a library's name for it, its type,
default and range, what ``GET /v1/presets`` says of it and the text of its query field. The
catalogue's entries list them; the wire models are made from them (``schemas/presets.py``)."""

from __future__ import annotations

from typing import Final

from service.arrays import POSITION_CEILING
from service.encodings.presets import DEFAULT_BASE, MAX_FREQUENCY, Param

# |scale| of an mlx table at most this (and at most what its dtype holds)
SCALE_LIMIT: Final = 1e30

# The ranges keep their Python types: an int bound is an integer in the OpenAPI document.
BASE: Final = Param("base", float, DEFAULT_BASE, "Wavelength base.", None, gt=1.0)
MIN_TIMESCALE: Final = Param(
    "min_timescale",
    float,
    1.0,
    "Shortest timescale.",
    "default 1. It is the largest frequency (with min_timescale^2 / max_timescale): at most "
    "16 radians a position.",
    ge=1e-30,
    le=MAX_FREQUENCY,
)
MAX_TIMESCALE: Final = Param(
    "max_timescale", float, 1.0e4, "Longest timescale.", "default 10000.", ge=1e-30, le=1e30
)
START_INDEX: Final = Param(
    "start_index",
    int,
    0,
    "Position of the first row.",
    "position of row 0; default 0.",
    ge=0,
    le=POSITION_CEILING,
)
PADDING_IDX: Final = Param(
    "padding_idx",
    int,
    1,
    "Row that is all zeros; real tokens start at padding_idx + 1.",
    "the row that is all zeros; real tokens start at padding_idx + 1; default 1.",
    ge=0,
    le=POSITION_CEILING,
)
MAX_WAVELENGTH: Final = Param(
    "max_wavelength", float, 10000.0, "Longest wavelength.", "default 10000.", gt=1, le=1e30
)
MIN_FREQ: Final = Param(
    "min_freq",
    float,
    0.0001,
    "Lowest frequency.",
    "0.0001. At most 16.",
    ge=1e-30,
    le=MAX_FREQUENCY,
)
MAX_FREQ: Final = Param(
    "max_freq",
    float,
    1.0,
    "Highest frequency.",
    "1. At most 16, or 16 / (2 pi) with full_turns (the largest frequency is at most 16 "
    "radians a position).",
    ge=1e-30,
    le=MAX_FREQUENCY,
)
SCALE: Final = Param(
    "scale",
    float,
    None,
    "Factor on the table; default sqrt(2 / d_model).",
    None,  # the tables' scale; apply's is the factor on the embeddings
    ge=-SCALE_LIMIT,
    le=SCALE_LIMIT,
)
COS_FIRST: Final = Param(
    "cos_first", bool, False, "Cosines first.", "cosines first; default false."
)
FULL_TURNS: Final = Param(
    "full_turns",
    bool,
    False,
    "Frequencies in turns: times 2 pi.",
    "frequencies times 2 pi; false.",
)
