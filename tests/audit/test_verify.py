"""A client's table against a claim (:mod:`service.audit.verify`) and with none
(:mod:`service.audit.identify`): the match kinds, the bands, and each known mistake injected
into a table the service makes, diagnosed as that mistake with the parameters that make it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import pytest
from numpy.typing import NDArray

from service.audit import identify, paths, verify
from service.audit.verify import Claim, Posted
from service.encodings import engines, registry
from service.encodings.registry import Key
from service.routes import FAMILIES

DECLARED: Final = {each.family.name: each for each in FAMILIES}


def make(family: str) -> verify.Make:
    declared = DECLARED[family]

    def key(parameters: Mapping[str, Any]) -> Key:
        made: Key = declared.key(declared.query.model_validate(dict(parameters)))
        return made

    return key


MAKERS: Final = {name: make(name) for name in DECLARED if name not in ("alibi", "alibi-slopes")}


def claim(family: str, **parameters: Any) -> Claim:
    return Claim(family, parameters, MAKERS[family](parameters), MAKERS[family])


def rows(family: str, positions: NDArray[np.int64], **parameters: Any) -> NDArray[np.float64]:
    key = MAKERS[family](parameters)
    return np.asarray(registry.take(key, positions), np.float64)


def posted(table: NDArray[Any], start: int = 0, dtype: str = "float32") -> Posted:
    return Posted(
        np.asarray(table, np.float64), dtype, np.arange(start, start + len(table), dtype=np.int64)
    )


def mistakes(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {each["mistake"]: each for each in answer["diagnoses"]}


ROTARY: Final = {"head_dim": 16, "base": 10000.0, "max_len": 256}
LLAMA3: Final = {
    "head_dim": 32,
    "base": 500000.0,
    "scaling": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
    "max_len": 2048,
}
AT: Final = np.arange(256, dtype=np.int64)


def test_the_claimed_table_matches_bit_for_bit() -> None:
    answer = verify.verify(claim("rotary", **ROTARY), posted(rows("rotary", AT, **ROTARY)))
    assert answer["match"] == "bitwise"
    assert answer["first_over"] == {"1e-3": None, "1e-2": None, "1e-1": None}
    assert answer["first_wrong_way"] is None
    assert answer["diagnoses"] == []
    assert [band["start"] for band in answer["bands"]][:3] == [0, 1, 2]
    assert answer["bands"][-1]["stop"] == 256


def test_an_exact_float64_table_matches_within_the_library_bound() -> None:
    exact = rows("rotary", AT, **ROTARY, rounding="exact", dtype="float64")
    answer = verify.verify(claim("rotary", **ROTARY), posted(exact, dtype="float64"))
    assert answer["match"] == "library"
    assert answer["bands"][-1]["max_difference"] > 0


@pytest.mark.parametrize(
    ("stored", "match"), [("float16", "float16"), ("bfloat16", "bfloat16")], ids=str
)
def test_a_table_stored_narrow_matches_in_that_dtype(stored: str, match: str) -> None:
    table = rows("rotary", AT, **ROTARY).astype(np.float32)
    engines.stored(table, stored)  # type: ignore[arg-type]
    answer = verify.verify(claim("rotary", **ROTARY), posted(table))
    assert answer["match"] == match
    assert answer["diagnoses"][0]["mistake"] == f"{match[0]}{match[-2:]}-table".replace(
        "f16", "fp16"
    ).replace("b16", "bf16")


def test_a_table_of_another_width_is_different_and_diagnosed() -> None:
    table = rows("rotary", AT, **{**ROTARY, "head_dim": 8})
    answer = verify.verify(claim("rotary", **ROTARY), posted(table))
    assert answer["match"] == "different"
    assert answer["shape"] == {"posted_width": 16, "claimed_width": 32}
    made = mistakes(answer)["width"]["parameters"]
    assert made.get("partial_rotary_factor") == 0.5 or made["head_dim"] == 8
    assert np.array_equal(rows("rotary", AT, **made), table)


@pytest.mark.parametrize(
    ("changes", "mistake", "expected"),
    [
        ({"convention": "interleaved"}, "pairing", {"convention": "interleaved"}),
        ({"base": 500000.0}, "base", {"base": 500000}),
        ({"partial_rotary_factor": 0.5, "head_dim": 32}, "width", {"partial_rotary_factor": 0.5}),
    ],
    ids=["pairing", "base", "partial-rotary-factor"],
)
def test_a_rotary_mistake_is_diagnosed_with_the_get_that_makes_it(
    changes: dict[str, Any], mistake: str, expected: dict[str, Any]
) -> None:
    wrong = {**ROTARY, **changes}
    claimed = {**ROTARY, "head_dim": wrong["head_dim"]}
    answer = verify.verify(claim("rotary", **claimed), posted(rows("rotary", AT, **wrong)))
    assert answer["match"] == "different"
    found = mistakes(answer)[mistake]
    assert found["by"] == "parameters"
    assert expected.items() <= found["parameters"].items()
    # the GET it names makes the posted table
    again = rows("rotary", AT, **found["parameters"])
    assert np.array_equal(again, rows("rotary", AT, **wrong))


def test_swapped_cos_and_sin_are_diagnosed() -> None:
    table = rows("rotary", AT, **ROTARY)
    half = table.shape[1] // 2
    swapped = np.concatenate([table[:, half:], table[:, :half]], axis=1)
    found = mistakes(verify.verify(claim("rotary", **ROTARY), posted(swapped)))
    assert found["swapped-cos-sin"]["from_position"] == 0


def test_rows_shifted_are_diagnosed_with_the_start_that_makes_them() -> None:
    """fairseq's tables start at padding_idx + 1: a port that counts from 0 is 2 rows off."""
    table = rows("rotary", AT + 2, **ROTARY)
    found = mistakes(verify.verify(claim("rotary", **ROTARY), posted(table)))
    assert found["rows-shifted"]["parameters"]["start"] == 2
    assert found["rows-shifted"]["from_position"] == 0


