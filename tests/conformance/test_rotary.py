"""Conformance: the rotary family (RoPE) against the code it follows, and against its formulas.

- ``rounding=library`` tables against Hugging Face transformers' rotary embeddings, built from
  config objects (no weights, no network) and run on position ids: ``LlamaRotaryEmbedding``
  for each ``rope_type`` (default, linear, dynamic, yarn, longrope, llama3, and transformers
  5's proportional, Gemma 4's, which keeps the whole head with zero frequencies), and
  ``GPTNeoXRotaryEmbedding`` where ``partial_rotary_factor`` < 1 (Llama's default rope
  ignores the factor, see :func:`test_llama_default_rope_ignores_partial_rotary_factor`;
  GPT-NeoX's, like every function of ``ROPE_INIT_FUNCTIONS``, rotates
  ``int(head_dim * factor)`` dimensions). The service's tables come from the family
  (``registry.rows`` and ``registry.take``) and from ``POST /v1/encodings/rotary/from-config``
  with the config the library was built from. Every entry within ``2^-22 (1 + |angle|)``
  (times the attention factor where it is above 1), ``angle = position * inv_freq``:
  torch's float32 ``pow``, ``cos`` and ``sin`` are not correctly rounded, and one float32 ulp
  of a frequency is one ulp of the angle.
- ``rounding=exact`` against each scaling's formula (transformers' ``modeling_rope_utils.py``)
  in mpmath at 50 digits, up to position 2^31 - 1: within half a float32 ulp, plus 2^-48 of
  the value (float64 arithmetic before the one rounding) and 2^-100 of the angle (frequencies
  known to ~2^-100).
- ``POST /v1/encodings/rotary/apply``: ``half`` against transformers' ``apply_rotary_pos_emb``
  (with ``rotate_half``; GPT-NeoX's, which passes the other dimensions through, for partial
  factors), ``interleaved`` against a re-typing of Meta's ``apply_rotary_emb``; float32,
  float16 and float64 batches, by offset and by position ids of shape ``(L,)`` and
  ``(batch, L)``.
- ``half`` and ``interleaved`` agree after the standard permutation of the head dimensions,
  in the service (bit for bit) and in the libraries.

The largest differences are printed at the end of the module (``-s``) and written to
``artifacts/conformance-rotary.md``. Needs torch and transformers (the ``conformance`` extra):
without them the module is skipped, unless ``CONFORMANCE_REQUIRED`` is set, when it fails.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import importlib.util
import io
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
import mpmath
import numpy as np
import pytest
from numpy.typing import NDArray

from service.encodings import kernels, registry, rotary
from service.encodings.rotary import RotaryKey
from service.schemas.rotary import RotaryTableQuery
from tests.conformance import reference
from tests.support import ROOT, npz_bytes

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

EXTRA: Final = ("torch", "transformers")
_missing = [name for name in EXTRA if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):  # .ci/run's step sets it: fail
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

F64Array = NDArray[np.float64]
I64Array = NDArray[np.int64]
PATH: Final = "/v1/encodings/rotary"
ARTIFACT: Final = ROOT / "artifacts" / "conformance-rotary.md"
LIBRARY_BOUND: Final = 2.0**-22
RELATIVE_SLACK: Final = 2.0**-48  # float64 cos, sin and attention factor before one rounding
FREQUENCY_ERROR: Final = 2.0**-100  # the service's double-double frequencies
DIGITS: Final = 50
LONG: Final = 2**20 + 2  # a table's length where it does not matter: positions past 2^20
CEILING: Final = 2**31  # max_len of the exact tables: positions up to PE_MAX_POSITION
SMALL: Final = 4096  # rows 0 .. 4095, from registry.rows
MIDDLE: Final = np.r_[8191:8194, 32767:32769, 100_000:100_064, 131_071:131_073]
TAIL: Final = 18  # the last rows of a table (with LONG: 2^20 - 16 .. 2^20 + 1)
EXACT_POSITIONS: Final = (0, 1, 2, 3, 17, 1000, 4095, 8192, 100_000, 131_072, 2**20)
FAR_EXACT: Final = (2**31 - 2, 2**31 - 1)  # where max_len does not change the table
MEASURED_POSITIONS: Final = (8192, 131_072, 1_048_576)


@functools.cache
def lib(name: str) -> Any:
    """The module ``name``, imported when a test first needs it (collecting imports none)."""
    return importlib.import_module(name)


def hf(model: str) -> Any:
    """transformers' ``modeling_<model>`` module."""
    return lib(f"transformers.models.{model}.modeling_{model}")


# ---------------------------------------------------------------------------------------------
# The cases: a model's rotary set-up as its config.json says it
# ---------------------------------------------------------------------------------------------

LENGTH_SCALINGS: Final = ("dynamic", "longrope")  # the table depends on max_len


