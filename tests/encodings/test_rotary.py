"""The rotary family (RoPE): properties of its tables and of the rotation kernel
(hypothesis, a fixed seed), and ``rounding=exact`` against an independent mpmath oracle of
each scaling's formula (written here from transformers' ``modeling_rope_utils.py``, not
taken from the service)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from service.encodings import registry, rotation, scalings
from service.encodings.registry import DTYPES, ROUNDINGS, DType, Rounding
from service.encodings.rotary import CONVENTIONS, Convention, RotaryKey
from service.encodings.rotation import Rotation
from service.errors import InvalidInput, InvalidParameter
from service.settings import POSITION_CEILING
from tests.support import examples

mpmath.mp.prec = 200

FAST = settings(max_examples=examples(40), deadline=None, derandomize=True)
F64_FEW_ULP = 2.0**-51  # a few float64 ulp of values in [0.5, 1)


def make_key(
    scaling: scalings.Scaling = "none",
    given: Mapping[str, Any] | None = None,
    rotary_dim: int = 8,
    max_len: int = 1,
    *,
    base: float = 10000.0,
    convention: Convention = "half",
    dtype: DType = "float64",
    rounding: Rounding = "exact",
    rotated: int | None = None,
) -> RotaryKey:
    params = scalings.resolve(scaling, dict(given or {}), rotary_dim, max_len, rotated)
    return RotaryKey(rotary_dim, base, convention, scaling, params, dtype, rounding)


@st.composite
def keys(
    draw: st.DrawFn,
    dtype: DType | None = None,
    rounding: Rounding | None = None,
    convention: Convention | None = None,
) -> RotaryKey:
    """Any scaling with plausible parameters, any base, convention, dtype and rounding."""
    r = 2 * draw(st.integers(2, 40))
    scaling: scalings.Scaling = draw(st.sampled_from(scalings.SCALINGS))
    factor = draw(st.floats(1.0, 64.0))
    original = draw(st.integers(16, 8192))
    given: dict[str, Any] = {
        "none": {},
        "linear": {"factor": draw(st.floats(0.25, 64.0))},
        "ntk": {"factor": factor},
        "dynamic": {"factor": factor, "max_position_embeddings": original},
        "yarn": {
            "factor": factor,
            "original_max_position_embeddings": original,
            "truncate": draw(st.booleans()),
        },
        "longrope": {"original_max_position_embeddings": original, "factor": factor},
        "llama3": {
            "factor": factor,
            "low_freq_factor": 1.0,
            "high_freq_factor": draw(st.floats(1.5, 8.0)),
            "original_max_position_embeddings": original,
        },
        "proportional": {"factor": draw(st.floats(0.25, 64.0))},
    }[scaling]
    if scaling == "longrope":
        for name in ("short_factor", "long_factor"):
            given[name] = draw(st.lists(st.floats(1.0, 8.0), min_size=r // 2, max_size=r // 2))
    pairing: Convention = draw(st.sampled_from(CONVENTIONS)) if convention is None else convention
    element: DType = draw(st.sampled_from(DTYPES)) if dtype is None else dtype
    how: Rounding = draw(st.sampled_from(ROUNDINGS)) if rounding is None else rounding
    return make_key(
        scaling,
        given,
        r,
        draw(st.integers(1, 20_000)),
        base=draw(st.floats(2.0, 1e6)),
        convention=pairing,
        dtype=element,
        rounding=how,
        rotated=draw(st.integers(0, r // 2)) if scaling == "proportional" else None,
    )


def halves(key: RotaryKey, rows: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    return rows[:, : key.rotary_dim], rows[:, key.rotary_dim :]


def pair_columns(key: RotaryKey) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The two head dimensions of each pair, in the key's convention."""
    k = np.arange(key.pairs)
    if key.convention == "half":
        return k, k + key.pairs
    return 2 * k, 2 * k + 1


def batch(shape: tuple[int, ...], seed: int, dtype: str = "float64") -> NDArray[Any]:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -- the rotation kernel -------------------------------------------------------------------


