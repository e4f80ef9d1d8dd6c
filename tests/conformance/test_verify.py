"""Conformance: ``POST /v1/verify`` and ``POST /v1/identify`` on the real libraries' tables.

- Every family and preset served: the table the library makes (transformers' rotary
  modules for each scaling, in both pairings; the sinusoidal presets' libraries; each
  timestep preset's code as test_timestep runs it, FLUX's reference sampler with its
  bfloat16 hop among them; DiT's, diffusers', SD3's and timm's sin-cos grids and
  CogVideoX's 3-D one; each rope-nd preset's module as test_rope_nd builds it; Llama 4's
  attention temperature from its forward pass) verifies as ``bitwise`` or ``library``.
- The same tables with each known mistake injected, made with the library where it can make
  it (another base, scaling, head, its ids cast) and by the mistake's own arithmetic where
  not (cos and sin swapped, the table stored in bfloat16): diagnosed as that mistake, and
  where the diagnosis names ``GET`` parameters, that ``GET`` is the injected table within
  the bound.
- identify on the tables of known models (rotary, sinusoidal, FLUX's and SD's timestep
  embeddings, a MAE grid) names their family and parameters; the answers
  and the time each took are written to ``artifacts/conformance-identify.md``.

The core is called in process (``service.audit.verify``), a few cases through the routes.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pytest
from numpy.typing import NDArray

from service.audit import identify as identifying
from service.audit import verify as verifying
from service.routes import FAMILIES
from tests.conformance import reference
from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

EXTRA: Final = ("torch", "transformers", "diffusers")
_missing = [name for name in EXTRA if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

from tests.conformance import test_llama4 as llama4_cases  # noqa: E402  (needs torch)
from tests.conformance import test_rope_nd as rope_nd_cases  # noqa: E402
from tests.conformance import test_rotary as rotary_cases  # noqa: E402
from tests.conformance import test_sincos as sincos_cases  # noqa: E402
from tests.conformance import test_timestep as timestep_cases  # noqa: E402

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
ROWS: Final = 2048
ARTIFACT: Final = ROOT / "artifacts" / "conformance-identify.md"
MATCHED: Final = ("bitwise", "library")
DECLARED: Final = {each.family.name: each for each in FAMILIES}
IDENTIFIED: Final[list[dict[str, Any]]] = []


@functools.cache
def lib(name: str) -> Any:
    return importlib.import_module(name)


def hf(model: str) -> Any:
    return lib(f"transformers.models.{model}.modeling_{model}")


# ---------------------------------------------------------------------------------------------
# The core, in process: a claim as POST /v1/verify builds it
# ---------------------------------------------------------------------------------------------


def maker(family: str) -> verifying.Make:
    declared = DECLARED[family]

    def make(parameters: Mapping[str, Any]) -> Any:
        return declared.key(declared.query.model_validate(dict(parameters)))

    return make


def claim(family: str, parameters: Mapping[str, Any], stop: int = 0) -> verifying.Claim:
    """The claim as the route makes it: ``max_len`` the table's ``stop`` where not given."""
    declared = DECLARED[family]
    given = dict(parameters)
    if "max_len" in declared.query.model_fields and stop:
        given.setdefault("max_len", stop)
    query = declared.query.model_validate(given)
    given = query.model_dump(exclude_unset=True)
    return verifying.Claim(family, given, declared.key(query), maker(family))


@dataclass(frozen=True)
class Table:
    """A library's table: its rows (named arrays side by side), their dtype, how many named
    arrays a row holds, and each row's position."""

    rows: F64
    dtype: str = "float32"
    named: int = 1
    positions: I64 | None = None

    def posted(self) -> verifying.Posted:
        at = np.arange(len(self.rows)) if self.positions is None else self.positions
        return verifying.Posted(self.rows, self.dtype, at.astype(np.int64))

    def replace(self, **changes: Any) -> Table:
        return dataclasses.replace(self, **changes)


def pair_table(cos: Any, sin: Any, **kw: Any) -> Table:
    rows = np.concatenate([np.asarray(cos, np.float64), np.asarray(sin, np.float64)], axis=1)
    return Table(rows, named=2, **kw)


def verified(family: str, parameters: Mapping[str, Any], table: Table) -> dict[str, Any]:
    posted = table.posted()
    return verifying.verify(claim(family, parameters, int(posted.positions.max()) + 1), posted)


def reproduced(diagnosis: Mapping[str, Any], table: Table, claimed: Mapping[str, Any]) -> float:
    """The largest excess of the injected table over the bound around the ``GET`` the
    diagnosis names (at most 0: that ``GET`` is the table). Its rows start at its
    ``start``: rows moved by k positions are read k positions on."""
    posted = table.posted()
    made = claim(diagnosis["family"], diagnosis["parameters"], int(posted.positions.max()) + 1)
    moved = int(diagnosis["parameters"].get("start", 0)) - int(claimed.get("start", 0))
    at = posted.positions + moved
    expected = verifying.rows_at(made.key, at)
    bound = verifying.Bound.of(made.key, at).around(at, expected)
    if table.dtype in ("float16", "bfloat16"):
        bound = bound + verifying._ulps(expected, table.dtype)
    with np.errstate(invalid="ignore"):
        excess = np.nan_to_num(np.abs(posted.take(slice(None)) - expected) - bound, nan=np.inf)
    return float(excess.max())


def diagnosed_as(
    answer: Mapping[str, Any], mistake: str, table: Table, claimed: Mapping[str, Any]
) -> dict[str, Any]:
    """The diagnosis named ``mistake``; where it names parameters, they reproduce ``table``."""
    assert answer["match"] not in MATCHED, answer["match"]
    names = [each["mistake"] for each in answer["diagnoses"]]
    assert mistake in names, f"diagnosed {names}: {answer['diagnoses']}"
    found: dict[str, Any] = answer["diagnoses"][names.index(mistake)]
    if found["by"] == "parameters":
        assert reproduced(found, table, claimed) <= 0, found["parameters"]
    return found


# ---------------------------------------------------------------------------------------------
# rotary: transformers' modules, built from configs
# ---------------------------------------------------------------------------------------------

Rope = rotary_cases.Rope


@dataclass(frozen=True)
class Made:
    """How the library is run: ids cast (``ids``), frequencies cast (``frequencies``),
    the table stored in ``stored``, rows moved by ``shift`` positions."""

    ids: str | None = None
    frequencies: str | None = None
    stored: str | None = None
    shift: int = 0