def test_a_missing_llama3_scaling_is_diagnosed_from_where_it_matters() -> None:
    at = np.arange(2048, dtype=np.int64)
    plain = {k: LLAMA3[k] for k in ("head_dim", "base", "max_len")}
    answer = verify.verify(claim("rotary", **LLAMA3), posted(rows("rotary", at, **plain)))
    found = mistakes(answer)["scaling"]
    assert found["parameters"]["scaling"] == "none"
    assert found["from_position"] is not None
    assert answer["first_over"]["1e-1"] is not None


def test_a_scaling_applied_where_none_is_claimed_is_read_from_the_table() -> None:
    at = np.arange(2048, dtype=np.int64)
    plain = {k: LLAMA3[k] for k in ("head_dim", "base", "max_len")}
    answer = verify.verify(claim("rotary", **plain), posted(rows("rotary", at, **LLAMA3)))
    found = mistakes(answer)["scaling"]
    assert found["parameters"]["scaling"] == "llama3"
    assert found["parameters"]["factor"] == 8


def test_positions_cast_to_bfloat16_are_diagnosed_past_256() -> None:
    """(float32 positions are transformers' own arithmetic: the library table is theirs.)"""
    longer = {**ROTARY, "max_len": 512}
    key = MAKERS["rotary"](longer)
    at = np.arange(512, dtype=np.int64)
    path = {each.name: each for each in paths.paths_of(key)}["bf16-positions"]
    entries = path.values(key, at)
    pairs = entries.shape[1] // 2
    cos, sin = entries[:, :pairs], entries[:, pairs:]
    table = np.concatenate([cos, cos, sin, sin], axis=1)
    answer = verify.verify(claim("rotary", **longer), Posted(table, "float32", at))
    found = mistakes(answer)["bf16-positions"]
    assert found["from_position"] == 257  # bfloat16 holds every integer up to 256
    assert found["by"] == "the audit's bf16-positions path"