@dataclass(frozen=True)
class Rope:
    """A model's rotary set-up: head, base, scaling (the service's name) with its parameters
    (rope_scaling's names and values), the config's ``max_position_embeddings``, the table's
    ``max_len`` (the sequence length dynamic and longrope see, unless ``seq_len`` is given),
    and whose config it is: ``llama`` (``rope_parameters``; ``legacy``: ``rope_theta`` and
    ``rope_scaling`` with ``type``, as older configs write them) or ``gpt_neox``
    (``rotary_pct``, ``rotary_emb_base``, ``rope_scaling``); ``original``: Phi-3's top-level
    ``original_max_position_embeddings``."""

    head_dim: int
    base: float
    scaling: str = "none"
    params: Mapping[str, Any] = field(default_factory=dict)
    mpe: int = 4096
    max_len: int = LONG
    partial: float = 1.0
    model: str = "llama"
    legacy: bool = False
    original: int | None = None
    seq_len: int | None = None

    @property
    def id(self) -> str:
        given = "".join(
            f"-{name}={value}" for name, value in self.params.items() if not isinstance(value, list)
        )
        return "".join(
            [
                f"{self.scaling}-d{self.head_dim}",
                f"-p{self.partial}" if self.partial != 1 else "",
                f"-b{self.base:g}{given}",
                f"-mpe{self.mpe}" if self.mpe != 4096 else "",
                f"-len{self.max_len}" if self.max_len != LONG else "",
                f"-seq_len{self.seq_len}" if self.seq_len else "",
                f"-{self.model}" if self.model != "llama" else "",
                "-legacy" if self.legacy else "",
                f"-original{self.original}" if self.original else "",
            ]
        )

    @property
    def rotary_dim(self) -> int:
        """The table's width in pairs x 2: the whole head for proportional (whose first
        ``int(partial * head_dim // 2)`` pairs turn), else ``int(head_dim * partial)``."""
        return (
            self.head_dim if self.scaling == "proportional" else int(self.head_dim * self.partial)
        )

    @property
    def length(self) -> int:
        """The sequence length the scaling sees."""
        return self.seq_len or self.max_len

    def config(self) -> dict[str, Any]:
        """The config.json: what transformers builds the module from, what is posted."""
        kind = "type" if self.legacy else "rope_type"
        rope: dict[str, Any] = {kind: "default" if self.scaling == "none" else self.scaling}
        rope.update(copy.deepcopy(dict(self.params)))
        config: dict[str, Any] = {
            "hidden_size": 4 * self.head_dim,
            "num_attention_heads": 4,
            "max_position_embeddings": self.mpe,
        }
        if self.model == "gpt_neox":
            config |= {"rotary_pct": self.partial, "rotary_emb_base": self.base}
            if self.scaling != "none":
                config["rope_scaling"] = rope
        elif self.legacy:
            config |= {"head_dim": self.head_dim, "rope_theta": self.base, "rope_scaling": rope}
        else:
            if self.partial != 1:
                rope["partial_rotary_factor"] = self.partial
            config |= {"head_dim": self.head_dim, "rope_parameters": {"rope_theta": self.base}}
            config["rope_parameters"] |= rope
        if self.original is not None:
            config["original_max_position_embeddings"] = self.original
        return config

    def query(self, **changes: Any) -> dict[str, Any]:
        """The same table as ``GET /v1/encodings/rotary`` names it."""
        query: dict[str, Any] = {
            "max_len": self.max_len,
            "head_dim": self.head_dim,
            "base": self.base,
            "partial_rotary_factor": self.partial,
            "scaling": self.scaling,
        }
        for name, value in self.params.items():
            query[name] = ",".join(map(str, value)) if isinstance(value, list) else value
        if self.scaling in ("dynamic", "yarn", "longrope"):
            query["max_position_embeddings"] = self.mpe
        if self.original is not None:
            query.setdefault("original_max_position_embeddings", self.original)
        if self.seq_len is not None:
            query["seq_len"] = self.seq_len
        return query | changes

    def key(self, **changes: Any) -> RotaryKey:
        return RotaryTableQuery(**self.query(**changes)).key()

    def positions(self) -> I64Array:
        """Rows 0 .. 4095, some middle rows, and the last rows, of a table of ``max_len``."""
        first = np.arange(min(SMALL, self.max_len))
        middle = MIDDLE[np.less(MIDDLE, self.max_len)]
        last = np.arange(max(0, self.max_len - TAIL), self.max_len)
        return np.unique(np.r_[first, middle, last]).astype(np.int64)

    def exact_max_len(self) -> int:
        return self.max_len if self.scaling in LENGTH_SCALINGS else CEILING

    def exact_positions(self) -> I64Array:
        length = self.exact_max_len()
        chosen = [p for p in (*EXACT_POSITIONS, *FAR_EXACT) if p < length] + [length - 1]
        return np.unique(np.array(chosen, dtype=np.int64))


def _factors(n: int, top: float) -> list[float]:
    """longrope's factors, one per pair: 1 at the first, growing to ``top`` at the last."""
    return [round(1.0 + (top - 1.0) * (k / (n - 1)) ** 2, 6) for k in range(n)]