def rotary_table(
    case: Rope, positions: I64 | None = None, interleaved: bool = False, made: Made = Made()
) -> Table:
    """cos and sin of transformers' rotary module (as test_rotary's ``hf_table``) at
    ``positions`` (rows 0 .. ROWS - 1), the sequence's last position appended as there."""
    torch = lib("torch")
    module = rotary_cases.hf_rotary(case)
    at = np.arange(ROWS, dtype=np.int64) if positions is None else positions
    ids = torch.from_numpy(np.append(at + made.shift, case.length - 1))
    if made.ids is not None:  # position_ids cast to a narrow dtype, back to integers
        ids = ids.to(getattr(torch, made.ids)).to(torch.int64)
    if made.frequencies is not None:
        module.inv_freq = module.inv_freq.to(getattr(torch, made.frequencies)).float()
    with torch.no_grad():
        cos, sin = module(torch.zeros(1), ids[None])
    cos, sin = cos[0, :-1], sin[0, :-1]
    if made.stored is not None:
        cos, sin = (part.to(getattr(torch, made.stored)).float() for part in (cos, sin))
    cos, sin = cos.numpy(), sin.numpy()
    if interleaved:  # each pair's entries side by side: (2k, 2k + 1) for (k, k + d/2)
        half = cos.shape[1] // 2
        cos, sin = np.repeat(cos[:, :half], 2, axis=1), np.repeat(sin[:, :half], 2, axis=1)
    return pair_table(cos, sin, positions=positions)


def rotary_rows(case: Rope) -> Rope:
    return dataclasses.replace(case, max_len=ROWS)


ROTARY_CASES: Final = [rotary_rows(case) for case in rotary_cases.CASES]


@pytest.mark.parametrize("convention", ["half", "interleaved"])
@pytest.mark.parametrize("case", ROTARY_CASES, ids=lambda case: case.id)
def test_rotary_library_tables_verify(case: Rope, convention: str) -> None:
    table = rotary_table(case, interleaved=convention == "interleaved")
    answer = verified("rotary", case.query(convention=convention), table)
    assert answer["match"] in MATCHED, answer["bands"]


LLAMA2: Final = Rope(128, 10000.0, max_len=ROWS)
LLAMA31: Final = Rope(
    128, 500000.0, "llama3", rotary_cases.LLAMA31, mpe=131072, legacy=True, max_len=ROWS
)
LINEAR: Final = Rope(128, 10000.0, "linear", {"factor": 4.0}, max_len=ROWS)
YARN: Final = rotary_rows(rotary_cases.YARN)
NEOX: Final = Rope(128, 10000.0, partial=0.5, model="gpt_neox", max_len=ROWS)
FAR: Final = np.arange(2**24, 2**24 + ROWS, dtype=np.int64)  # float32 rounds odd ones


@dataclass(frozen=True)
class Injected:
    """A mistake injected: the table made by ``made`` from ``case`` (``transform``: then
    changed), claimed as ``claimed``; the diagnosis expected."""

    name: str
    mistake: str
    case: Rope
    claimed: Mapping[str, Any]
    made: Made = Made()
    transform: Callable[[Table], Table] | None = None
    positions: I64 | None = None
    dtype: str = "float32"
    expect: Mapping[str, Any] = field(default_factory=dict)


def _swap(table: Table) -> Table:
    half = table.rows.shape[1] // 2
    return table.replace(rows=np.concatenate([table.rows[:, half:], table.rows[:, :half]], 1))


ROTARY_MISTAKES: Final = [
    Injected("swapped", "swapped-cos-sin", LLAMA2, LLAMA2.query(), transform=_swap),
    Injected(
        "half-as-interleaved",
        "pairing",
        LLAMA2,
        LLAMA2.query(convention="interleaved"),
        expect={"convention": "half"},
    ),
    Injected(
        "shifted-1", "rows-shifted", LLAMA2, LLAMA2.query(), Made(shift=1), expect={"start": 1}
    ),
    Injected(
        "shifted-2", "rows-shifted", LLAMA2, LLAMA2.query(), Made(shift=2), expect={"start": 2}
    ),
    Injected("base", "base", LLAMA2, LLAMA2.query(base=500000.0), expect={"base": 10000}),
    Injected(
        "scaling-missing",
        "scaling",
        LLAMA2,
        LLAMA2.query(scaling="linear", factor=4.0),
        expect={"scaling": "none"},
    ),
    Injected(
        "linear-applied",
        "scaling",
        LINEAR,
        LLAMA2.query(),
        expect={"scaling": "linear", "factor": 4},
    ),
    Injected(
        "llama3-applied",
        "scaling",
        LLAMA31,
        LLAMA31.query(
            scaling="none",
            factor=None,
            low_freq_factor=None,
            high_freq_factor=None,
            original_max_position_embeddings=None,
        ),
        expect={"scaling": "llama3", "factor": 8},
    ),
    Injected(
        "yarn-applied",
        "scaling",
        YARN,
        YARN.query(
            scaling="none",
            factor=None,
            original_max_position_embeddings=None,
            max_position_embeddings=None,
        ),
        expect={"scaling": "yarn", "factor": 4},
    ),
    Injected("head-dim", "width", Rope(64, 10000.0, max_len=ROWS), LLAMA2.query()),
    Injected("partial", "width", NEOX, LLAMA2.query()),
    Injected("bf16-positions", "bf16-positions", LLAMA2, LLAMA2.query(), Made(ids="bfloat16")),
    Injected(
        "fp16-positions",
        "fp16-positions",
        LLAMA2,
        LLAMA2.query(max_len=4 * ROWS),
        Made(ids="float16"),
        positions=np.arange(4 * ROWS, dtype=np.int64),  # float16 holds integers to 2048
    ),
    Injected("bf16-table", "bf16-table", LLAMA2, LLAMA2.query(), Made(stored="bfloat16")),
    Injected("fp16-table", "fp16-table", LLAMA2, LLAMA2.query(), Made(stored="float16")),
    Injected(
        "bf16-frequencies", "bf16-frequencies", LLAMA2, LLAMA2.query(), Made(frequencies="bfloat16")
    ),
]


def _cases(injected: list[Injected] | list[Single]) -> list[Any]:
    return [pytest.param(each, id=each.name) for each in injected]


def _drop_none(parameters: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in parameters.items() if value is not None}