def test_an_interleaved_sinusoidal_table_with_sin_and_cos_swapped_is_diagnosed() -> None:
    at = np.arange(64, dtype=np.int64)
    table = rows("sinusoidal", at, d_model=8, max_len=64)
    swapped = table[:, [1, 0, 3, 2, 5, 4, 7, 6]]
    answer = verify.verify(claim("sinusoidal", d_model=8, max_len=64), posted(swapped))
    assert "swapped-cos-sin" in mistakes(answer)


def test_the_sqrt_d_model_scale_is_diagnosed() -> None:
    at = np.arange(64, dtype=np.int64)
    table = rows("sinusoidal", at, d_model=16, max_len=64) * 4.0
    found = mistakes(verify.verify(claim("sinusoidal", d_model=16, max_len=64), posted(table)))
    assert found["scale"]["by"] == "the rows times sqrt(d_model)"


def test_a_timestep_table_flipped_is_diagnosed_as_flip_sin_to_cos() -> None:
    at = np.arange(100, dtype=np.int64)
    table = rows("timestep", at, dim=32, max_len=100, preset="diffusers", flip_sin_to_cos=True)
    answer = verify.verify(
        claim("timestep", dim=32, max_len=100, preset="diffusers"), posted(table)
    )
    found = mistakes(answer)["flipped-halves"]
    assert found["parameters"]["flip_sin_to_cos"] is True


def test_non_finite_entries_are_data_and_located() -> None:
    table = rows("rotary", AT, **ROTARY)
    table[7, 3] = np.nan
    table[9, 0] = np.inf
    answer = verify.verify(claim("rotary", **ROTARY), posted(table))
    assert answer["match"] == "different"
    assert answer["non_finite"] == {"entries": 2, "first_positions": [7, 9]}
    assert answer["first_over"]["1e-3"] == 7
    band = next(band for band in answer["bands"] if band["start"] == 4)
    assert band["max_difference"] is None  # infinite: JSON has no number for it


def test_position_ids_place_the_rows() -> None:
    at = np.array([5, 1, 900, 3], dtype=np.int64)
    table = rows("rotary", at, **{**ROTARY, "max_len": 1000})
    answer = verify.verify(
        claim("rotary", **{**ROTARY, "max_len": 1000}), Posted(table, "float32", at)
    )
    assert answer["match"] == "bitwise"
    assert [band["rows"] for band in answer["bands"]] == [1, 1, 1, 1]


def test_identify_names_a_llama3_table() -> None:
    at = np.arange(2048, dtype=np.int64)
    answer = identify.identify(posted(rows("rotary", at, **LLAMA3)), MAKERS, named=2)
    best = answer["candidates"][0]
    assert answer["matched"]
    assert best["family"] == "rotary"
    assert best["match"] == "bitwise"
    assert {"scaling": "llama3", "factor": 8, "base": 500000}.items() <= best["parameters"].items()
    assert answer["read"]["pairing"] == "half"
    assert answer["tried"] <= identify.MAX_CANDIDATES


@pytest.mark.parametrize("preset", ["vaswani", "fairseq", "tensor2tensor", "whisper"])
def test_identify_names_a_sinusoidal_preset(preset: str) -> None:
    at = np.arange(64, dtype=np.int64)
    table = rows("sinusoidal", at, d_model=32, max_len=64, preset=preset)
    best = identify.identify(posted(table), MAKERS, named=1)["candidates"][0]
    assert best["match"] == "bitwise"
    # the preset named makes the same table (two presets may)
    again = rows("sinusoidal", at, **best["parameters"])
    assert np.array_equal(again, table)


def test_identify_says_when_nothing_matches_and_names_the_nearest() -> None:
    noise = np.random.default_rng(0).uniform(-1, 1, (64, 32))
    answer = identify.identify(posted(noise), MAKERS, named=1)
    assert not answer["matched"]
    assert answer["candidates"]
    assert all(each["match"] == "different" for each in answer["candidates"])
    assert math.isfinite(answer["candidates"][0]["max_error"])


def test_every_mistake_has_a_name_of_its_own() -> None:
    names = [mistake.name for mistake in verify.MISTAKES]
    assert len(names) == len(set(names))