LLAMA31: Final = {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
YARN: Final = Rope(128, 10000.0, "yarn", {"factor": 4.0, "original_max_position_embeddings": 4096})
YARN_GIVEN: Final = Rope(
    128,
    500000.0,
    "yarn",
    {
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
        "attention_factor": 1.25,
        "beta_fast": 16.0,
        "beta_slow": 2.0,
        "truncate": False,
    },
)
PHI3: Final = Rope(  # Phi-3's config: a top-level original_max_position_embeddings
    96,
    10000.0,
    "longrope",
    {"short_factor": _factors(48, 1.5), "long_factor": _factors(48, 60.0)},
    mpe=131072,
    legacy=True,
    original=4096,
)
LLAMA32: Final = Rope(64, 500000.0, "llama3", {**LLAMA31, "factor": 32.0}, mpe=131072)
CASES: Final = (
    Rope(64, 10000.0),
    Rope(128, 500000.0),
    Rope(96, 1e6),
    Rope(80, 10000.0),
    Rope(128, 10000.0, "linear", {"factor": 4.0}),
    Rope(80, 1e6, "linear", {"factor": 2.5}),
    Rope(64, 10000.0, "dynamic", {"factor": 2.0}),  # grown at 2^20 + 2
    Rope(128, 500000.0, "dynamic", {"factor": 3.7}, mpe=2048, max_len=100_001),
    Rope(96, 1e6, "dynamic", {"factor": 2.0}, max_len=4096),  # at the model's length
    Rope(128, 10000.0, "dynamic", {"factor": 1.5}, mpe=4000, max_len=4001),
    YARN,
    Rope(
        64,
        1e6,
        "yarn",
        {
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "mscale": 1.0,
            "mscale_all_dim": 0.8,
            "beta_fast": 32,
            "beta_slow": 1,
        },
        mpe=163840,
    ),
    YARN_GIVEN,
    Rope(
        80,
        10000.0,
        "yarn",
        {
            "factor": 16.0,
            "original_max_position_embeddings": 2048,
            "mscale": 0.707,  # without mscale_all_dim: the factor's own
            "truncate": False,
        },
    ),
    PHI3,
    dataclasses.replace(PHI3, max_len=4096),  # the short factors
    Rope(
        128,
        1e6,
        "longrope",
        {
            "short_factor": _factors(64, 2.0),
            "long_factor": _factors(64, 30.0),
            "original_max_position_embeddings": 8192,
            "factor": 16.0,
            "attention_factor": 1.1,
        },
        mpe=131072,
        max_len=100_001,
    ),
    Rope(128, 500000.0, "llama3", LLAMA31, mpe=131072, legacy=True),  # Llama 3.1
    LLAMA32,
    Rope(
        96,
        10000.0,
        "llama3",
        {
            "factor": 4.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 2.0,
            "original_max_position_embeddings": 4096,
        },
    ),
    Rope(96, 1e6, "dynamic", {"factor": 2.0}, max_len=4096, seq_len=50_000),  # seq_len given
    Rope(80, 10000.0, partial=0.25, model="gpt_neox"),  # Llama's default would rotate all 80
    Rope(128, 10000.0, partial=0.5, model="gpt_neox"),
    Rope(80, 1e6, partial=0.5, model="gpt_neox"),
    Rope(128, 10000.0, "linear", {"factor": 2.0}, partial=0.25, model="gpt_neox"),
    Rope(80, 1e6, "linear", {"factor": 2.0}, partial=0.5),  # Llama's linear honours it
    Rope(
        80,
        10000.0,
        "yarn",
        {"factor": 4.0, "original_max_position_embeddings": 2048},
        partial=0.5,
        model="gpt_neox",
    ),
    Rope(128, 10000.0, "dynamic", {"factor": 2.0}, mpe=2048, partial=0.5, model="gpt_neox"),
    Rope(128, 500000.0, "llama3", LLAMA31, mpe=131072, partial=0.5),
    Rope(
        80,
        10000.0,
        "longrope",
        {
            "short_factor": _factors(20, 1.2),
            "long_factor": _factors(20, 20.0),
            "original_max_position_embeddings": 2048,
        },
        mpe=32768,
        partial=0.5,
        model="gpt_neox",
    ),
    # Gemma 4's full-attention layers (transformers 5): the whole head, a quarter of it turning
    Rope(256, 1e6, "proportional", {}, partial=0.25),
    Rope(128, 1e6, "proportional", {"factor": 8.0}, partial=0.5),
)
# the exact tables: every case, and ntk (the service's static NTK-aware scaling, which no
# library module has: dynamic's base change at a fixed factor)
EXACT_CASES: Final = (*CASES, Rope(128, 10000.0, "ntk", {"factor": 4.0}))


# ---------------------------------------------------------------------------------------------
# The record of the largest differences
# ---------------------------------------------------------------------------------------------


@dataclass
class Largest:
    value: float = -1.0
    where: str = ""
    ratio: float = 0.0  # the largest difference / its bound


@dataclass
class Measured:
    """Largest differences by (comparison, label, part)."""

    rows: dict[tuple[str, str, str], Largest] = field(default_factory=dict)
    # the numpy engine's entries apart from transformers' and all its entries compared
    apart: list[int] = field(default_factory=lambda: [0, 0])

    def add(
        self,
        comparison: str,
        label: str,
        part: str,
        difference: NDArray[np.floating],
        where: str,
        bound: NDArray[np.floating] | None = None,
    ) -> None:
        largest = self.rows.setdefault((comparison, label, part), Largest())
        value = float(np.max(difference)) if difference.size else 0.0
        if value > largest.value:
            largest.value, largest.where = value, where
        if bound is not None and difference.size:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(difference == 0, 0.0, difference / bound)
            largest.ratio = max(largest.ratio, float(np.max(ratio)))

    def markdown(self) -> str:
        lines = [
            "| comparison | scaling / case | part | largest difference | where | / bound |",
            "|---|---|---|---|---|---|",
        ]
        for (comparison, label, part), largest in sorted(self.rows.items()):
            ratio = f"{largest.ratio:.3f}" if largest.ratio else "-"
            lines.append(
                f"| {comparison} | {label} | {part} | {largest.value:.3g} | {largest.where} "
                f"| {ratio} |"
            )
        apart, entries = self.apart
        if entries:
            lines.append(
                f"\nThe numpy engine (correctly rounded pow, cos, sin): {apart} of {entries} "
                f"entries ({100 * apart / entries:.2f} %) apart from transformers'."
            )
        return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def measured() -> Iterator[Measured]:
    """The record; at the end of the module, printed and written."""
    found = Measured()
    yield found
    if not found.rows:
        return
    table = found.markdown()
    print("\n\nRotary conformance: largest differences measured\n\n" + table)
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text(
        "# Rotary conformance: the largest differences measured\n\n"
        "Written by tests/conformance/test_rotary.py. Bounds: library against transformers, "
        "2^-22 (1 + |angle|) times max(1, attention factor); exact against mpmath, half a "
        "float32 ulp + 2^-48 |value| + 2^-100 |angle|; apply, 2^-22 (2 + |angle|) (|a| + |b|) "
        "for a pair (a, b) (+ one float16 ulp for float16).\n\n" + table
    )


# ---------------------------------------------------------------------------------------------
# transformers, and the service
# ---------------------------------------------------------------------------------------------


def hf_config(case: Rope) -> Any:
    transformers = lib("transformers")
    kind = transformers.GPTNeoXConfig if case.model == "gpt_neox" else transformers.LlamaConfig
    return kind(**case.config())


def hf_rotary(case: Rope) -> Any:
    """The model's rotary embedding module, built from its config (no weights)."""
    name = "GPTNeoXRotaryEmbedding" if case.model == "gpt_neox" else "LlamaRotaryEmbedding"
    return getattr(hf(case.model), name)(hf_config(case))


@dataclass(frozen=True)
class HFTable:
    cos: F64Array
    sin: F64Array
    inv_freq: NDArray[np.float32]
    attention: float

    def angles(self, positions: I64Array) -> F64Array:
        inv = np.tile(self.inv_freq.astype(np.float64), 2)  # torch.cat((freqs, freqs), -1)
        result: F64Array = positions.astype(np.float64)[:, None] * inv[None, :]
        return result


def hf_table(case: Rope, positions: I64Array) -> HFTable:
    """cos and sin from the module's forward on ``position_ids`` ``(1, P)``: ``positions`` and
    the sequence's last, ``case.length - 1`` (the sequence length transformers sees is the
    largest position + 1: dynamic's growth, longrope's choice of factors)."""
    torch = lib("torch")
    module = hf_rotary(case)
    ids = np.append(positions, case.length - 1)
    with torch.no_grad():
        cos, sin = module(torch.zeros(1), torch.from_numpy(ids)[None])
    return HFTable(
        cos[0, :-1].numpy().astype(np.float64),
        sin[0, :-1].numpy().astype(np.float64),
        module.inv_freq.numpy().copy(),
        float(module.attention_scaling),
    )


def service_table(key: RotaryKey, positions: I64Array) -> tuple[F64Array, F64Array]:
    """cos and sin at ``positions``: their first run of rows 0, 1, 2, ... (at most 4096) from
    ``registry.rows`` (the family's fill), the others from ``registry.take``."""
    run = positions[:SMALL] == np.arange(min(SMALL, len(positions)))
    head = len(run) if run.all() else int(np.argmin(run))
    parts = [registry.rows(key, 0, head)] if head else []
    if head < len(positions):
        parts.append(registry.take(key, positions[head:]))
    table = np.concatenate(parts).astype(np.float64)
    return table[:, : key.rotary_dim], table[:, key.rotary_dim :]


def from_config(
    http: httpx.Client, config: Mapping[str, Any], **params: Any
) -> tuple[F64Array, F64Array]:
    """cos and sin from ``POST /v1/encodings/rotary/from-config`` (npz)."""
    response = http.post(PATH + "/from-config", json=config, params={"format": "npz", **params})
    assert response.status_code == 200, response.text
    with np.load(io.BytesIO(response.content), allow_pickle=False) as archive:
        return archive["cos"].astype(np.float64), archive["sin"].astype(np.float64)


def _worst(label: str, positions: I64Array, ours: F64Array, theirs: F64Array, excess: Any) -> str:
    i, j = np.unravel_index(int(np.argmax(excess)), excess.shape)
    return (
        f"{label}: position {positions[i]} column {j}: service {ours[i, j]!r}, other "
        f"{theirs[i, j]!r}, {excess[i, j]:.3g} of the bound"
    )


# ---------------------------------------------------------------------------------------------
# rounding=library against transformers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_library_tables_match_transformers(
    service: httpx.Client, measured: Measured, case: Rope
) -> None:
    positions = case.positions()
    theirs = hf_table(case, positions)
    key = case.key()
    assert key.rotary_dim == case.rotary_dim == 2 * len(theirs.inv_freq)
    assert key.attention == pytest.approx(theirs.attention, rel=1e-15)
    # the frequencies: within 2^-22 (an ulp or two: torch's float32 pow is not correctly
    # rounded; measured, every difference is one of pow's and 1 ulp)
    ours_inv = rotary.library_frequencies(key).astype(np.float64)
    np.testing.assert_allclose(ours_inv, theirs.inv_freq, rtol=LIBRARY_BOUND, atol=0)
    # with the torch engine (torch's own pow, cos and sin) they are transformers' bit for bit
    apart = {"inv_freq": int((ours_inv != theirs.inv_freq).sum())}

    angles = theirs.angles(positions)
    bound = LIBRARY_BOUND * (1 + np.abs(angles)) * max(1.0, theirs.attention)
    failures = []
    everywhere = np.ones(len(positions), dtype=bool)
    sources = [("registry", everywhere, *service_table(key, positions))]
    # from-config (which has no seq_len): rows 0 .. 4095 and the last rows, two requests
    spans = [(0, min(SMALL, case.max_len)), (max(SMALL, case.max_len - TAIL), case.max_len)]
    for start, stop in spans:
        if start < stop and not case.seq_len:
            config = case.config()
            answer = from_config(service, config, max_len=case.max_len, start=start, stop=stop)
            sources.append(("from-config", (positions >= start) & (positions < stop), *answer))
    for source, rows, cos, sin in sources:
        for part, ours, other in (("cos", cos, theirs.cos[rows]), ("sin", sin, theirs.sin[rows])):
            assert ours.shape == other.shape, (source, ours.shape, other.shape)
            difference = np.abs(ours - other)
            where = f"{case.id} ({source})"
            comparison = "library vs transformers"
            measured.add(comparison, case.scaling, part, difference, where, bound[rows])
            excess = difference / bound[rows]
            if np.max(excess) > 1:
                failures.append(_worst(where, positions[rows], ours, other, excess))
            apart[f"{source} {part}"] = int((ours != other).sum())
    assert not failures, failures
    if kernels.engine() == "torch":
        assert not any(apart.values()), apart


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
@pytest.mark.usefixtures("numpy_engine")
def test_library_without_torch_is_within_the_functions_error(
    measured: Measured, case: Rope
) -> None:
    """The numpy engine: correctly rounded float32 pow, cos and sin in transformers' order,
    within the bound of torch's; the share of entries apart is measured."""
    positions = case.positions()
    theirs = hf_table(case, positions)
    key = case.key()
    bound = LIBRARY_BOUND * (1 + np.abs(theirs.angles(positions))) * max(1.0, theirs.attention)
    cos, sin = service_table(key, positions)
    for part, ours, other in (("cos", cos, theirs.cos), ("sin", sin, theirs.sin)):
        difference = np.abs(ours - other)
        comparison = "library (numpy engine) vs transformers"
        measured.add(comparison, case.scaling, part, difference, case.id, bound)
        assert np.all(difference <= bound), (case.id, part)
        measured.apart[0] += int((ours != other).sum())
        measured.apart[1] += ours.size