@FAST
@given(
    keys(dtype="float64", rounding="exact"),
    st.integers(0, 6),
    st.integers(1, 40),
    st.integers(0, POSITION_CEILING - 40),
    st.integers(0, 2**32 - 1),
)
def test_rotation_preserves_each_pairs_norm(
    key: RotaryKey, extra: int, length: int, offset: int, seed: int
) -> None:
    """|(a', b')| = |(a, b)| for every pair, times the attention factor (1 but for yarn and
    longrope, which multiply cos and sin by it); the dimensions past the rotary ones pass
    through unchanged."""
    x = batch((3, length, key.rotary_dim + extra), seed)
    rows = registry.rows(key, offset, offset + length)
    y = Rotation(key.convention)(x, [rows], None, in_place=False)
    assert y.dtype == x.dtype
    assert y.shape == x.shape
    a, b = pair_columns(key)
    before = x[..., a] ** 2 + x[..., b] ** 2
    after = y[..., a] ** 2 + y[..., b] ** 2
    np.testing.assert_allclose(after, key.attention**2 * before, rtol=1e-13, atol=1e-300)
    assert np.array_equal(y[..., key.rotary_dim :], x[..., key.rotary_dim :])


@FAST
@given(keys(dtype="float32", rounding="library"), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_rotation_preserves_norms_in_float32_too(key: RotaryKey, length: int, seed: int) -> None:
    x = batch((2, length, key.rotary_dim), seed, "float32")
    y = Rotation(key.convention)(x, [registry.rows(key, 0, length)], None, in_place=False)
    assert y.dtype == np.float32
    a, b = pair_columns(key)
    before = (x[..., a].astype(np.float64) ** 2 + x[..., b].astype(np.float64) ** 2) * (
        key.attention**2
    )
    after = y[..., a].astype(np.float64) ** 2 + y[..., b].astype(np.float64) ** 2
    np.testing.assert_allclose(after, before, rtol=2e-6, atol=1e-30)


@FAST
@given(
    keys(dtype="float64", rounding="exact"),
    st.integers(0, POSITION_CEILING // 2),
    st.integers(0, POSITION_CEILING // 2),
    st.integers(0, POSITION_CEILING // 2),
    st.integers(0, 2**32 - 1),
)
def test_a_rotated_dot_product_depends_only_on_the_distance(
    key: RotaryKey, m: int, n: int, shift: int, seed: int
) -> None:
    """<R(m) q, R(n) k> = <R(m + s) q, R(n + s) k> = <R(m - n) q, k> (m >= n), at any
    position: exact angles keep it within float64 rounding even near 2^31."""
    m, n = max(m, n), min(m, n)
    q, k = batch((2, key.rotary_dim), seed)
    x = np.stack([q, k, q, k, q, k])
    positions = np.array([m, n, m + shift, n + shift, m - n, 0], dtype=np.int64)
    y = Rotation(key.convention)(x, [registry.take(key, positions)], None, in_place=False)
    dots = [float(y[i] @ y[i + 1]) for i in (0, 2, 4)]
    scale = key.attention**2 * float(np.linalg.norm(q) * np.linalg.norm(k))
    assert abs(dots[0] - dots[1]) <= 1e-13 * scale
    assert abs(dots[0] - dots[2]) <= 1e-13 * scale


def test_the_dot_product_is_not_distance_only_without_rotation_by_the_right_rows() -> None:
    """The property above can fail: with the rows of other positions it does not hold."""
    key = make_key(rotary_dim=16)
    q, k = batch((2, 16), 1)
    x = np.stack([q, k, q, k])
    wrong = registry.take(key, np.array([10, 3, 20, 12]))  # distances 7 and 8
    y = Rotation("half")(x, [wrong], None, in_place=False)
    assert abs(float(y[0] @ y[1]) - float(y[2] @ y[3])) > 1e-6


def standard_permutation(rotary_dim: int, head_dim: int) -> NDArray[np.intp]:
    """``half[..., j] = interleaved[..., perm[j]]``: dimension i of the first half is 2i,
    of the second half 2i + 1 (the permutation of Meta's checkpoints to Hugging Face's)."""
    pairs = rotary_dim // 2
    first = 2 * np.arange(pairs)
    return np.concatenate([first, first + 1, np.arange(rotary_dim, head_dim)])


@FAST
@given(
    keys(convention="interleaved"),
    st.integers(0, 5),
    st.integers(1, 30),
    st.integers(0, 10**6),
    st.integers(0, 2**32 - 1),
)
def test_half_and_interleaved_agree_after_the_standard_permutation(
    inter: RotaryKey, extra: int, length: int, offset: int, seed: int
) -> None:
    half = RotaryKey(
        inter.rotary_dim,
        inter.base,
        "half",
        inter.scaling,
        inter.params,
        inter.dtype,
        inter.rounding,
    )
    r = inter.rotary_dim
    perm = standard_permutation(r, r)
    t_half = registry.rows(half, offset, offset + length)
    t_inter = registry.rows(inter, offset, offset + length)
    for h, i in zip(halves(half, t_half), halves(inter, t_inter), strict=True):
        assert np.array_equal(h, i[:, perm])
    head_dim = r + extra
    perm = standard_permutation(r, head_dim)
    x = batch((2, length, head_dim), seed, "float16" if inter.dtype == "float16" else inter.dtype)
    x = x.astype(t_half.dtype)
    y_inter = Rotation("interleaved")(x, [t_inter], None, in_place=False)
    y_half = Rotation("half")(np.ascontiguousarray(x[..., perm]), [t_half], None, in_place=False)
    assert np.array_equal(y_half, y_inter[..., perm])


def test_half_and_interleaved_differ_without_the_permutation() -> None:
    """The two conventions are not interchangeable (the trap the property guards)."""
    key = make_key(rotary_dim=8)
    rows = registry.rows(key, 0, 5)
    x = batch((5, 8), 2)
    half = Rotation("half")(x, [rows], None, in_place=False)
    inter_rows = registry.rows(make_key(rotary_dim=8, convention="interleaved"), 0, 5)
    inter = Rotation("interleaved")(x, [inter_rows], None, in_place=False)
    assert not np.allclose(half, inter)


def hf_rotation(x: NDArray[Any], rows: NDArray[Any], convention: str) -> NDArray[Any]:
    """Hugging Face's ``q * cos + rotate_half(q) * sin`` (half), or the same pairwise on
    (2i, 2i+1) (interleaved), written independently of the kernel."""
    r = rows.shape[-1] // 2
    cos, sin = rows[..., :r], rows[..., r:]
    rot = x[..., :r]
    if convention == "half":
        turned = np.concatenate([-rot[..., r // 2 :], rot[..., : r // 2]], axis=-1)
    else:
        turned = np.empty_like(rot)
        turned[..., 0::2], turned[..., 1::2] = -rot[..., 1::2], rot[..., 0::2]
    return np.concatenate([rot * cos + turned * sin, x[..., r:]], axis=-1)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_position_ids_per_sequence_across_chunks_of_heads(
    monkeypatch: pytest.MonkeyPatch, convention: Convention
) -> None:
    """(batch, L) position_ids for a (batch, heads, L, d) batch: each sequence's heads get
    its own positions, also when a chunk of heads spans two sequences."""
    key = make_key(rotary_dim=8, convention=convention, dtype="float32", rounding="library")
    x = batch((3, 5, 7, 10), 4, "float32")
    ids = np.random.default_rng(5).integers(0, 50, (3, 7))
    rows = registry.rows(key, 0, 50)
    expected = np.stack([hf_rotation(x[b], rows[ids[b]], convention) for b in range(3)]).astype(
        np.float32
    )
    whole = Rotation(convention)(x, [rows], ids.astype(np.intp), in_place=False)
    monkeypatch.setattr(rotation, "_CHUNK_ELEMENTS", 2 * 7 * 4)  # two heads a chunk
    chunked = Rotation(convention)(x, [rows], ids.astype(np.intp), in_place=False)
    assert np.array_equal(whole, expected)
    assert np.array_equal(chunked, expected)


def _blocks(rows: NDArray[Any], size: int) -> list[NDArray[Any]]:
    """A table's rows as the cache hands them over: consecutive blocks of ``size`` rows."""
    return [rows[i : i + size] for i in range(0, len(rows), size)]


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("positions", ["in-order", "shared", "per-sequence"])
def test_chunks_of_positions_and_table_blocks_change_no_bit(
    monkeypatch: pytest.MonkeyPatch, convention: Convention, dtype: str, positions: str
) -> None:
    """One head cut into chunks of positions (a single long sequence), the table's rows in
    blocks that are never joined, a partial rotary dimension, in place or not: the same
    bits as Hugging Face's formula in the table's dtype, rounded once to the batch's."""
    compute: DType = "float64" if dtype == "float64" else "float32"
    key = make_key(rotary_dim=8, convention=convention, dtype=compute, rounding="library")
    x = batch((2, 3, 11, 10), 6, dtype)
    rows = registry.rows(key, 0, 40)
    if positions == "in-order":
        table, index, gathered = _blocks(rows[:11], 4), None, rows[:11][None, None]
    elif positions == "shared":
        ids = np.random.default_rng(7).integers(0, 40, 11)
        table, index, gathered = _blocks(rows, 16), ids.astype(np.intp), rows[ids][None, None]
    else:
        ids = np.random.default_rng(8).integers(0, 40, (2, 11))
        table, index, gathered = _blocks(rows, 16), ids.astype(np.intp), rows[ids][:, None]
    expected = hf_rotation(x.astype(compute), gathered, convention).astype(dtype)
    monkeypatch.setattr(rotation, "_CHUNK_ELEMENTS", 3 * 4)  # three positions of one head
    copied = Rotation(convention)(x, table, index, in_place=False)
    assert np.array_equal(copied, expected)
    assert not np.array_equal(x, expected)  # not overwritten
    mine = x.copy()
    overwritten = Rotation(convention)(mine, table, index, in_place=True)
    assert overwritten is mine  # float16 too: no copy of the batch
    assert np.array_equal(overwritten, expected)


def test_a_big_endian_batch_is_answered_in_native_order() -> None:
    key = make_key(rotary_dim=8, dtype="float32", rounding="library")
    x = batch((3, 5, 8), 9, ">f4")
    rows = registry.rows(key, 0, 5)
    y = Rotation("half")(x, [rows], None, in_place=True)
    assert y.dtype == np.dtype("float32")
    assert np.array_equal(y, hf_rotation(x.astype(np.float32), rows, "half"))


@pytest.mark.parametrize(
    "where",
    [
        pytest.param((1, 2, 9, 3), id="rotated-part"),
        pytest.param((1, 0, 10, 9), id="passed-through-part"),
    ],
)
@pytest.mark.parametrize("in_place", [True, False], ids=["in-place", "copied"])
def test_nan_is_found_where_it_was_sent(
    monkeypatch: pytest.MonkeyPatch, where: tuple[int, ...], in_place: bool
) -> None:
    """Chunks are checked before they are written: a NaN is reported at its index in the
    batch as sent, in place or not, in a later chunk of positions too."""
    key = make_key(rotary_dim=8, dtype="float32", rounding="library")
    x = batch((2, 3, 12, 10), 10, "float16")
    x[where] = np.nan
    monkeypatch.setattr(rotation, "_CHUNK_ELEMENTS", 4 * 4)
    with pytest.raises(InvalidInput, match=re.escape(f"NaN or infinity, first at {where}")):
        Rotation("half")(x, [registry.rows(key, 0, 12)], None, in_place=in_place)


@pytest.mark.parametrize(
    ("dtype", "value", "scaling", "given", "blamed", "words"),
    [
        # a rotation by 45 degrees puts a pair's magnitude (60000 sqrt 2) in one member
        pytest.param(
            "float16",
            60000,
            "none",
            {},
            "embeddings",
            ["overflow float16", "float32"],
            id="float16-values-alone",
        ),
        pytest.param(
            "float32",
            3e38,
            "none",
            {},
            "embeddings",
            ["overflow float32", "float64"],
            id="float32-values-alone",
        ),
        # 30000 sqrt 2 fits float16; times yarn's derived attention factor (3.07) it does not
        pytest.param(
            "float16",
            30000,
            "yarn",
            {"factor": 1e9, "original_max_position_embeddings": 4},
            "scaling",
            ["attention factor 3.07", "overflow float16"],
            id="float16-derived-attention",
        ),
        pytest.param(
            "float16",
            1000,
            "yarn",
            {"factor": 2, "original_max_position_embeddings": 4, "attention_factor": 1000},
            "scaling",
            ["attention factor 1000 ", "overflow float16"],
            id="float16-given-attention",
        ),
    ],
)
def test_an_overflow_names_what_caused_it(
    dtype: str,
    value: float,
    scaling: scalings.Scaling,
    given: dict[str, Any],
    blamed: str,
    words: list[str],
) -> None:
    """The embeddings when their own magnitude overflows their dtype once rotated; the
    scaling when its attention factor is what takes them past it. Never attention_factor
    itself, which the kernel cannot know was sent."""
    compute: DType = "float64" if dtype == "float64" else "float32"
    key = make_key(scaling, given, 8, 4, dtype=compute, rounding="library")
    x = np.full((2, 4, 8), value, dtype)
    x[..., 4:] *= -1  # b = -a: at 45 degrees, a' = a cos + a sin = sqrt 2 a
    with pytest.raises(InvalidParameter) as caught:
        Rotation("half")(x, [registry.rows(key, 0, 4)], None, in_place=True)
    assert caught.value.name == blamed
    assert isinstance(caught.value, InvalidInput) == (blamed == "embeddings")
    for word in words:
        assert word in caught.value.detail, caught.value.detail


def test_a_derived_attention_factor_out_of_range_names_what_derived_it() -> None:
    """yarn's attention factor from mscale and mscale_all_dim, out of (0, 1000]: the
    refusal names mscale, which was sent, not attention_factor, which was not."""
    given = {"factor": 1e9, "original_max_position_embeddings": 4, "mscale": 1e6}
    with pytest.raises(InvalidParameter) as caught:
        scalings.resolve("yarn", {**given, "mscale_all_dim": 1}, 8, 4)
    assert caught.value.name == "mscale"
    assert "mscale_all_dim=1" in caught.value.detail
    assert "attention factor of 674514" in caught.value.detail
    with pytest.raises(InvalidParameter) as given_one:
        scalings.resolve("yarn", {**given, "attention_factor": 5000}, 8, 4)
    assert given_one.value.name == "attention_factor"


# -- fill and take -------------------------------------------------------------------------


@FAST
@given(keys(), st.integers(1, 200), st.integers(0, POSITION_CEILING - 200), st.data())
def test_take_of_scattered_positions_is_bit_identical_to_rows(
    key: RotaryKey, length: int, start: int, data: st.DataObject
) -> None:
    table = registry.rows(key, start, start + length)
    assert table.shape == (length, key.width)
    assert table.dtype == np.dtype(key.dtype)
    picks = np.array(data.draw(st.lists(st.integers(0, length - 1), min_size=1, max_size=50)))
    taken = registry.take(key, start + picks.astype(np.int64))
    assert taken.dtype == table.dtype
    assert np.array_equal(taken, table[picks])


@FAST
@given(keys(), st.lists(st.integers(1, 90), min_size=1, max_size=5), st.integers(0, 10**7))
def test_filling_in_pieces_equals_filling_at_once(
    key: RotaryKey, sizes: list[int], start: int
) -> None:
    whole = registry.rows(key, start, start + sum(sizes))
    pieces = [np.empty((n, key.width), key.dtype) for n in sizes]
    registry.fill(key, start, pieces)
    assert np.array_equal(np.concatenate(pieces), whole)
    one_by_one = []
    first = start
    for n in sizes:
        one_by_one.append(registry.rows(key, first, first + n))
        first += n
    assert np.array_equal(np.concatenate(one_by_one), whole)


@FAST
@given(keys(), st.integers(0, 10**6))
def test_each_pairs_value_is_in_both_of_its_columns(key: RotaryKey, start: int) -> None:
    rows = registry.rows(key, start, start + 7)
    a, b = pair_columns(key)
    for half in halves(key, rows):
        assert np.array_equal(half[:, a], half[:, b])


# -- the oracle ----------------------------------------------------------------------------


def oracle_frequencies(scaling: str, base: float, r: int, p: Mapping[str, Any]) -> list[mpmath.mpf]:
    """Each pair's inverse frequency in 200-bit arithmetic, from the formulas of
    transformers' ``modeling_rope_utils.py`` (and, for ntk, bloc97's base change)."""
    b = mpmath.mpf(base)
    if scaling == "ntk":
        b *= mpmath.mpf(p["factor"]) ** (mpmath.mpf(r) / (r - 2))
    if scaling == "dynamic" and p["seq_len"] > p["max_position_embeddings"]:
        f = mpmath.mpf(p["factor"])
        grow = f * p["seq_len"] / p["max_position_embeddings"] - (f - 1)
        b *= grow ** (mpmath.mpf(r) / (r - 2))
    inv = [b ** (-mpmath.mpf(2 * k) / r) for k in range(r // 2)]
    if scaling == "linear":
        return [w / mpmath.mpf(p["factor"]) for w in inv]
    if scaling == "yarn":
        return _yarn(inv, base, r, p)
    if scaling == "llama3":
        return _llama3(inv, p)
    if scaling == "longrope":
        return [w / mpmath.mpf(e) for w, e in zip(inv, p["ext_factors"], strict=True)]
    if scaling == "proportional":
        turning, factor = p["rotated"], mpmath.mpf(p["factor"])
        return [w / factor if k < turning else mpmath.mpf(0) for k, w in enumerate(inv)]
    return inv


def _yarn(inv: list[mpmath.mpf], base: float, r: int, p: Mapping[str, Any]) -> list[mpmath.mpf]:
    """``_compute_yarn_parameters``: the correction range (``find_correction_range``,
    truncated), a linear ramp over it between interpolation (w / factor) and extrapolation."""

    def dim(rotations: float) -> mpmath.mpf:
        ratio = mpmath.mpf(p["original_max_position_embeddings"]) / (rotations * 2 * mpmath.pi)
        return r * mpmath.log(ratio) / (2 * mpmath.log(base))

    assert p["truncate"]
    low = max(int(mpmath.floor(dim(p["beta_fast"]))), 0)
    high = min(int(mpmath.ceil(dim(p["beta_slow"]))), r - 1)
    span = mpmath.mpf(high - low) if high != low else mpmath.mpf("0.001")
    f = mpmath.mpf(p["factor"])
    out = []
    for k, w in enumerate(inv):
        ramp = min(max((k - low) / span, mpmath.mpf(0)), mpmath.mpf(1))
        extrapolation = 1 - ramp
        out.append(w / f * (1 - extrapolation) + w * extrapolation)
    return out


def _llama3(inv: list[mpmath.mpf], p: Mapping[str, Any]) -> list[mpmath.mpf]:
    """``_compute_llama3_parameters``: 1/factor past the low-frequency wavelength, unchanged
    below the high-frequency one, a smooth blend between."""
    f, original = mpmath.mpf(p["factor"]), mpmath.mpf(p["original_max_position_embeddings"])
    low, high = mpmath.mpf(p["low_freq_factor"]), mpmath.mpf(p["high_freq_factor"])
    out = []
    for w in inv:
        wavelength = 2 * mpmath.pi / w
        if wavelength < original / high:
            out.append(w)
        elif wavelength > original / low:
            out.append(w / f)
        else:
            smooth = (original / wavelength - low) / (high - low)
            out.append((1 - smooth) * w / f + smooth * w)
    return out


def oracle_attention(scaling: str, given: Mapping[str, Any]) -> mpmath.mpf:
    """What cos and sin are multiplied by: yarn's ``get_mscale`` (or its mscale ratio),
    longrope's ``sqrt(1 + ln(factor) / ln(original))``, else 1."""
    if given.get("attention_factor") is not None:
        return mpmath.mpf(given["attention_factor"])
    original = given.get("original_max_position_embeddings", 1)
    f = mpmath.mpf(given.get("factor") or given.get("max_position_embeddings", 1) / original)
    if scaling == "yarn":

        def mscale(m: float = 1.0) -> mpmath.mpf:
            return mpmath.mpf(1) if f <= 1 else mpmath.mpf("0.1") * m * mpmath.log(f) + 1

        if given.get("mscale") and given.get("mscale_all_dim"):
            return mscale(given["mscale"]) / mscale(given["mscale_all_dim"])
        return mscale()
    if scaling == "longrope":
        return mpmath.mpf(1) if f <= 1 else mpmath.sqrt(1 + mpmath.log(f) / mpmath.log(original))
    return mpmath.mpf(1)


def assert_exact(
    key: RotaryKey, given: Mapping[str, Any], start: int, rows: NDArray[Any], pairs: Any = None
) -> None:
    """Every entry (of ``pairs``, default all) of ``rows`` (positions ``start ..``) within
    half a float32 ulp, or a few float64 ulp, of the oracle's value."""
    inv = oracle_frequencies(key.scaling, key.base, key.rotary_dim, dict(key.params))
    attention = oracle_attention(key.scaling, given)
    cos_t, sin_t = halves(key, rows)
    a, b = pair_columns(key)
    for r, pos in enumerate(range(start, start + len(rows))):
        for k in range(key.pairs) if pairs is None else pairs:
            angle = pos * inv[k]
            for table, truth in ((cos_t, mpmath.cos(angle)), (sin_t, mpmath.sin(angle))):
                truth *= attention
                assert table[r, a[k]] == table[r, b[k]]
                error = float(abs(mpmath.mpf(float(table[r, a[k]])) - truth))
                if key.dtype == "float64":
                    bound = F64_FEW_ULP * max(1.0, float(attention))
                else:
                    half_ulp = float(np.spacing(np.float32(abs(float(truth))))) / 2
                    bound = half_ulp + 1e-15 * max(1.0, float(attention))
                assert error <= bound, (key.scaling, pos, k, float(truth), error, bound)


ACCURACY = [
    pytest.param("none", {}, 128, 10000.0, id="none"),
    pytest.param("linear", {"factor": 3.0}, 128, 10000.0, id="linear"),
    pytest.param(
        "yarn",
        {"factor": 4.0, "original_max_position_embeddings": 32768},
        128,
        1e6,
        id="yarn",
    ),
    pytest.param(
        "llama3",
        {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        128,
        500000.0,
        id="llama3",
    ),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "start", [pytest.param(100_000, id="100000"), pytest.param(POSITION_CEILING - 2, id="2^31-3")]
)
@pytest.mark.parametrize(("scaling", "given", "r", "base"), ACCURACY)
def test_exact_rounding_against_mpmath(
    scaling: scalings.Scaling,
    given: dict[str, Any],
    r: int,
    base: float,
    start: int,
    dtype: DType,
) -> None:
    key = make_key(scaling, given, r, start + 3, base=base, dtype=dtype)
    assert_exact(key, given, start, registry.rows(key, start, start + 3))


def test_the_oracles_scalings_change_the_frequencies_where_expected() -> None:
    """The oracle itself: llama3 leaves the fast pairs alone and divides the slow ones by
    the factor; yarn's ramp runs between the truncated correction dimensions."""
    none = oracle_frequencies("none", 500000.0, 128, {})
    llama3 = oracle_frequencies("llama3", 500000.0, 128, dict(make_key(*_LLAMA3).params))
    assert llama3[0] == none[0]
    assert llama3[-1] == none[-1] / 8
    assert none[32] / 8 < llama3[32] < none[32]  # a medium-frequency pair, blended
    assert llama3[28] == none[28]  # the last fast pair
    assert llama3[36] == none[36] / 8  # the first slow one
    yarn = make_key("yarn", {"factor": 4.0, "original_max_position_embeddings": 32768}, 128)
    assert scalings.yarn_range(128, 1e6, dict(yarn.params)) == (23, 40)
    inv = oracle_frequencies("yarn", 1e6, 128, dict(yarn.params))
    base = oracle_frequencies("none", 1e6, 128, {})
    assert inv[23] == base[23]
    assert inv[40] == base[40] / 4
    assert base[30] / 4 < inv[30] < base[30]


_LLAMA3: tuple[Any, ...] = (
    "llama3",
    {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    128,
)


# -- attention factor, base changes, longrope's factors -------------------------------------


_YARN = {"factor": 16.0, "original_max_position_embeddings": 4096}


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_the_attention_factor_multiplies_cos_and_sin(convention: Convention) -> None:
    """library: float32 cos and sin times the factor in float32, as transformers; exact:
    the exact values times the factor (within a float64 rounding)."""
    plain = {**_YARN, "attention_factor": 1.0}
    scaled = {**_YARN, "attention_factor": 1.75}
    for rounding in ("library", "exact"):
        dtype: DType = "float32" if rounding == "library" else "float64"
        one = make_key("yarn", plain, 32, convention=convention, dtype=dtype, rounding=rounding)
        more = make_key("yarn", scaled, 32, convention=convention, dtype=dtype, rounding=rounding)
        assert (one.attention, more.attention) == (1.0, 1.75)
        t_one, t_more = registry.rows(one, 0, 300), registry.rows(more, 0, 300)
        if rounding == "library":
            assert np.array_equal(t_more, t_one * np.float32(1.75))
        else:
            np.testing.assert_allclose(t_more, t_one * 1.75, rtol=2.0**-52, atol=0)


@pytest.mark.parametrize(
    ("scaling", "given", "attention"),
    [
        pytest.param("yarn", _YARN, 0.1 * math.log(16) + 1, id="yarn-mscale"),
        pytest.param(
            "yarn",
            {**_YARN, "mscale": 0.707, "mscale_all_dim": 1.0},
            (0.1 * 0.707 * math.log(16) + 1) / (0.1 * math.log(16) + 1),
            id="yarn-mscale-ratio",
        ),
        pytest.param(
            "yarn",
            {**_YARN, "mscale": 1.0, "mscale_all_dim": 1.0},
            1.0,
            id="yarn-deepseek-v3",
        ),
        pytest.param("yarn", {**_YARN, "factor": 1.0}, 1.0, id="yarn-factor-1"),
        pytest.param(
            "yarn",
            {"original_max_position_embeddings": 4096, "max_position_embeddings": 16384},
            0.1 * math.log(4) + 1,
            id="yarn-factor-derived",
        ),
        pytest.param(
            "longrope",
            {
                "original_max_position_embeddings": 4096,
                "max_position_embeddings": 131072,
                "short_factor": [1.0] * 8,
                "long_factor": [2.0] * 8,
            },
            math.sqrt(1 + math.log(32) / math.log(4096)),
            id="longrope-phi3",
        ),
        pytest.param(
            "longrope",
            {
                "original_max_position_embeddings": 4096,
                "factor": 1.0,
                "short_factor": [1.0] * 8,
                "long_factor": [2.0] * 8,
            },
            1.0,
            id="longrope-factor-1",
        ),
        pytest.param("linear", {"factor": 4.0}, 1.0, id="linear"),
        pytest.param("llama3", _LLAMA3[1], 1.0, id="llama3"),
    ],
)
def test_derived_attention_factors(
    scaling: scalings.Scaling, given: dict[str, Any], attention: float
) -> None:
    key = make_key(scaling, given, 16, 10)
    assert key.attention == pytest.approx(attention, rel=1e-15)
    assert key.attention == pytest.approx(float(oracle_attention(scaling, given)), rel=1e-15)
    rows = registry.rows(key, 0, 50)
    cos, sin = halves(key, rows)
    np.testing.assert_allclose(cos**2 + sin**2, attention**2, rtol=1e-14)


@pytest.mark.parametrize("rounding", ["library", "exact"])
def test_ntk_changes_the_base(rounding: Rounding) -> None:
    """Static NTK-aware scaling is the default table at base * factor^(r / (r - 2))."""
    r, factor, base = 32, 4.0, 10000.0
    ntk = make_key("ntk", {"factor": factor}, r, rounding=rounding)
    moved = make_key(base=base * factor ** (r / (r - 2)), rotary_dim=r, rounding=rounding)
    plain = make_key(rotary_dim=r, rounding=rounding)
    t_ntk = registry.rows(ntk, 0, 2000)
    np.testing.assert_allclose(t_ntk, registry.rows(moved, 0, 2000), rtol=0, atol=1e-6)
    assert not np.allclose(t_ntk, registry.rows(plain, 0, 2000), atol=1e-3)
    if rounding == "exact":
        assert_exact(ntk, {}, 123_456, registry.rows(ntk, 123_456, 123_458))


def test_dynamic_is_the_default_table_within_the_models_context() -> None:
    given = {"factor": 2.0, "max_position_embeddings": 4096}
    for rounding in ("library", "exact"):
        dynamic = make_key("dynamic", given, 64, 4096, rounding=rounding)
        plain = make_key(rotary_dim=64, rounding=rounding)
        assert np.array_equal(registry.rows(dynamic, 0, 4096), registry.rows(plain, 0, 4096))


def test_dynamic_past_the_models_context_changes_the_base() -> None:
    """Past max_position_embeddings the base grows with the sequence length seq_len:
    base * (factor * seq_len / mpe - (factor - 1))^(r / (r - 2)); seq_len defaults to the
    table's max_len."""
    given = {"factor": 2.0, "max_position_embeddings": 4096}
    by_length = make_key("dynamic", given, 64, 16384)
    by_seq_len = make_key("dynamic", {**given, "seq_len": 16384}, 64, 1)
    assert dict(by_length.params)["seq_len"] == 16384
    assert np.array_equal(registry.rows(by_length, 0, 100), registry.rows(by_seq_len, 0, 100))
    assert not np.allclose(
        registry.rows(by_length, 0, 100), registry.rows(make_key(rotary_dim=64), 0, 100)
    )
    assert_exact(by_length, given, 16380, registry.rows(by_length, 16380, 16384))
    longer = make_key("dynamic", given, 64, 65536)
    assert_exact(longer, given, 65_000, registry.rows(longer, 65_000, 65_002))


_LONGROPE: dict[str, Any] = {
    "original_max_position_embeddings": 4096,
    "max_position_embeddings": 131072,
    "short_factor": [1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0],
    "long_factor": [1.5, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0],
}


@pytest.mark.parametrize(
    ("max_len", "which"),
    [
        pytest.param(100, "short_factor", id="short"),
        pytest.param(4096, "short_factor", id="at-the-original-context"),
        pytest.param(4097, "long_factor", id="one-past"),
        pytest.param(131072, "long_factor", id="long"),
    ],
)
def test_longrope_picks_long_factors_past_the_original_context(max_len: int, which: str) -> None:
    key = make_key("longrope", _LONGROPE, 16, max_len)
    assert dict(key.params)["ext_factors"] == tuple(_LONGROPE[which])
    start = min(max_len, 4096) - 2
    assert_exact(key, _LONGROPE, start, registry.rows(key, start, start + 2))
    library = make_key("longrope", _LONGROPE, 16, max_len, dtype="float32", rounding="library")
    other = "long_factor" if which == "short_factor" else "short_factor"
    swapped = {**_LONGROPE, other: _LONGROPE[which]}  # both sets the chosen one
    same = make_key("longrope", swapped, 16, max_len, dtype="float32", rounding="library")
    assert np.array_equal(registry.rows(library, 0, 64), registry.rows(same, 0, 64))
