"""Conformance: ALiBi as the service serves it, against the code the models run.

- ``rounding=library`` against BLOOM (transformers ``models/bloom/modeling_bloom.py``):
  ``_get_alibi_slopes`` and ``build_alibi_tensor`` with an all-ones attention mask, for
  every head count 1..64 and a few larger ones, float32 and float16. The service computes
  each ``torch.pow`` in float64 and rounds once (the correctly rounded power of BLOOM's
  float32 base); torch's vectorized float32 pow is within an ulp of that, not always equal,
  so slopes are compared to 1 ulp and the ones that differ are counted and printed.
- ``rounding=exact`` against ``2^(-8k/c)`` (and times the distance) in mpmath at 50 digits:
  within half a float32 ulp.
- MPT (transformers ``models/mpt/modeling_mpt.py``, ``build_mpt_alibi_tensor``): its heads
  in the same order for every count (it builds non-powers of two another way), its bias is
  the service's causal bias of the last query, and after the causal mask every form gives
  the attention probabilities MPT's row-shifted bias gives.

Needs torch and transformers (the ``conformance`` extra); skipped without them unless
``CONFORMANCE_REQUIRED`` is set. Run with ``-s`` to see the counts.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from collections.abc import Iterator
from typing import Any, Final

import httpx
import mpmath
import numpy as np
import pytest
from numpy.typing import NDArray

from service.encodings import alibi
from tests.support import load

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

HEADS: Final = (*range(1, 65), 80, 96, 100, 128, 160, 256)
BIAS: Final = "/v1/biases/alibi"
mpmath.mp.dps = 50


@functools.cache
def lib(name: str) -> Any:
    return importlib.import_module(name)


def torch() -> Any:
    return lib("torch")


def bloom() -> Any:
    return lib("transformers.models.bloom.modeling_bloom")


def mpt() -> Any:
    return lib("transformers.models.mpt.modeling_mpt")


def get(service: httpx.Client, path: str, **params: Any) -> NDArray[Any]:
    response = service.get(path, params={**params, "format": "npy"})
    assert response.status_code == 200, response.text
    return np.asarray(load(response))


def ulps(ours: NDArray[Any], theirs: NDArray[Any]) -> NDArray[np.int64]:
    """How many values of the dtype apart, for finite values of one sign."""
    kind = {2: np.int16, 4: np.int32}[ours.dtype.itemsize]
    return np.abs(ours.view(kind).astype(np.int64) - theirs.view(kind).astype(np.int64))


@pytest.fixture(scope="module")
def summary() -> Iterator[dict[str, str]]:
    """What was measured, printed at the end of the module (seen with ``-s``)."""
    found: dict[str, str] = {}
    yield found
    print("\n\nALiBi conformance\n" + "\n".join(f"- {k}: {v}" for k, v in found.items()))


def test_library_slopes_are_blooms(service: httpx.Client, summary: dict[str, str]) -> None:
    cpu = torch().device("cpu")
    differ: list[str] = []
    total = 0
    for n in HEADS:
        ours = get(service, BIAS + "/slopes", num_heads=n)
        theirs = bloom()._get_alibi_slopes(n, cpu).numpy()
        assert ours.dtype == theirs.dtype == np.float32
        apart = ulps(ours, theirs)
        assert apart.max() <= 1, (n, np.flatnonzero(apart > 1))
        differ += [f"n={n} head {h}" for h in np.flatnonzero(apart)]
        total += n
    within = sum(1 for d in differ if int(d.split()[0][2:]) <= 64)
    summary["library slopes bit-equal to BLOOM's, 1..64 heads"] = f"{2080 - within} of 2080"
    summary["library slopes bit-equal to BLOOM's, all counts"] = f"{total - len(differ)} of {total}"
    summary["slopes 1 ulp from BLOOM's"] = ", ".join(differ[:6]) + (
        " ..." if len(differ) > 6 else ""
    )


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_library_bias_is_build_alibi_tensor(
    service: httpx.Client, dtype: str, summary: dict[str, str]
) -> None:
    """BLOOM's row (``m j`` for every key) is the service's bloom form of the last query,
    where no key is masked; bit for bit wherever the slopes are."""
    length, mismatched, compared = 300, 0, 0
    for n in HEADS:
        mask = torch().ones(1, length, dtype=torch().long)
        theirs = bloom().build_alibi_tensor(mask, n, getattr(torch(), dtype)).numpy()
        ours = get(
            service, BIAS, num_heads=n, max_len=length, start=length - 1, form="bloom", dtype=dtype
        )
        assert ours.shape == theirs.shape == (n, 1, length)
        slopes_equal = np.array_equal(
            get(service, BIAS + "/slopes", num_heads=n),
            bloom()._get_alibi_slopes(n, torch().device("cpu")).numpy(),
        )
        if slopes_equal:
            assert np.array_equal(ours.view(np.uint8), theirs.view(np.uint8)), n
        else:  # one slope an ulp off: its products an ulp or so off
            assert ulps(ours, theirs).max() <= 2
        mismatched += int(np.count_nonzero(ours != theirs))
        compared += ours.size
    summary[f"build_alibi_tensor entries bit-equal ({dtype}, 300 keys)"] = (
        f"{compared - mismatched} of {compared}"
    )


def exact_value(k: int, c: int, distance: int = 1) -> Any:
    return mpmath.power(2, mpmath.mpf(-8 * k) / c) * distance


def half_ulp_ratio(ours: NDArray[np.float32], truth: list[Any]) -> float:
    """The largest |ours - truth| / ulp(ours), in float32 ulps."""
    worst = 0.0
    for got, value in zip(ours.ravel(), truth, strict=True):
        ulp = float(np.spacing(np.float32(abs(got)))) if got else float(np.spacing(np.float32(0)))
        worst = max(worst, float(abs(mpmath.mpf(float(got)) - value) / ulp))
    return worst


def test_exact_slopes_are_rounded_once(service: httpx.Client, summary: dict[str, str]) -> None:
    worst = 0.0
    for n in HEADS:
        ours = get(service, BIAS + "/slopes", num_heads=n, rounding="exact")
        ks, cs = alibi.exponents(n)
        worst = max(
            worst,
            half_ulp_ratio(
                ours, [exact_value(int(k), int(c)) for k, c in zip(ks, cs, strict=True)]
            ),
        )
    assert worst <= 0.5
    summary["exact slopes, largest error"] = f"{worst:.3f} float32 ulp"


def test_exact_bias_is_rounded_once(service: httpx.Client, summary: dict[str, str]) -> None:
    """Every head of 12, 24 and 40: the last of 2^31 - 1 queries against the first 64 keys
    (symmetric: distances near 2^31)."""
    worst = 0.0
    top = 2**31 - 1
    for n in (12, 24, 40):
        far = get(
            service,
            BIAS,
            num_heads=n,
            max_len=top,
            key_len=64,
            start=top - 1,
            form="symmetric",
            rounding="exact",
        )
        ks, cs = alibi.exponents(n)
        truth = [
            -exact_value(int(ks[h]), int(cs[h]), abs((top - 1) + (64 - top) - j))
            for h in range(n)
            for j in range(64)
        ]
        worst = max(worst, half_ulp_ratio(far, truth))
    assert worst <= 0.5
    summary["exact biases at distances near 2^31, largest error"] = f"{worst:.3f} float32 ulp"


def softmax(scores: NDArray[np.float64]) -> NDArray[np.float64]:
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)  # type: ignore[no-any-return]


@pytest.mark.parametrize("n", [8, 12, 16, 20, 32, 48, 64])
def test_mpt_is_the_same_bias_row_shifted(
    service: httpx.Client, n: int, summary: dict[str, str]
) -> None:
    length = 256
    theirs = mpt().build_mpt_alibi_tensor(n, length).numpy()  # (n, 1, L): -m (L - 1 - j)
    assert theirs.shape == (n, 1, length)
    their_slopes = -theirs[:, 0, length - 2]  # the key one before the last query
    exact = get(service, BIAS + "/slopes", num_heads=n, rounding="exact")
    assert ulps(their_slopes, exact).max() <= 2, "MPT orders and values the heads as get_slopes"
    causal = get(service, BIAS, num_heads=n, max_len=length, rounding="exact")
    np.testing.assert_allclose(causal[:, -1, :], theirs[:, 0, :], rtol=2**-21, atol=0)
    scores = np.random.default_rng(n).standard_normal((n, length, length))
    future = np.triu(np.ones((length, length), dtype=bool), 1)
    shifted = np.where(future, -np.inf, theirs.astype(np.float64))
    reference = softmax(scores + shifted)
    for form in alibi.FORMS[:2]:
        ours = get(
            service, BIAS, num_heads=n, max_len=length, form=form, rounding="exact", dtype="float64"
        )
        assert np.array_equal(np.isinf(ours[0]), future)
        np.testing.assert_allclose(softmax(scores + ours), reference, rtol=0, atol=1e-5)
    equal = int(np.count_nonzero(their_slopes == exact))
    summary[f"MPT slopes equal to exact, {n} heads"] = f"{equal} of {n}"