def test_llama_default_rope_ignores_partial_rotary_factor() -> None:
    """Why the partial cases build GPT-NeoX's module: Llama's default rope rotates the whole
    head whatever ``partial_rotary_factor`` says; its scaled ropes and GPT-NeoX's take it."""
    config = {
        "hidden_size": 320,
        "num_attention_heads": 4,
        "head_dim": 80,
        "max_position_embeddings": 4096,
    }
    transformers = lib("transformers")
    default = {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}
    linear = {**default, "rope_type": "linear", "factor": 2.0}
    llama = hf("llama").LlamaRotaryEmbedding
    assert len(llama(transformers.LlamaConfig(**config, rope_parameters=default)).inv_freq) == 40
    assert len(llama(transformers.LlamaConfig(**config, rope_parameters=linear)).inv_freq) == 20
    assert len(hf_rotary(Rope(80, 1e4, partial=0.5, model="gpt_neox")).inv_freq) == 20


# the config translations that need transformers' own reading of a config
# (standardize_rope_params): original_max_position_embeddings defaults to
# max_position_embeddings for yarn, longrope and llama3, and a top-level value wins over the
# rope dict's (Phi-3's exception)
_KNOWN_CONFIG: Final = (
    pytest.param(
        Rope(64, 1e4, "yarn", {"factor": 4.0}, mpe=8192),
        id="yarn-without-original_max_position_embeddings",
    ),
    pytest.param(
        Rope(64, 1e4, "llama3", {k: v for k, v in LLAMA31.items() if "original" not in k}),
        id="llama3-without-original_max_position_embeddings",
    ),
    pytest.param(
        Rope(
            64,
            1e4,
            "yarn",
            {"factor": 4.0, "original_max_position_embeddings": 4096},
            original=2048,
        ),
        id="yarn-top-level-original-first",
    ),
)