def check_injected(family: str, table: Table, each: Injected) -> None:
    claimed = _drop_none(each.claimed)
    answer = verified(family, claimed, table)
    found = diagnosed_as(answer, each.mistake, table, claimed)
    for name, value in each.expect.items():
        assert found["parameters"].get(name) == value, found


@pytest.mark.parametrize("each", _cases(ROTARY_MISTAKES))
def test_rotary_mistakes_are_diagnosed(each: Injected) -> None:
    table = rotary_table(each.case, each.positions, made=each.made)
    if each.transform is not None:
        table = each.transform(table)
    check_injected("rotary", table.replace(dtype=each.dtype), each)


def test_rotary_table_stored_in_bfloat16_matches_as_bfloat16() -> None:
    table = rotary_table(LLAMA2, made=Made(stored="bfloat16")).replace(dtype="bfloat16")
    assert verified("rotary", LLAMA2.query(), table)["match"] == "bfloat16"


# ---------------------------------------------------------------------------------------------
# sinusoidal: each preset's library (test_libraries' builders, at ROWS rows)
# ---------------------------------------------------------------------------------------------

D_MODEL: Final = 64


def sinusoidal_library(preset: str, rows: int = ROWS, d: int = D_MODEL) -> NDArray[np.float32]:
    """The preset's library table, rows 0 .. rows - 1 (row r: position id r)."""
    torch = lib("torch")
    if preset == "vaswani":
        out = hf("xlm").create_sinusoidal_embeddings(rows, d, torch.empty(rows, d))
        return np.asarray(out.numpy())
    if preset == "pytorch-tutorial":
        return reference.pytorch_tutorial(rows, d)
    if preset == "tf-tutorial":
        return np.asarray(reference.tf_tutorial(rows, d, None), np.float32)
    if preset == "tensor2tensor":
        return reference.tensor2tensor(rows, d, 1.0, 1.0e4, 0, None)
    if preset == "fairseq":
        module = hf("m2m_100").M2M100SinusoidalPositionalEmbedding(rows - 2, d, 1)
        return np.asarray(module.weights.numpy())
    if preset == "whisper":
        return np.asarray(hf("whisper").sinusoids(rows, d, 10000.0).numpy())
    if preset == "musicgen":
        return np.asarray(hf("musicgen").MusicgenSinusoidalPositionalEmbedding(rows, d).weights)
    if preset == "marian":
        embedding = hf("marian").MarianSinusoidalPositionalEmbedding(rows, d)
        return np.asarray(embedding.create_weight().numpy())
    if preset == "keras":
        keras = lib("keras")
        layer = lib("keras_hub").layers.SinePositionEncoding(max_wavelength=10000.0)
        return np.asarray(layer(keras.ops.zeros((1, rows, d))).detach().numpy()[0])
    if preset == "positional-encodings":
        module = lib("positional_encodings.torch_encodings").PositionalEncoding1D(d)
        return np.asarray(module(torch.zeros(1, rows, d))[0].numpy())
    mx = lib("mlx.core")
    module = lib("mlx.nn").SinusoidalPositionalEncoding(d)
    return np.array(module(mx.array(np.arange(rows, dtype=np.int32))))


def one_array(values: Any, **kw: Any) -> Table:
    return Table(np.asarray(values, np.float64), **kw)


SINUSOIDAL_PRESETS: Final = [
    "vaswani", "pytorch-tutorial", "tf-tutorial", "tensor2tensor", "fairseq", "whisper",
    "musicgen", "marian", "keras", "positional-encodings", "mlx",
]  # fmt: skip


@pytest.mark.parametrize("preset", SINUSOIDAL_PRESETS)
def test_sinusoidal_library_tables_verify(preset: str) -> None:
    table = one_array(sinusoidal_library(preset))
    answer = verified("sinusoidal", {"preset": preset, "d_model": D_MODEL}, table)
    assert answer["match"] in MATCHED, answer["bands"]


def _sinusoidal(preset: str, **claimed: Any) -> dict[str, Any]:
    return {"preset": preset, "d_model": D_MODEL, **claimed}


def _halves(table: Table) -> Table:
    return _swap(table)


def _pairs_swapped(table: Table) -> Table:
    rows = table.rows.copy()
    rows[:, 0::2], rows[:, 1::2] = table.rows[:, 1::2], table.rows[:, 0::2]
    return table.replace(rows=rows)


def _split(table: Table) -> Table:
    return table.replace(rows=np.concatenate([table.rows[:, 0::2], table.rows[:, 1::2]], 1))


def _scaled(table: Table) -> Table:
    return table.replace(rows=(table.rows * np.float32(math.sqrt(D_MODEL))).astype(np.float32))


def _stored(dtype: str) -> Callable[[Table], Table]:
    torch = lib("torch")

    def store(table: Table) -> Table:
        narrow = torch.from_numpy(table.rows.astype(np.float32)).to(getattr(torch, dtype))
        return table.replace(rows=narrow.float().numpy().astype(np.float64))

    return store


@dataclass(frozen=True)
class Single:
    """A mistake injected into a one-array table: the library's table of ``made`` (a
    preset, or a callable making it), changed by ``transform``, claimed as ``claimed``."""

    name: str
    mistake: str
    made: Callable[[], Table]
    claimed: Mapping[str, Any]
    family: str = "sinusoidal"
    transform: Callable[[Table], Table] | None = None
    expect: Mapping[str, Any] = field(default_factory=dict)


def _library(preset: str, rows: int = ROWS, d: int = D_MODEL) -> Callable[[], Table]:
    return lambda: one_array(sinusoidal_library(preset, rows, d))


def _fairseq_tokens(shift: int) -> Callable[[], Table]:
    """M2M100/NLLB's weights read from row ``shift`` on: the rows of tokens 0, 1, ...
    (fairseq's padding_idx + 1 = 2 is the first real token's row)."""
    return lambda: one_array(sinusoidal_library("fairseq", ROWS + shift)[shift:])


def _whisper(base: float) -> Callable[[], Table]:
    return lambda: one_array(hf("whisper").sinusoids(ROWS, D_MODEL, base).numpy())


