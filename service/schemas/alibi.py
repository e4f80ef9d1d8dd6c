"""ALiBi's parameters on the wire: the slopes and the bias tensor, and their JSON documents."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Final

from pydantic import BaseModel, ConfigDict, Field

from service import codecs
from service.codecs.types import Format, TableFormat
from service.encodings import alibi
from service.encodings.alibi import Bias, Form
from service.encodings.registry import DType, Rounding
from service.errors import InvalidParameter
from service.limits import Limits
from service.schemas.common import Window

MASKED: Final[dict[bool, str]] = {
    True: "key positions after the query's (j > i + key_len - max_len): null in JSON, "
    "-inf in npy and raw",
    False: "nothing",
}
_ROUNDING: Final = (
    "library (the default): BLOOM's float32 slopes and float32 products, as transformers' "
    "build_alibi_tensor computes them, then cast to dtype; exact: 2^(-8k/c) and every "
    "product rounded once to dtype."
)


class SlopesQuery(BaseModel):
    """Which slopes, and in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    num_heads: int = Field(
        ge=1,
        description="Attention heads; at most PE_MAX_WIDTH. Any count, not only powers of two.",
    )
    dtype: DType = Field("float32", description="Element type of the answer.")
    rounding: Rounding = Field("library", description=_ROUNDING)
    format: TableFormat | None = Field(
        None,
        description="json, npy, raw or safetensors (tensor data); when absent the Accept "
        "header decides.",
    )

    def key(self) -> alibi.SlopesKey:
        return alibi.SlopesKey(self.num_heads, self.rounding, self.dtype)

    def check(self, limits: Limits, fmt: Format) -> None:
        """The limits, before anything is computed."""
        limits.row_width(self.num_heads, "num_heads")
        if codecs.textual(fmt):
            limits.json_answer(self.num_heads)

    def describe(self) -> dict[str, Any]:
        """The JSON answer's fields before ``data``."""
        return {
            "num_heads": self.num_heads,
            "rounding": self.rounding,
            "dtype": self.dtype,
            "shape": [self.num_heads],
        }


class BiasQuery(Window):
    """Which bias block, and in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ROWS: ClassVar[str] = "query rows are 0 .. max_len-1"

    num_heads: int = Field(ge=1, description="Attention heads; at most PE_MAX_WIDTH.")
    max_len: int = Field(
        ge=1,
        description="Queries: rows 0 .. max_len-1. num_heads × rows returned × key_len is at "
        "most PE_MAX_ELEMENTS.",
    )
    key_len: int | None = Field(
        None,
        ge=1,
        description="Keys: columns 0 .. key_len-1; default max_len. Query row i is at key "
        "position i + key_len - max_len (the last max_len positions, as when decoding with a "
        "cache); at least max_len for the causal and bloom forms.",
    )
    form: Form = Field(
        "causal",
        description="causal (the default): -m (i - j), masked where j is after the query; "
        "bloom: m j, the causal rows shifted by m i as BLOOM and MPT add them (softmax is "
        "the same), masked alike; symmetric: -m |i - j|, nothing masked.",
    )
    start: int = Field(0, ge=0, description="First query row returned (inclusive).")
    stop: int | None = Field(
        None, ge=1, description="Query row after the last returned; default max_len."
    )
    dtype: DType = Field(
        "float32", description="Element type; float16 is refused if an entry would overflow."
    )
    rounding: Rounding = Field("library", description=_ROUNDING)
    format: TableFormat | None = Field(
        None,
        description="json, npy, raw or safetensors (tensor data); when absent the Accept "
        "header decides.",
    )

    def key(self) -> alibi.BiasKey:
        """The tensor, for :mod:`service.encodings.alibi`."""
        key_len = self.max_len if self.key_len is None else self.key_len
        return alibi.BiasKey(
            self.num_heads, self.max_len, key_len, self.form, self.rounding, self.dtype
        )

    def bias(self) -> Bias:
        """The block, for :mod:`service.encodings.alibi`."""
        key_len = self.max_len if self.key_len is None else self.key_len
        return Bias(
            self.num_heads,
            self.max_len,
            key_len,
            self.form,
            self.start,
            self.stop,
            self.rounding,
            self.dtype,
        )

    def check(self, limits: Limits, fmt: Format) -> None:
        """Everything a request must be within, before anything is computed: the keys
        against the queries, the limits (cheapest first, so that absurd integers cost
        nothing), and float16's range."""
        bias = self.bias()
        if bias.form in alibi.MASKED_FORMS and bias.key_len < bias.max_len:
            raise InvalidParameter(
                "key_len",
                f"must be at least max_len ({bias.max_len}) for the {bias.form} form: every "
                "query attends to its own key position",
            )
        heads, rows, keys = bias.shape
        limits.row_width(heads, "num_heads")
        last = "the last position (max_len - 1 or key_len - 1)"
        limits.last_position(max(bias.max_len, keys) - 1, last)
        limits.rows(heads * rows, keys, "num_heads × rows × key_len")
        if codecs.textual(fmt):
            limits.json_answer(heads * rows * keys)
        if bias.dtype == "float16" and math.isinf(alibi.largest_magnitude(bias)):
            largest = alibi.largest_magnitude(dataclasses.replace(bias, dtype="float32"))
            raise InvalidParameter(
                "dtype",
                f"float16 cannot hold this block: its largest |bias| is {largest:g}, past "
                "float16's largest value (65504); ask for float32",
            )

    def describe(self) -> dict[str, Any]:
        """The JSON answer's fields before ``data``, in the contract's order."""
        bias = self.bias()
        return {
            "num_heads": bias.num_heads,
            "max_len": bias.max_len,
            "key_len": bias.key_len,
            "form": bias.form,
            "rounding": bias.rounding,
            "dtype": bias.dtype,
            "start": bias.start,
            "stop": bias.row_stop,
            "shape": list(bias.shape),
            "masked": MASKED[bias.form in alibi.MASKED_FORMS],
        }


class SlopesDocument(BaseModel):
    """The slopes as JSON."""

    num_heads: int
    rounding: Rounding
    dtype: DType
    shape: list[int] = Field(description="[num_heads]")
    data: list[float] = Field(description="The slope of each head, head 0 first.")


class BiasDocument(BaseModel):
    """A bias block as JSON."""

    num_heads: int
    max_len: int
    key_len: int
    form: Form
    rounding: Rounding
    dtype: DType
    start: int
    stop: int
    shape: list[int] = Field(description="[num_heads, stop - start, key_len]")
    masked: str = Field(
        description="Which entries are masked and how they appear: JSON has no infinity, so "
        "a masked entry (-inf in npy and raw, as attention masks are) is null in data."
    )
    data: list[list[list[float | None]]] = Field(
        description="Per head, the query rows start .. stop-1, each over the key_len keys; "
        "null where masked."
    )