@pytest.mark.parametrize("case", _KNOWN_CONFIG)
def test_from_config_reads_configs_as_transformers_does(service: httpx.Client, case: Rope) -> None:
    positions = np.arange(SMALL, dtype=np.int64)
    theirs = hf_table(case, positions)
    cos, sin = from_config(service, case.config(), max_len=SMALL)
    bound = LIBRARY_BOUND * (1 + np.abs(theirs.angles(positions))) * max(1.0, theirs.attention)
    assert np.all(np.abs(cos - theirs.cos) <= bound)
    assert np.all(np.abs(sin - theirs.sin) <= bound)


GPTJ: Final = {"model_type": "gptj", "n_embd": 256, "n_head": 4, "n_positions": 512}


def test_gpt_j_from_config_is_its_attentions_table(service: httpx.Client) -> None:
    """GPT-J's config (its own names, a rotary_dim of a quarter head) against the table
    ``GPTJAttention`` builds from it: ``create_sinusoidal_positions`` over rotary_dim, sin
    then cos, each pair's angle once (the service's interleaved table repeats it)."""
    config = {**GPTJ, "rotary_dim": 16}
    attention = hf("gptj").GPTJAttention(lib("transformers").GPTJConfig(**config))
    sin, cos = attention.embed_positions.double().numpy().reshape(512, 2, 8).transpose(1, 0, 2)
    ours_cos, ours_sin = from_config(service, config)
    assert ours_cos.shape == (512, 16)
    positions = np.arange(512, dtype=np.float64)[:, None]
    bound = LIBRARY_BOUND * (1 + positions * np.ones(16))
    assert np.all(np.abs(ours_cos - np.repeat(cos, 2, axis=1)) <= bound)
    assert np.all(np.abs(ours_sin - np.repeat(sin, 2, axis=1)) <= bound)


def test_gpt_j_refuses_a_null_rotary_dim_as_transformers_does(service: httpx.Client) -> None:
    """transformers' GPTJConfig holds rotary_dim as a strict int: a config saying null is
    not loaded (its attention's ``rotary_dim or embed_dim`` would make a table n_embd wide,
    which fits whole heads only with one head); the service refuses it too, not reading it
    as the class's 64."""
    config = {**GPTJ, "rotary_dim": None}
    refused = lib("huggingface_hub.errors").StrictDataclassFieldValidationError
    with pytest.raises(refused, match="rotary_dim"):
        lib("transformers").GPTJConfig.from_dict(config)
    answer = service.post(PATH + "/from-config", json=config)
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["name"] == "rotary_dim"


# ---------------------------------------------------------------------------------------------
# rounding=exact against the formulas in mpmath
# ---------------------------------------------------------------------------------------------


def _correction_range(case: Rope, params: Mapping[str, Any]) -> tuple[float, float]:
    """yarn's ramp ends as ``find_correction_range`` computes them (float64, part of the
    scaling's definition), with ``linear_ramp_factor``'s guard against an empty range."""
    r, base = case.rotary_dim, case.base
    original = params["original_max_position_embeddings"]

    def dim(rotations: float) -> float:
        return (r * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = dim(params.get("beta_fast") or 32), dim(params.get("beta_slow") or 1)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, r - 1)
    return low, (high + 0.001 if low == high else high)