def _positions_cast(dtype: Any, at: I64) -> Callable[[], Table]:
    """The vaswani formula (XLM's float64 numpy) at positions cast to ``dtype``."""

    def make() -> Table:
        torch = lib("torch")
        cast = torch.from_numpy(at).to(getattr(torch, dtype)).double().numpy()
        j = np.arange(D_MODEL)
        angles = cast[:, None] / np.power(10000, 2 * (j // 2) / D_MODEL)
        rows = np.where(j % 2 == 0, np.sin(angles), np.cos(angles)).astype(np.float32)
        return one_array(rows, positions=at)

    return make


SINUSOIDAL_MISTAKES: Final = [
    Single("flipped", "flipped-halves", _library("fairseq"), _sinusoidal("fairseq"),
           transform=_halves),
    Single("swapped-pairs", "swapped-cos-sin", _library("vaswani"), _sinusoidal("vaswani"),
           transform=_pairs_swapped),
    Single("split-as-interleaved", "pairing", _library("vaswani"), _sinusoidal("vaswani"),
           transform=_split, expect={"layout": "split"}),
    Single("fairseq-shifted-2", "rows-shifted", _fairseq_tokens(2), _sinusoidal("fairseq"),
           expect={"start": 2}),
    Single("fairseq-shifted-1", "rows-shifted", _fairseq_tokens(1), _sinusoidal("fairseq"),
           expect={"start": 1}),
    Single("whisper-base", "base", _whisper(10000.0), _sinusoidal("whisper", base=500.0),
           expect={"base": 10000}),
    Single("scale-applied", "scale", _library("vaswani"), _sinusoidal("vaswani"),
           transform=_scaled),
    Single("d-model", "width", _library("vaswani", d=32), _sinusoidal("vaswani"),
           expect={"d_model": 32}),
    Single("bf16-table", "bf16-table", _library("vaswani"), _sinusoidal("vaswani"),
           transform=_stored("bfloat16")),
    Single("fp16-table", "fp16-table", _library("vaswani"), _sinusoidal("vaswani"),
           transform=_stored("float16")),
    Single("float32-positions", "float32-positions", _positions_cast("float32", FAR),
           _sinusoidal("vaswani", max_len=2**24 + ROWS)),
    Single("bf16-positions", "bf16-positions",
           _positions_cast("bfloat16", np.arange(ROWS, dtype=np.int64)), _sinusoidal("vaswani")),
    Single("fp16-positions", "fp16-positions",
           _positions_cast("float16", np.arange(4 * ROWS, dtype=np.int64)),
           _sinusoidal("vaswani", max_len=4 * ROWS)),
]  # fmt: skip


def check_single(each: Single) -> None:
    table = each.made()
    if each.transform is not None:
        table = each.transform(table)
    answer = verified(each.family, each.claimed, table)
    found = diagnosed_as(answer, each.mistake, table, each.claimed)
    for name, value in each.expect.items():
        assert {**found["parameters"], **found["changes"]}.get(name) == value, found


@pytest.mark.parametrize("each", _cases(SINUSOIDAL_MISTAKES))
def test_sinusoidal_mistakes_are_diagnosed(each: Single) -> None:
    check_single(each)


# ---------------------------------------------------------------------------------------------
# timestep: each preset's library (test_timestep's references), timesteps 0 .. 999
# ---------------------------------------------------------------------------------------------

TIMESTEPS: Final = 1000


def timestep_library(
    dim: int, flip: bool, shift: float, t: NDArray[np.float64] | None = None, scale: float = 1.0
) -> NDArray[np.float32]:
    """diffusers' ``Timesteps(dim, flip_sin_to_cos, downscale_freq_shift, scale)`` at
    timesteps ``t`` (0 .. 999), given it in float32."""
    torch = lib("torch")
    module = lib("diffusers.models.embeddings").Timesteps(dim, flip, shift, scale=scale)
    steps = np.arange(TIMESTEPS, dtype=np.float64) if t is None else t
    with torch.no_grad():
        return np.asarray(module(torch.tensor(steps, dtype=torch.float32)).numpy())


def _timesteps() -> Any:
    torch = lib("torch")
    return torch.arange(TIMESTEPS, dtype=torch.float32)


def flux_sampler(stored: bool = False) -> NDArray[np.float32]:
    """FLUX.1's reference sampler's embedding of row r, σ = r / 1000 (test_timestep's
    ``flux_reference``: σ in bfloat16, ``1000 * σ`` in bfloat16, float32 angles), before its
    last cast to bfloat16 (``embedding.to(t)``), or after it where ``stored``."""
    received, embedding = timestep_cases.flux_reference(np.arange(TIMESTEPS) / TIMESTEPS)
    if stored:
        return np.asarray(embedding.float().numpy())
    wide = timestep_cases.bfl_timestep_embedding(received.float(), 256, time_factor=1.0)
    return np.asarray(wide.numpy())


def _through(preset: str, scale: float = 1.0) -> Callable[[], NDArray[np.float32]]:
    """``Timesteps(256, True, 0, scale)`` of the timesteps as the preset's pipeline hands
    them on (test_timestep's ``PIPELINES``)."""

    def make() -> NDArray[np.float32]:
        torch = lib("torch")
        passed = timestep_cases.PIPELINES[preset](_timesteps())
        module = lib("diffusers.models.embeddings").Timesteps(256, True, 0, scale=scale)
        with torch.no_grad():
            return np.asarray(module(passed).numpy())

    return make


TIMESTEP_TABLES: Final[dict[str, Callable[[], NDArray[np.float32]]]] = {
    "diffusers": lambda: timestep_library(256, False, 1.0),
    "unet": lambda: timestep_library(256, True, 0.0),
    "guided-diffusion": lambda: timestep_library(256, True, 0.0),
    "ddpm": lambda: timestep_library(256, False, 1.0),
    "flux": flux_sampler,
    "flux-diffusers": _through("flux-diffusers"),
    "wan": lambda: np.asarray(timestep_cases.wan_embedding(256, _timesteps()).float().numpy()),
    "qwen-image": _through("qwen-image", 1000.0),
    "auraflow": _through("auraflow", 1000.0),
}


@pytest.mark.parametrize("preset", list(TIMESTEP_TABLES))
def test_timestep_library_tables_verify(preset: str) -> None:
    table = one_array(TIMESTEP_TABLES[preset]())
    answer = verified("timestep", {"preset": preset, "dim": 256}, table)
    assert answer["match"] in MATCHED, answer["bands"]


def test_timestep_flux_sampler_s_bfloat16_embedding_matches_as_bfloat16() -> None:
    """The sampler's own answer, ``embedding.to(t)``: the flux table within bfloat16's
    rounding."""
    table = one_array(flux_sampler(stored=True), dtype="bfloat16")
    assert verified("timestep", {"preset": "flux", "dim": 256}, table)["match"] == "bfloat16"


def _unet(t: Callable[[], Any], rows: int = TIMESTEPS) -> Callable[[], Table]:
    """SD's ``Timesteps(256, True, 0)`` at the timesteps ``t()`` (a tensor) of rows
    0 .. rows - 1."""

    def make() -> Table:
        steps = np.asarray(t().double().numpy())
        at = np.arange(rows, dtype=np.int64)
        return one_array(timestep_library(256, True, 0.0, steps), positions=at)

    return make


def _cast_steps(dtype: str, rows: int) -> Callable[[], Any]:
    torch = lib("torch")
    return lambda: torch.arange(rows, dtype=torch.float32).to(getattr(torch, dtype)).float()


def _steps(offset: int) -> Callable[[], Any]:
    torch = lib("torch")
    return lambda: torch.arange(TIMESTEPS, dtype=torch.float32) + offset


def _max_period(period: int) -> Callable[[], Table]:
    def make() -> Table:
        function = lib("diffusers.models.embeddings").get_timestep_embedding
        made = function(_timesteps(), 256, True, 0, max_period=period)
        return one_array(made.numpy())

    return make


def _timestep(preset: str = "unet", **claimed: Any) -> dict[str, Any]:
    return {"preset": preset, "dim": 256, **claimed}


TIMESTEP_MISTAKES: Final = [
    Single("flip", "flipped-halves", lambda: one_array(timestep_library(256, False, 0.0)),
           _timestep(), "timestep"),
    Single("flip-parameter", "flipped-halves",
           lambda: one_array(timestep_library(256, False, 0.0)),
           _timestep("diffusers", flip_sin_to_cos=True, downscale_freq_shift=0), "timestep",
           expect={"flip_sin_to_cos": False}),
    Single("max-period", "base", _max_period(10000), _timestep("diffusers", max_period=1000,
           flip_sin_to_cos=True, downscale_freq_shift=0), "timestep",
           expect={"max_period": 10000}),
    Single("max-period-read", "base", _max_period(3000), _timestep("diffusers",
           flip_sin_to_cos=True, downscale_freq_shift=0), "timestep",
           expect={"max_period": 3000}),
    Single("bf16-timesteps", "bf16-timesteps", _unet(_cast_steps("bfloat16", TIMESTEPS)),
           _timestep(), "timestep"),
    Single("fp16-timesteps", "fp16-timesteps", _unet(_cast_steps("float16", 4096), 4096),
           _timestep(max_len=4096), "timestep"),  # float16 holds integers to 2048
    Single("bf16-table", "bf16-table", _unet(_timesteps), _timestep(), "timestep",
           transform=_stored("bfloat16")),
    Single("fp16-table", "fp16-table", _unet(_timesteps), _timestep(), "timestep",
           transform=_stored("float16")),
    Single("shifted-1", "rows-shifted", _unet(_steps(1)), _timestep(), "timestep",
           expect={"start": 1}),
]  # fmt: skip


@pytest.mark.parametrize("each", _cases(TIMESTEP_MISTAKES))
def test_timestep_mistakes_are_diagnosed(each: Single) -> None:
    check_single(each)


# ---------------------------------------------------------------------------------------------
# sincos-2d, sincos-3d: DiT's / MAE's numpy, diffusers' functions and modules, timm's
# ---------------------------------------------------------------------------------------------


def _mae(dim: int = 768, grid: int = 14) -> Table:
    return one_array(sincos_cases.as_float(sincos_cases.dit_2d(dim, grid)))


def _diffusers_grid(
    dim: int, grid: tuple[int, int], base: int, scale: float, extra: int
) -> tuple[dict[str, Any], Callable[[], Table]]:
    """test_sincos's ``DIFFUSERS_GRIDS`` case: its claim and get_2d_sincos_pos_embed's table."""
    claimed = {"height": grid[0], "width": grid[1], "dim": dim, "preset": "diffusers"}
    claimed |= {"base_size": base, "interpolation_scale": scale, "extra_tokens": extra}

    def make() -> Table:
        function = lib("diffusers.models.embeddings").get_2d_sincos_pos_embed
        made = function(
            dim, grid, cls_token=extra > 0, extra_tokens=extra, interpolation_scale=scale,
            base_size=base,
        )  # fmt: skip
        return one_array(sincos_cases.as_float(made))

    return claimed, make


@functools.cache
def sd3_patch_embed() -> Any:
    """SD3's ``PatchEmbed`` (its 192 x 192 grid of 1536: built once)."""
    return lib("diffusers.models.embeddings").PatchEmbed(
        height=128, width=128, patch_size=2, in_channels=16, embed_dim=1536,
        pos_embed_max_size=192,
    )  # fmt: skip


def _sd3(height: int, width: int) -> tuple[dict[str, Any], Callable[[], Table]]:
    def make() -> Table:
        torch = lib("torch")
        with torch.no_grad():
            cropped = sd3_patch_embed().cropped_pos_embed(2 * height, 2 * width)
        return one_array(cropped[0].numpy())

    return {"height": height, "width": width, "dim": 1536, "preset": "sd3"}, make


def _timm_claim(
    dim: int, grid: tuple[int, int], interleave: bool, reverse: bool, **more: Any
) -> dict[str, Any]:
    claimed = {"height": grid[0], "width": grid[1], "dim": dim, "preset": "timm"}
    return claimed | {"interleave_sin_cos": interleave, "reverse_coord": reverse} | more


def _timm(
    dim: int, grid: tuple[int, int], interleave: bool, reverse: bool, temperature: float = 1e4
) -> Table:
    made = sincos_cases.timm_sincos().build_sincos2d_pos_embed(
        list(grid), dim=dim, temperature=temperature, interleave_sin_cos=interleave,
        reverse_coord=reverse,
    )  # fmt: skip
    return one_array(made.numpy())


SINCOS_2D_TABLES: Final = [
    pytest.param({"height": 14, "width": 14, "dim": 768, "preset": "mae"}, _mae, id="mae"),
    pytest.param(
        {"height": 16, "width": 16, "dim": 1152, "preset": "mae", "extra_tokens": 1},
        lambda: one_array(sincos_cases.as_float(sincos_cases.dit_2d(1152, 16, True, 1))),
        id="mae-extra-token",
    ),
    *[
        pytest.param(*_diffusers_grid(*case), id=f"diffusers-{case[1][0]}x{case[1][1]}-{case[3]}")
        for case in sincos_cases.DIFFUSERS_GRIDS
        if case[1][0] * case[1][1] <= 4096
    ],
    *[pytest.param(*_sd3(*grid), id=f"sd3-{grid[0]}x{grid[1]}") for grid in ((64, 64), (32, 50))],
    *[
        pytest.param(
            _timm_claim(*case),
            functools.partial(_timm, *case),
            id=f"timm-{case[0]}-{case[1][0]}x{case[1][1]}-{case[2]}-{case[3]}",
        )
        for case in sincos_cases.TIMM_CASES
    ],
]


@pytest.mark.parametrize(("claimed", "made"), SINCOS_2D_TABLES)
def test_sincos_2d_library_tables_verify(
    claimed: dict[str, Any], made: Callable[[], Table]
) -> None:
    answer = verified("sincos-2d", claimed, made())
    assert answer["match"] in MATCHED, answer["bands"]


def _three_d(
    dim: int, frames: int, grid: tuple[int, int], spatial: float, temporal: float
) -> tuple[dict[str, Any], Callable[[], Table]]:
    """test_sincos's ``THREE_D`` case: get_3d_sincos_pos_embed's table and its claim."""
    height, width = grid
    claimed: dict[str, Any] = {"frames": frames, "height": height, "width": width, "dim": dim}
    claimed |= {"spatial_interpolation_scale": spatial, "temporal_interpolation_scale": temporal}

    def make() -> Table:
        function = lib("diffusers.models.embeddings").get_3d_sincos_pos_embed
        made = function(dim, (width, height), frames, spatial, temporal).flatten(0, 1)
        return one_array(sincos_cases.as_float(made))

    return claimed, make


def _cogvideox_patch_embed() -> Table:
    torch = lib("torch")
    module = lib("diffusers.models.embeddings").CogVideoXPatchEmbed(
        patch_size=2, in_channels=16, embed_dim=1920, text_embed_dim=32
    )
    return one_array(module.pos_embedding[0].to(torch.float32).numpy())


SINCOS_3D_TABLES: Final = [
    *[
        pytest.param(
            *_three_d(*case), id=f"diffusers-{case[0]}-{case[1]}x{case[2][0]}x{case[2][1]}"
        )
        for case in sincos_cases.THREE_D
        if case[0] < 1920  # CogVideoX's own: its patch embedding's below
    ],
    pytest.param(
        {"frames": 13, "height": 30, "width": 45, "dim": 1920, "preset": "cogvideox"},
        _cogvideox_patch_embed,
        id="cogvideox-patch-embed",
    ),
]


@pytest.mark.parametrize(("claimed", "made"), SINCOS_3D_TABLES)
def test_sincos_3d_library_tables_verify(
    claimed: dict[str, Any], made: Callable[[], Table]
) -> None:
    answer = verified("sincos-3d", claimed, made())
    assert answer["match"] in MATCHED, answer["bands"]


MAE: Final = {"height": 14, "width": 14, "dim": 768, "preset": "mae"}
TIMM: Final = (384, (16, 24))

SINCOS_2D_MISTAKES: Final = [
    Single("w-h-for-h-w", "flipped-halves", _mae, MAE, "sincos-2d", transform=_halves),
    Single("reverse-coord", "flipped-halves", lambda: _timm(*TIMM, False, True),
           _timm_claim(*TIMM, False, False), "sincos-2d", expect={"reverse_coord": True}),
    Single("interleave-sin-cos", "pairing", lambda: _timm(*TIMM, True, False),
           _timm_claim(*TIMM, False, False), "sincos-2d", expect={"interleave_sin_cos": True}),
    Single("temperature", "base", lambda: _timm(*TIMM, False, False),
           _timm_claim(*TIMM, False, False, temperature=1000.0), "sincos-2d",
           expect={"temperature": 10000}),
    Single("temperature-read", "base", lambda: _timm(*TIMM, False, False, 2000.0),
           _timm_claim(*TIMM, False, False), "sincos-2d", expect={"temperature": 2000}),
    Single("bf16-table", "bf16-table", _mae, MAE, "sincos-2d", transform=_stored("bfloat16")),
]  # fmt: skip


@pytest.mark.parametrize("each", _cases(SINCOS_2D_MISTAKES))
def test_sincos_2d_mistakes_are_diagnosed(each: Single) -> None:
    check_single(each)


# ---------------------------------------------------------------------------------------------
# rope-nd: diffusers' and the upstream repositories' modules (test_rope_nd's references)
# ---------------------------------------------------------------------------------------------


def pair(found: Any) -> Table:
    """cos and sin (tensors) side by side, as float32 (the models' ``.float()``)."""
    cos, sin = (np.asarray(part.float().contiguous().numpy()) for part in found[:2])
    return pair_table(cos, sin)


def flux_pos_embed(
    text: int, height: int, width: int, ids: str = "float32", theta: int = 10000
) -> Table:
    torch = lib("torch")
    module = lib("diffusers.models.transformers.transformer_flux").FluxPosEmbed(theta, [16, 56, 56])
    return pair(module(rope_nd_cases.flux_ids(text, height, width, getattr(torch, ids))))


def _flux2() -> Table:
    torch = lib("torch")
    pipeline = lib("diffusers.pipelines.flux2.pipeline_flux2").Flux2Pipeline
    module = lib("diffusers.models.transformers.transformer_flux2").Flux2PosEmbed(2000, [32] * 4)
    text = module(pipeline._prepare_text_ids(torch.zeros(1, 9, 4))[0])
    image = module(pipeline._prepare_latent_ids(torch.zeros(1, 4, 24, 40))[0])
    return pair((torch.cat([text[0], image[0]]), torch.cat([text[1], image[1]])))


def _hunyuan() -> Table:
    torch = lib("torch")
    module = lib("diffusers.models.transformers.transformer_hunyuan_video")
    rope = module.HunyuanVideoRotaryPosEmbed(2, 1, [16, 56, 56], 256.0)
    return pair(rope(torch.zeros(1, 1, 5, 2 * 30, 2 * 36)))


def _wan() -> Table:
    torch = lib("torch")
    rope = lib("diffusers.models.transformers.transformer_wan").WanRotaryPosEmbed(
        128, (1, 2, 2), 1024
    )
    cos, sin = rope(torch.zeros(1, 1, 6, 2 * 20, 2 * 32))
    return pair((cos[0, :, 0], sin[0, :, 0]))


def _qwen() -> Table:
    freqs = rope_nd_cases.qwen_freqs(31, 22, 6)
    return pair((freqs.real.repeat_interleave(2, dim=-1), freqs.imag.repeat_interleave(2, dim=-1)))


PER_AXIS: Final = {"grid": "3,7,9", "axes_dim": "8,24,32", "theta": 500}


def _per_axis(theta: float = 500.0) -> Table:
    torch = lib("torch")
    function = lib("diffusers.models.embeddings").get_1d_rotary_pos_embed
    grid = torch.stack(
        torch.meshgrid(torch.arange(3.0), torch.arange(7.0), torch.arange(9.0), indexing="ij")
    ).reshape(3, -1)
    parts = [function(d, grid[i], theta, use_real=True) for i, d in enumerate((8, 24, 32))]
    return pair((torch.cat([p[0] for p in parts], 1), torch.cat([p[1] for p in parts], 1)))


ROPE_ND_TABLES: Final = [
    pytest.param({"grid": "32,48", "preset": "flux", "text_tokens": 7},
                 lambda: flux_pos_embed(7, 32, 48), id="flux"),
    pytest.param({"grid": "300,4", "preset": "flux", "text_tokens": 7, "ids_dtype": "bfloat16"},
                 lambda: flux_pos_embed(7, 300, 4, "bfloat16"), id="flux-bf16-ids"),
    pytest.param({"grid": "40,24", "preset": "flux", "text_tokens": 5},
                 lambda: pair(rope_nd_cases.bfl_embed(rope_nd_cases.bfl_ids(5, 40, 24), True)),
                 id="flux-reference-2024"),
    pytest.param({"grid": "40,24", "preset": "flux-bfl", "text_tokens": 5},
                 lambda: pair(rope_nd_cases.bfl_embed(rope_nd_cases.bfl_ids(5, 40, 24), False)),
                 id="flux-bfl"),
    pytest.param({"grid": "24,40", "preset": "flux2", "text_tokens": 9}, _flux2, id="flux2"),
    pytest.param({"grid": "5,30,36", "preset": "hunyuan-video"}, _hunyuan, id="hunyuan-video"),
    pytest.param({"grid": "6,20,32", "preset": "wan"}, _wan, id="wan"),
    pytest.param({"grid": "31,22", "preset": "qwen-image", "text_tokens": 6}, _qwen,
                 id="qwen-image"),
    pytest.param({"grid": "13,30,45", "preset": "cogvideox"},
                 lambda: pair(rope_nd_cases.cogvideox_rope(13, 30, 45, False)), id="cogvideox"),
    pytest.param({"grid": "7,48,32", "preset": "cogvideox"},
                 lambda: pair(rope_nd_cases.cogvideox_rope(7, 48, 32, False)),
                 id="cogvideox-cropped"),
    pytest.param({"grid": "11,30,40", "preset": "cogvideox-1.5"},
                 lambda: pair(rope_nd_cases.cogvideox_rope(11, 30, 40, True)),
                 id="cogvideox-1.5"),
    pytest.param(PER_AXIS, _per_axis, id="diffusers"),
]  # fmt: skip


@pytest.mark.parametrize(("claimed", "made"), ROPE_ND_TABLES)
def test_rope_nd_library_tables_verify(claimed: dict[str, Any], made: Callable[[], Table]) -> None:
    answer = verified("rope-nd", claimed, made())
    assert answer["match"] in MATCHED, answer["bands"]


def _half_layout(table: Table) -> Table:
    """The interleaved table's pairs as (k, k + d/2): each array's even columns, twice."""
    half = table.rows.shape[1] // 2
    cos, sin = table.rows[:, :half:2], table.rows[:, half::2]
    return table.replace(rows=np.concatenate([cos, cos, sin, sin], axis=1))


FLUX: Final = {"grid": "32,48", "preset": "flux", "text_tokens": 7}

ROPE_ND_MISTAKES: Final = [
    Single("half-as-interleaved", "pairing", lambda: flux_pos_embed(7, 32, 48), FLUX, "rope-nd",
           transform=_half_layout, expect={"layout": "half"}),
    Single("theta", "base", _per_axis, {**PER_AXIS, "theta": 10000}, "rope-nd",
           expect={"theta": 500}),
    Single("theta-common", "base", lambda: _per_axis(10000.0), PER_AXIS, "rope-nd",
           expect={"theta": 10000}),
    Single("flux-theta", "base", lambda: flux_pos_embed(7, 32, 48, theta=3000), FLUX, "rope-nd",
           expect={"theta": 3000}),
    Single("bf16-ids", "bf16-ids", lambda: flux_pos_embed(7, 300, 4, "bfloat16"),
           {**FLUX, "grid": "300,4"}, "rope-nd"),
    Single("fp16-ids", "fp16-ids", lambda: flux_pos_embed(0, 4096, 2, "float16"),
           {**FLUX, "grid": "4096,2", "text_tokens": 0}, "rope-nd"),  # float16: exact to 2048
    Single("swapped", "swapped-cos-sin", lambda: flux_pos_embed(7, 32, 48), FLUX, "rope-nd",
           transform=_swap),
    Single("bf16-table", "bf16-table", lambda: flux_pos_embed(7, 32, 48), FLUX, "rope-nd",
           transform=_stored("bfloat16")),
]  # fmt: skip


@pytest.mark.parametrize("each", _cases(ROPE_ND_MISTAKES))
def test_rope_nd_mistakes_are_diagnosed(each: Single) -> None:
    check_single(each)


# ---------------------------------------------------------------------------------------------
# temperature: Llama 4's attention (test_llama4's forward pass)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("past", "count"), [(0, 1 << 15), ((1 << 24) - (1 << 15), 1 << 15)])
def test_temperature_llama4_forward_verifies(past: int, count: int) -> None:
    at = np.arange(past, past + count, dtype=np.int64)
    table = one_array(llama4_cases.forward(past, count)[:, None], positions=at)
    answer = verified("temperature", {"floor_scale": 8192, "attn_scale": 0.1}, table)
    assert answer["match"] in MATCHED, answer["bands"]


def test_temperature_other_floor_scale_is_not_llama4s() -> None:
    at = np.arange(1 << 15, dtype=np.int64)
    table = one_array(llama4_cases.forward(0, 1 << 15)[:, None], positions=at)
    answer = verified("temperature", {"floor_scale": 4096, "attn_scale": 0.1}, table)
    assert answer["match"] == "different", answer["bands"]


# ---------------------------------------------------------------------------------------------
# identify: models' tables, made by the libraries
# ---------------------------------------------------------------------------------------------


def makers() -> dict[str, verifying.Make]:
    return {name: maker(name) for name in DECLARED if DECLARED[name].family.audit is not None}


@dataclass(frozen=True)
class Known:
    """A model's table and what identify should name: its family and parameters."""

    name: str
    table: Callable[[], Table]
    family: str
    expect: Mapping[str, Any]
    matches: tuple[str, ...] = MATCHED


def _rotary(case: Rope, rows: int = ROWS) -> Callable[[], Table]:
    at = np.arange(rows, dtype=np.int64)
    return lambda: rotary_table(dataclasses.replace(case, max_len=rows), at)


QWEN25_YARN: Final = Rope(
    128, 1e6, "yarn", {"factor": 4.0, "original_max_position_embeddings": 32768}, mpe=131072
)
DEEPSEEK_YARN: Final = rotary_cases.CASES[11]  # factor 40, mscale 1, mscale_all_dim 0.8
PHI3_LONG: Final = rotary_cases.PHI3
GEMMA3_LOCAL: Final = Rope(256, 10000.0)
GEMMA3_GLOBAL: Final = Rope(256, 1e6, "linear", {"factor": 8.0})

KNOWN: Final = [
    Known("Llama 2", _rotary(LLAMA2), "rotary", {"base": 10000, "head_dim": 128,
                                                 "scaling": "none"}),
    Known("Llama 3.1 (2048 rows)", _rotary(LLAMA31), "rotary",
          {"base": 500000, "scaling": "llama3", "factor": 8}),
    Known("Llama 3.1 (16384 rows)", _rotary(LLAMA31, 16384), "rotary",
          {"base": 500000, "scaling": "llama3", "factor": 8,
           "original_max_position_embeddings": 8192}),
    Known("Qwen2", _rotary(Rope(128, 1e6)), "rotary", {"base": 1000000, "scaling": "none"}),
    Known("Qwen2.5 yarn factor 4 (2048 rows)", _rotary(QWEN25_YARN), "rotary",
          {"base": 1000000, "scaling": "yarn", "factor": 4}),
    Known("DeepSeek-V2-style yarn (8192 rows)", _rotary(DEEPSEEK_YARN, 8192), "rotary",
          {"base": 1000000, "scaling": "yarn", "factor": 40}),
    Known("Phi-3-mini-128k longrope (8192 rows)", _rotary(PHI3_LONG, 8192), "rotary",
          {"base": 10000, "scaling": "longrope"}),
    Known("Gemma 3 local", _rotary(GEMMA3_LOCAL), "rotary", {"base": 10000, "head_dim": 256,
                                                             "scaling": "none"}),
    Known("Gemma 3 global", _rotary(GEMMA3_GLOBAL), "rotary",
          {"base": 1000000, "head_dim": 256, "scaling": "linear", "factor": 8}),
    Known("NLLB (M2M100 weights)", _library("fairseq", d=1024), "sinusoidal",
          {"preset": "fairseq"}),
    Known("the paper's (XLM)", _library("vaswani", d=512), "sinusoidal", {"preset": "vaswani"}),
    Known("whisper", _library("whisper", d=512), "sinusoidal", {"preset": "whisper"}),
    Known("Timesteps 256, flip, shift 0, integer timesteps",
          lambda: one_array(timestep_library(256, True, 0.0)), "timestep",
          {"dim": 256, "preset": "unet"}),
    Known("SD timestep (Timesteps 320, flip, shift 0)",
          lambda: one_array(timestep_library(320, True, 0.0)), "timestep",
          {"dim": 320, "preset": "unet"}),
    Known("FLUX timestep (the reference sampler: σ·1000 through bfloat16)",
          lambda: one_array(flux_sampler()), "timestep", {"dim": 256, "preset": "flux"}),
    Known("FLUX timestep, the sampler's bfloat16 answer",
          lambda: one_array(flux_sampler(stored=True), dtype="bfloat16"), "timestep",
          {"dim": 256, "preset": "flux"}, ("bfloat16",)),
    Known("MAE ViT-B/16 grid (14 x 14, 768)", _mae, "sincos-2d",
          {"height": 14, "width": 14, "dim": 768}),
]  # fmt: skip


@pytest.fixture(scope="module")
def identified() -> Iterator[list[dict[str, Any]]]:
    yield IDENTIFIED
    if IDENTIFIED:
        lines = [
            "| case | rows x width | top candidate | parameters | match | seconds |",
            "|---|---|---|---|---|---|",
        ]
        for each in IDENTIFIED:
            lines.append(
                f"| {each['case']} | {each['shape']} | {each['family']} | "
                f"{each['parameters']} | {each['match']} | {each['seconds']:.2f} |"
            )
        text = "\n".join(lines) + "\n"
        print("\n\nidentify on the libraries' tables\n\n" + text)
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text("# identify on the libraries' tables\n\n" + text)


@pytest.mark.parametrize(
    "known",
    [pytest.param(each, id=each.name) for each in KNOWN],
)
def test_identify_names_the_model(known: Known, identified: list[dict[str, Any]]) -> None:
    table = known.table()
    posted = table.posted()
    began = time.perf_counter()
    answer = identifying.identify(posted, makers(), table.named, 0)
    seconds = time.perf_counter() - began
    top = answer["candidates"][0] if answer["candidates"] else {}
    identified.append(
        {
            "case": known.name,
            "shape": f"{len(table.rows)} x {table.rows.shape[1]}",
            "family": top.get("family"),
            "parameters": top.get("parameters"),
            "match": top.get("match"),
            "seconds": seconds,
        }
    )
    assert top.get("family") == known.family, answer
    assert top["match"] in known.matches, top
    for name, value in known.expect.items():
        assert top["parameters"].get(name) == value, top["parameters"]


def test_rotary_positions_cast_to_float32_are_the_librarys_own_arithmetic() -> None:
    """transformers turns ``position_ids.float()``: a table made so past 2^24 is the library's
    (its bound, the device envelope, holds the cast), even against ``rounding=exact``: the
    float32-positions mistake is one only for families whose library keeps the positions
    whole (a sinusoidal preset's)."""
    query = LLAMA2.query(max_len=2**24 + ROWS, rounding="exact")
    table = rotary_table(LLAMA2, FAR)
    answer = verified("rotary", query, table)
    assert answer["match"] == "library", answer["bands"][-1]