def exact_frequencies(case: Rope, max_len: int) -> tuple[list[Any], Any]:
    """Each pair's inverse frequency and the attention factor, from the formulas of
    ``modeling_rope_utils.py`` (one ``_compute_*_parameters`` per scaling) in mpmath, for a
    sequence of ``max_len`` (dynamic's ``seq_len``, longrope's choice of factors)."""
    mpf = mpmath.mpf
    r, n, p = case.rotary_dim, case.rotary_dim // 2, dict(case.params)
    p.setdefault("original_max_position_embeddings", case.original)
    base = mpf(case.base)
    if case.scaling == "ntk":
        base *= mpf(p["factor"]) ** (mpf(r) / (r - 2))
    if case.scaling == "dynamic" and max_len > case.mpe:
        factor = mpf(p["factor"])
        base *= (factor * max_len / case.mpe - (factor - 1)) ** (mpf(r) / (r - 2))
    w = [base ** (mpf(-2 * k) / r) for k in range(n)]
    attention = mpf(1)
    if case.scaling == "linear":
        w = [x / mpf(p["factor"]) for x in w]
    elif case.scaling == "proportional":  # the pairs past the turning ones: frequency 0
        turning = int(case.partial * case.head_dim // 2)
        w = [x / mpf(p.get("factor", 1.0)) if k < turning else mpf(0) for k, x in enumerate(w)]
    elif case.scaling == "yarn":
        factor = mpf(p["factor"])

        def mscale(m: Any) -> Any:
            return mpf(1) if factor <= 1 else mpf("0.1") * mpf(m) * mpmath.log(factor) + 1

        if p.get("attention_factor") is not None:
            attention = mpf(p["attention_factor"])
        elif p.get("mscale") and p.get("mscale_all_dim"):
            attention = mscale(p["mscale"]) / mscale(p["mscale_all_dim"])
        else:
            attention = mscale(1)
        low, high = _correction_range(case, p)
        ramps = [min(max((k - mpf(low)) / (mpf(high) - mpf(low)), 0), 1) for k in range(n)]
        # interpolation (w / factor) where the ramp is 1, extrapolation (w) where it is 0
        w = [x * (ramp / factor + (1 - ramp)) for x, ramp in zip(w, ramps, strict=True)]
    elif case.scaling == "longrope":
        original = p["original_max_position_embeddings"]
        chosen = p["long_factor"] if max_len > original else p["short_factor"]
        w = [x / mpf(float(f)) for x, f in zip(w, chosen, strict=True)]
        factor = mpf(p.get("factor") or mpf(case.mpe) / original)
        if p.get("attention_factor") is not None:
            attention = mpf(p["attention_factor"])
        elif factor > 1:
            attention = mpmath.sqrt(1 + mpmath.log(factor) / mpmath.log(original))
    elif case.scaling == "llama3":
        factor, original = mpf(p["factor"]), mpf(p["original_max_position_embeddings"])
        low, high = mpf(p["low_freq_factor"]), mpf(p["high_freq_factor"])
        scaled = []
        for x in w:
            wavelength = 2 * mpmath.pi / x
            if wavelength > original / low:
                scaled.append(x / factor)
            elif wavelength < original / high:
                scaled.append(x)
            else:
                smooth = (original / wavelength - low) / (high - low)
                scaled.append((1 - smooth) * x / factor + smooth * x)
        w = scaled
    return w, attention


def exact_values(case: Rope, positions: I64Array, max_len: int) -> dict[str, reference.Exact]:
    """Each pair's cos and sin (times the attention factor) at ``positions``, to 50 digits."""
    shape = (len(positions), case.rotary_dim // 2)
    arrays = {name: np.zeros(shape) for name in ("cos_hi", "cos_lo", "sin_hi", "sin_lo", "angle")}
    with mpmath.workdps(DIGITS):
        w, attention = exact_frequencies(case, max_len)
        for i, position in enumerate(positions.tolist()):
            for k, frequency in enumerate(w):
                theta = position * frequency
                c, s = mpmath.cos_sin(theta)
                for name, value in (("cos", c * attention), ("sin", s * attention)):
                    hi = float(value)
                    arrays[f"{name}_hi"][i, k], arrays[f"{name}_lo"][i, k] = hi, float(value - hi)
                arrays["angle"][i, k] = float(theta)
    return {
        name: reference.Exact(arrays[f"{name}_hi"], arrays[f"{name}_lo"], arrays["angle"])
        for name in ("cos", "sin")
    }


@pytest.mark.parametrize("case", EXACT_CASES, ids=lambda case: case.id)
def test_exact_tables_match_mpmath(measured: Measured, case: Rope) -> None:
    max_len = case.exact_max_len()
    positions = case.exact_positions()
    key = case.key(max_len=max_len, rounding="exact")
    library = case.key(max_len=max_len)
    truth = exact_values(case, positions, case.seq_len or max_len)
    n = key.rotary_dim // 2
    ours = dict(zip(("cos", "sin"), service_table(key, positions), strict=True))
    theirs = dict(zip(("cos", "sin"), service_table(library, positions), strict=True))
    attention = max(1.0, key.attention)
    failures = []
    for part in ("cos", "sin"):
        assert np.array_equal(ours[part][:, n:], ours[part][:, :n])  # half: pair k twice
        values, exact = ours[part][:, :n], truth[part]
        difference = reference.error(values, exact)
        bound = (
            reference.half_ulp32(exact)
            + RELATIVE_SLACK * np.abs(exact.hi)
            + FREQUENCY_ERROR * attention * np.abs(exact.angle)
        )
        measured.add("exact vs mpmath (float32)", case.scaling, part, difference, case.id, bound)
        with np.errstate(divide="ignore", invalid="ignore"):
            excess = np.where(difference == 0, 0.0, difference / bound)
        if np.max(excess) > 1:
            failures.append(_worst(case.id, positions, values, exact.hi, excess))
        below = positions <= 2**20  # past it, float32 positions are not the positions
        gap = np.abs(theirs[part][below, :n] - values[below])
        measured.add(
            "library vs exact (service), positions <= 2^20", case.scaling, part, gap, case.id
        )
    assert not failures, failures


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_library_against_exact_at_long_context(measured: Measured, base: float) -> None:
    """The precision the float32 arithmetic loses at long context (head_dim 128, no scaling):
    the service's library table, and transformers' own, against mpmath at positions 8,192,
    131,072 and 1,048,576; both within ``2^-22 (1 + |angle|)`` of the exact values."""
    case = Rope(128, base, max_len=CEILING)
    positions = np.array(MEASURED_POSITIONS, dtype=np.int64)
    truth = exact_values(case, positions, CEILING)
    library = dict(zip(("cos", "sin"), service_table(case.key(), positions), strict=True))
    exact = dict(
        zip(("cos", "sin"), service_table(case.key(rounding="exact"), positions), strict=True)
    )
    hf_values = hf_table(case, positions)
    transformers = {"cos": hf_values.cos, "sin": hf_values.sin}
    n = case.rotary_dim // 2
    for part in ("cos", "sin"):
        bound = LIBRARY_BOUND * (1 + np.abs(truth[part].angle))
        for i, position in enumerate(MEASURED_POSITIONS):
            label = f"d=128, base={base:g}, position {position}"
            whole = truth[part]
            exact_row = reference.Exact(whole.hi[i], whole.lo[i], whole.angle[i])
            for name, values in (("service library", library), ("transformers", transformers)):
                difference = reference.error(values[part][i, :n], exact_row)
                measured.add(f"{name} vs mpmath", label, part, difference, "", bound[i])
                assert np.all(difference <= bound[i]), (name, part, position)
            gap = np.abs(library[part][i] - exact[part][i])
            measured.add("library vs exact (service)", label, part, gap, "")


# ---------------------------------------------------------------------------------------------
# apply: transformers' apply_rotary_pos_emb (half), Meta's apply_rotary_emb (interleaved)
# ---------------------------------------------------------------------------------------------


def meta_freqs_cis(dim: int, start: int, end: int, theta: float) -> Any:
    """Rows ``start .. end-1`` of ``precompute_freqs_cis(dim, end, theta)`` of Meta's
    ``llama/model.py`` (meta-llama/llama), re-typed: ``1 / theta^(arange(0, dim, 2)[:dim//2]
    .float() / dim)``, ``torch.outer`` of the int64 positions and those frequencies in
    float32, then ``torch.polar(ones, angles)`` (complex64). Each row depends on its position
    only, so the rows from ``start`` on are those of the whole table."""
    torch = lib("torch")
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(start, end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def meta_apply_rotary_emb(xq: Any, freqs_cis: Any) -> Any:
    """``apply_rotary_emb(xq, xk, freqs_cis)`` of Meta's ``llama/model.py``, re-typed for one
    tensor ``(bsz, seqlen, n_heads, head_dim)``: consecutive pairs as complex numbers
    (``view_as_complex`` of ``xq.float()``), times ``freqs_cis`` broadcast as
    ``reshape_for_broadcast`` does (``(1, seqlen, 1, head_dim/2)``), back with ``view_as_real``
    and ``flatten(3)``, in the input's dtype (``type_as``)."""
    torch = lib("torch")
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    shape = [d if i in (1, xq_.ndim - 1) else 1 for i, d in enumerate(xq_.shape)]
    xq_out = torch.view_as_real(xq_ * freqs_cis.view(*shape)).flatten(3)
    return xq_out.type_as(xq)


def hf_apply(case: Rope, batch: NDArray[np.floating], position_ids: I64Array) -> F64Array:
    """transformers' rotation of ``batch`` ``(batch, heads, L, head_dim)``: the module's cos
    and sin for ``position_ids`` ``(batch or 1, L)``, then the model's ``apply_rotary_pos_emb``
    (``q * cos + rotate_half(q) * sin``; GPT-NeoX's passes the dimensions past the rotary
    ones through). float16 batches are rotated in float32 (what the service does), then
    rounded to float16."""
    torch = lib("torch")
    q = torch.from_numpy(batch)
    if q.dtype == torch.float16:
        q = q.float()
    with torch.no_grad():
        cos, sin = hf_rotary(case)(q, torch.from_numpy(position_ids))
        out, _ = hf(case.model).apply_rotary_pos_emb(q, q, cos, sin)
    return np.asarray(out.numpy().astype(batch.dtype), dtype=np.float64)


@dataclass(frozen=True)
class Batch:
    """A batch to rotate: its shape and dtype, and its positions (an offset, or position ids
    of shape ``(L,)`` or ``(batch, L)`` drawn below ``top``)."""

    case: Rope
    shape: tuple[int, int, int, int]
    dtype: str = "float32"
    offset: int = 0
    ids: str | None = None  # "L" or "batch, L"
    top: int = 131_072

    @property
    def id(self) -> str:
        where = f"ids({self.ids})<{self.top}" if self.ids else f"offset={self.offset}"
        return f"{self.case.id}-{'x'.join(map(str, self.shape))}-{self.dtype}-{where}"

    def draw(self) -> tuple[NDArray[np.floating], I64Array | None, I64Array]:
        """The batch, the position ids posted (or None), and each sequence's positions
        ``(batch or 1, L)``: the same on every call."""
        rng = np.random.default_rng(0)
        batch = rng.standard_normal(self.shape).astype(self.dtype)
        length = self.shape[-2]
        if self.ids is None:
            return batch, None, np.arange(self.offset, self.offset + length)[None]
        rows = 1 if self.ids == "L" else self.shape[0]
        ids = rng.integers(0, self.top, size=(rows, length))
        ids[0, -1] = self.top - 1  # the sequence length transformers sees: max_len
        return batch, (ids[0] if self.ids == "L" else ids), ids


def service_apply(
    http: httpx.Client,
    batch: Batch,
    convention: str = "half",
    embeddings: NDArray[np.floating] | None = None,
) -> tuple[F64Array, NDArray[np.floating], I64Array]:
    """``POST /v1/encodings/rotary/apply`` of the drawn batch (or of ``embeddings`` at its
    positions): the answer (npy), the batch rotated and its positions."""
    drawn, ids, positions = batch.draw()
    embeddings = drawn if embeddings is None else np.ascontiguousarray(embeddings)
    query = batch.case.query(convention=convention)
    for name in ("head_dim", "max_len"):
        query.pop(name)
    if batch.case.scaling in LENGTH_SCALINGS:
        query["max_len"] = int(positions.max()) + 1
    arrays: dict[str, NDArray[Any]] = {"embeddings": embeddings}
    if ids is None:
        query["offset"] = batch.offset
    else:
        arrays["position_ids"] = ids
    response = http.post(
        PATH + "/apply",
        content=npz_bytes(**arrays),
        params={**query, "format": "npy"},
        headers={"content-type": "application/x-npz"},
    )
    assert response.status_code == 200, response.text
    result = np.load(io.BytesIO(response.content), allow_pickle=False)
    assert result.dtype == embeddings.dtype
    assert result.shape == embeddings.shape
    return result.astype(np.float64), embeddings, positions


def apply_bound(
    batch: NDArray[np.floating],
    angles: F64Array,
    convention: str,
    attention: float,
    result: NDArray[np.floating],
) -> F64Array:
    """Per entry of a rotated pair ``(a, b)``: ``2^-22 (2 + |angle|) (|a| + |b|)`` times the
    attention factor (the tables' bound on cos and sin, and each side's roundings of the
    products and the sum), plus a float16 ulp of the result for float16; exact elsewhere.
    ``angles``: each entry's angle, ``(batch or 1, 1, L, rotary_dim)``."""
    r = angles.shape[-1]
    x = np.abs(batch.astype(np.float64))
    if convention == "half":
        a, b = x[..., : r // 2], x[..., r // 2 : r]
        pair = np.concatenate([a + b, a + b], axis=-1)
    else:
        a, b = x[..., 0:r:2], x[..., 1:r:2]
        pair = np.repeat(a + b, 2, axis=-1)
    bound = np.zeros(x.shape)
    bound[..., :r] = LIBRARY_BOUND * (2 + np.abs(angles)) * pair * max(1.0, attention)
    if batch.dtype == np.float16:
        bound += np.spacing(np.abs(result).astype(np.float16)).astype(np.float64)
    return bound


def _angles(inv_freq: NDArray[np.floating], positions: I64Array, convention: str) -> F64Array:
    inv = inv_freq.astype(np.float64)
    per_column = np.tile(inv, 2) if convention == "half" else np.repeat(inv, 2)
    result: F64Array = positions.astype(np.float64)[:, None, :, None] * per_column
    return result


def _compare_apply(
    measured: Measured,
    comparison: str,
    batch: Batch,
    ours: F64Array,
    theirs: F64Array,
    bound: F64Array,
) -> None:
    difference = np.abs(ours - theirs)
    measured.add(comparison, batch.case.scaling, "values", difference, batch.id, bound)
    assert np.all((bound > 0) | (difference == 0)), f"{batch.id}: a passed-through value changed"
    excess = np.where(difference == 0, 0.0, difference / np.where(bound == 0, 1.0, bound))
    index = np.unravel_index(int(np.argmax(excess)), excess.shape)
    assert excess[index] <= 1, (
        f"{comparison}, {batch.id}: at {index}: service {ours[index]!r}, other "
        f"{theirs[index]!r}, {excess[index]:.3g} of the bound"
    )


DYNAMIC: Final = Rope(128, 10000.0, "dynamic", {"factor": 2.0})
APPLY_CASES: Final = (
    Batch(Rope(64, 10000.0), (1, 4, 33, 64), offset=1000),
    Batch(Rope(64, 10000.0), (1, 4, 33, 64), ids="L"),
    Batch(Rope(128, 500000.0, "llama3", LLAMA31, mpe=131072), (2, 3, 17, 128), ids="batch, L"),
    Batch(YARN, (2, 3, 17, 128), ids="L"),  # an attention factor
    Batch(Rope(128, 500000.0), (2, 3, 17, 128), "float16", offset=100_000),
    Batch(
        Rope(128, 10000.0, "linear", {"factor": 4.0}), (2, 3, 17, 128), "float16", ids="batch, L"
    ),
    Batch(Rope(128, 10000.0), (2, 3, 17, 128), "float64", offset=2**20 - 8),
    Batch(DYNAMIC, (2, 3, 17, 128), "float64", ids="batch, L", top=300_000),
    Batch(PHI3, (1, 4, 33, 96), ids="L", top=100_000),  # the long factors
    Batch(Rope(80, 10000.0, partial=0.5, model="gpt_neox"), (1, 4, 33, 80), offset=5),
    Batch(
        Rope(128, 10000.0, partial=0.25, model="gpt_neox"),
        (2, 3, 17, 128),
        "float16",
        ids="batch, L",
    ),
)


@pytest.mark.parametrize("batch", APPLY_CASES, ids=lambda batch: batch.id)
def test_apply_half_matches_apply_rotary_pos_emb(
    service: httpx.Client, measured: Measured, batch: Batch
) -> None:
    ours, embeddings, positions = service_apply(service, batch)
    theirs = hf_apply(batch.case, embeddings, positions)
    key = batch.case.key(max_len=int(positions.max()) + 1)
    inv = rotary.library_frequencies(key)
    bound = apply_bound(embeddings, _angles(inv, positions, "half"), "half", key.attention, theirs)
    _compare_apply(measured, "apply half vs transformers", batch, ours, theirs, bound)


META_CASES: Final = (
    Batch(Rope(64, 10000.0), (1, 4, 33, 64), offset=1000),
    Batch(Rope(128, 500000.0), (2, 3, 17, 128), offset=131_060),
    Batch(Rope(128, 10000.0), (2, 3, 17, 128), "float16", offset=2**20 - 8),
)


@pytest.mark.parametrize("batch", META_CASES, ids=lambda batch: batch.id)
def test_apply_interleaved_matches_meta_apply_rotary_emb(
    service: httpx.Client, measured: Measured, batch: Batch
) -> None:
    torch = lib("torch")
    ours, embeddings, positions = service_apply(service, batch, "interleaved")
    length, dim = embeddings.shape[-2], embeddings.shape[-1]
    freqs_cis = meta_freqs_cis(dim, batch.offset, batch.offset + length, batch.case.base)
    x = torch.from_numpy(embeddings).transpose(1, 2)  # Meta's (bsz, seqlen, n_heads, head_dim)
    theirs = meta_apply_rotary_emb(x, freqs_cis).transpose(1, 2).numpy().astype(np.float64)
    inv = rotary.library_frequencies(batch.case.key())
    angles = _angles(inv, positions, "interleaved")
    bound = apply_bound(embeddings, angles, "interleaved", 1.0, theirs)
    _compare_apply(measured, "apply interleaved vs Meta", batch, ours, theirs, bound)
    # and the table: Meta's freqs_cis, each pair's value in columns 2k and 2k + 1
    cos, sin = service_table(batch.case.key(convention="interleaved"), positions[0])
    for ours_part, theirs_part in ((cos, freqs_cis.real), (sin, freqs_cis.imag)):
        other = np.repeat(theirs_part.numpy().astype(np.float64), 2, axis=-1)
        assert np.all(np.abs(ours_part - other) <= LIBRARY_BOUND * (1 + np.abs(angles[0, 0])))


# ---------------------------------------------------------------------------------------------
# half and interleaved: the same rotation after permuting the head dimensions
# ---------------------------------------------------------------------------------------------


def permutation(head_dim: int, rotary_dim: int) -> NDArray[np.intp]:
    """The standard permutation: the interleaved pairs' first members (0, 2, ..., r-2), then
    their second (1, 3, ..., r-1), then the dimensions past the rotary ones. Dimension ``j``
    of a head in the half convention is dimension ``perm[j]`` of the interleaved one."""
    r = rotary_dim
    parts = [np.arange(0, r, 2), np.arange(1, r, 2), np.arange(r, head_dim)]
    return np.concatenate(parts).astype(np.intp)


PERMUTED: Final = (
    Batch(Rope(128, 500000.0), (1, 4, 33, 128), ids="batch, L"),
    Batch(LLAMA32, (2, 3, 17, 64), "float64", offset=100_000),
    Batch(YARN_GIVEN, (2, 3, 17, 128), "float16", ids="L"),
    Batch(Rope(80, 1e6, partial=0.5, model="gpt_neox"), (1, 4, 33, 80), offset=7),
)


@pytest.mark.parametrize("batch", PERMUTED, ids=lambda batch: batch.id)
def test_half_and_interleaved_agree_after_the_permutation(
    service: httpx.Client, measured: Measured, batch: Batch
) -> None:
    case = batch.case
    perm = permutation(case.head_dim, case.rotary_dim)
    # the tables: interleaved columns permuted are the half ones, bit for bit
    positions = np.array([0, 1, 4095, 100_000, 2**20 - 1], dtype=np.int64)
    half = service_table(case.key(), positions)
    interleaved = service_table(case.key(convention="interleaved"), positions)
    for h, i in zip(half, interleaved, strict=True):
        assert np.array_equal(i[:, perm[: case.rotary_dim]], h)
    # the rotations: half of the permuted batch is the permuted interleaved rotation
    ours, embeddings, ids = service_apply(service, batch, "interleaved")
    moved = np.ascontiguousarray(embeddings[..., perm])
    ours_half, _, _ = service_apply(service, batch, "half", moved)
    np.testing.assert_array_equal(ours_half, ours[..., perm])
    # and the libraries: transformers' half rotation of the permuted batch
    theirs = hf_apply(case, moved, ids)
    key = case.key(max_len=int(ids.max()) + 1)
    angles = _angles(rotary.library_frequencies(key), ids, "half")
    bound = apply_bound(moved, angles, "half", key.attention, theirs)
    comparison = "apply interleaved, permuted, vs transformers half"
    _compare_apply(measured, comparison, batch, ours[..., perm], theirs, bound)
