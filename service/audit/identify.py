"""A client's table with no claim: what can be read from the table itself, and the ``GET``s
that reproduce it, best first.

Turned pairs (cos and sin) give their frequencies: each pair's angle unwrapped along
consecutive rows, divided by the positions it turned over. Their ratio over the
high-frequency pairs, which no scaling moves, gives the base; the ratio of every pair to the
unscaled frequency of that base gives the scaling's profile (all one: none; all one factor:
linear; one at the high frequencies, ``1/factor`` at the low: llama3 or yarn; any other:
longrope's factors); the rows' magnitude gives the attention factor, and which entries repeat
gives the pairing. A table of one array is tried against every preset of the families whose
width it has (sinusoidal, timestep, a square sin-cos grid).

At most :data:`MAX_CANDIDATES` candidates are measured, each on the positions an audit would
sample (:func:`service.audit.bands.plan`, at most a few thousand rows); the best
:data:`VERIFIED` are then verified on every row (:func:`service.audit.verify.verify`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

import numpy as np

from service.audit import bands, verify
from service.audit.verify import Claim, Posted, Values
from service.encodings.registry import Key
from service.errors import InvalidParameter

MAX_CANDIDATES: Final = 64
VERIFIED: Final = 3
# rows of each position band a candidate is scored on, at most
PROBE_ROWS: Final = 32
# a score within this of the table: a candidate close enough that the simplest comes first
CLOSE: Final = 1e-4
# the bases of the models' configs (and the libraries' defaults)
USUAL_BASES: Final = frozenset(
    (1e4, 1e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 25e4, 75e4, 15e4, 8e6, 1e3, 500.0, 2.5e5)
)
# rows read to estimate frequencies, at most
ESTIMATE_ROWS: Final = 8192
SCALING_FIELDS: Final = (
    "factor",
    "original_max_position_embeddings",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
    "attention_factor",
    "low_freq_factor",
    "high_freq_factor",
    "short_factor",
    "long_factor",
    "truncate",
)
# the pretraining contexts tried for llama3 and yarn
CONTEXTS: Final = (2048, 4096, 8192, 16384, 32768)


def _pairs(rows: Values, convention: str) -> tuple[Values, Values] | None:
    """Each pair's cos and sin once, for a row of ``[cos | sin]`` in ``convention``; None
    where the table does not repeat its entries that way."""
    width = rows.shape[1] // 2
    if width % 2 or width < 2:
        return None
    cos, sin = rows[:, :width], rows[:, width:]
    if convention == "half":
        first, second = slice(0, width // 2), slice(width // 2, width)
    else:
        first, second = slice(0, width, 2), slice(1, width, 2)
    head = np.abs(cos[: min(len(cos), 64)])
    finite = head[np.isfinite(head)]
    scale = max(1e-30, float(finite.max())) if finite.size else 1.0
    if not np.allclose(cos[:, first], cos[:, second], rtol=0, atol=1e-3 * scale, equal_nan=True):
        return None
    return cos[:, first], sin[:, first]


def pairing(posted: Posted) -> str | None:
    """``half`` or ``interleaved``: how the posted ``[cos | sin]`` rows repeat each pair
    (half first where both hold, a table of one pair)."""
    head = posted.take(slice(0, 256))
    for convention in ("half", "interleaved"):
        if _pairs(head, convention) is not None:
            return convention
    return None


def frequencies(posted: Posted, convention: str) -> tuple[Values, float] | None:
    """Each pair's angle per position, and the attention factor (the rows' magnitude),
    from the longest run of consecutive positions at the start (at most
    :data:`ESTIMATE_ROWS`); None where there are not two such rows."""
    order = np.argsort(posted.positions, kind="stable")
    positions = posted.positions[order]
    run = 1
    # at most ESTIMATE_ROWS rows, and 2^22 entries: a wide table reads fewer
    limit = min(len(positions), ESTIMATE_ROWS, max(2, (1 << 22) // max(1, posted.width)))
    while run < limit and positions[run] == positions[run - 1] + 1:
        run += 1
    if run < 2:
        return None
    got = _pairs(posted.take(order[:run]), convention)
    if got is None:
        return None
    cos, sin = got
    if not (np.isfinite(cos).all() and np.isfinite(sin).all()):
        return None
    phase = np.unwrap(np.arctan2(sin, cos), axis=0)
    turned = (phase[-1] - phase[0]) / (run - 1)
    attention = float(np.median(np.hypot(cos, sin)))
    return np.abs(turned), attention


def _base_from(turned: Values, width: int) -> float | None:
    """The base of frequencies ``base^(-2k/width)``, from the ratio of the two highest
    (pairs 0 and 1, which the scalings that keep the high frequencies do not move, and
    linear scaling moves alike)."""
    if len(turned) < 2 or not (turned[:2] > 0).all():
        return None
    base = float((turned[0] / turned[1]) ** (width / 2))
    return base if math.isfinite(base) and base > 1 else None


def nice(value: float) -> list[float]:
    """``value`` and its roundings to 1, 2 and 3 significant digits, distinct, nearest first."""
    out: list[float] = []
    for digits in (1, 2, 3, 4):
        rounded = float(f"{value:.{digits - 1}e}")
        if rounded not in out:
            out.append(rounded)
    return sorted(out, key=lambda each: abs(each - value))


def offset_of(claim: Claim, posted: Posted) -> int | None:
    """How many positions the posted rows are off the claimed ones: the lowest-frequency
    pair's angle at the first row over its frequency (a rotary claim), else None."""
    if claim.family != "rotary":
        return None
    convention = str(getattr(claim.key, "convention", "half"))
    got = _pairs(posted.take(slice(0, 1)), convention)
    if got is None:
        return None
    cos, sin = got
    expected = frequencies(
        Posted(
            np.asarray(verify.rows_at(claim.key, np.arange(2)), np.float64),
            "float64",
            np.arange(2, dtype=np.int64),
        ),
        convention,
    )
    if expected is None or not np.isfinite(cos).all():
        return None
    lowest = float(expected[0][-1])
    angle = float(np.arctan2(sin[0, -1], cos[0, -1]))
    if lowest <= 0:
        return None
    return round(angle / lowest) - int(posted.positions[0])


def _profile(turned: Values, base: float) -> Values:
    width = 2 * len(turned)
    plain = base ** (-np.arange(0, width, 2) / width)
    ratio: Values = turned / plain
    return ratio


def _scalings(turned: Values, base: float, attention: float, context: int) -> list[dict[str, Any]]:
    """The scalings a frequency profile may be, as rotary parameters."""
    with np.errstate(all="ignore"):
        ratio = _profile(turned, base)
    if not (np.isfinite(ratio).all() and (ratio > 0).all()):
        return []  # frequencies of zero (a constant table): no scaling makes them
    high, low = float(np.median(ratio[: max(1, len(ratio) // 8)])), float(ratio[-1])
    out: list[dict[str, Any]] = []
    if np.allclose(ratio, 1.0, rtol=1e-3):
        return [{"scaling": "none"}]
    if np.allclose(ratio, ratio[0], rtol=1e-3):
        for factor in nice(1 / float(ratio[0]))[:2]:
            out.append({"scaling": "linear", "factor": factor})
        return out
    if abs(high - 1) < 1e-3 and low < 1:
        for factor in nice(1 / low)[:2]:
            for original in _contexts(ratio, base, factor):
                if original > 0:
                    out.append(
                        {
                            "scaling": "llama3",
                            "factor": factor,
                            "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0,
                            "original_max_position_embeddings": original,
                        }
                    )
                    yarn = {
                        "scaling": "yarn",
                        "factor": factor,
                        "original_max_position_embeddings": original,
                    }
                    out.append(yarn)
                    if abs(attention - (0.1 * math.log(factor) + 1)) > 1e-6:
                        # mscale and mscale_all_dim as DeepSeek's: the factor they make
                        out.append({**yarn, "attention_factor": float(f"{attention:.7g}")})
    factors = ",".join(f"{float(np.float32(1 / r)):.9g}" for r in ratio)
    out.append(
        {
            "scaling": "longrope",
            "short_factor": factors,
            "long_factor": factors,
            "original_max_position_embeddings": max(1, context // 2),
            "attention_factor": float(f"{attention:.7g}"),
        }
    )
    return out


def _contexts(ratio: Values, base: float, factor: float) -> list[int]:
    """The pretraining contexts a llama3 profile may have: read from a pair between its
    two wavelengths (its smoothing, with transformers' default factors 1 and 4: the
    wavelength times 1 + 3 * smooth, rounded to a power of two), then the usual ones."""
    width = 2 * len(ratio)
    wavelength = 2 * math.pi * base ** (np.arange(0, width, 2) / width)
    between = (ratio < 1 - 1e-4) & (ratio > 1 / factor + 1e-4)
    read: list[int] = []
    if between.any() and factor > 1:
        k = int(np.flatnonzero(between)[0])
        smooth = (float(ratio[k]) - 1 / factor) / (1 - 1 / factor)
        original = float(wavelength[k]) * (1 + 3 * smooth)
        read.append(2 ** round(math.log2(original)))
    return [*read, *(each for each in CONTEXTS if each not in read)]


def scalings_of(claim: Claim, posted: Posted) -> list[dict[str, Any]]:
    """The scalings the posted table's frequencies say, as changes to a rotary claim."""
    convention = str(getattr(claim.key, "convention", "half"))
    got = frequencies(posted, convention)
    base = getattr(claim.key, "base", None)
    if got is None or base is None:
        return []
    context = int(claim.parameters.get("max_len", len(posted.positions)))
    found = _scalings(got[0], float(base), got[1], context)
    cleared = dict.fromkeys(SCALING_FIELDS)
    return [cleared | each for each in found if each.get("scaling") != "none"]


def _rotary(posted: Posted, start: int, length: int) -> Iterable[tuple[str, dict[str, Any]]]:
    convention = pairing(posted)
    if convention is None:
        return
    got = frequencies(posted, convention)
    if got is None:
        return
    turned, attention = got
    width = 2 * len(turned)
    base = _base_from(turned, width)
    if base is None:
        return
    common = {"head_dim": width, "convention": convention, "max_len": length}
    if start:
        common["start"] = start
    read = nice(base)[:3]
    near = sorted(USUAL_BASES, key=lambda each: abs(math.log(each / base)))[:2]
    for each in [*read, *(b for b in near if b not in read)]:
        for scaling in _scalings(turned, each, attention, length):
            yield "rotary", {**common, "base": each, **scaling}


def _single(width: int, rows: int, start: int, length: int) -> Iterable[tuple[str, dict[str, Any]]]:
    """A table of one array: every preset of the families whose width it is."""
    from service.encodings.catalogue import PRESETS as SINUSOIDAL
    from service.encodings.timestep import PRESETS as TIMESTEP

    window = {"start": start} if start else {}
    for name in SINUSOIDAL:
        yield "sinusoidal", {"d_model": width, "preset": name, "max_len": length, **window}
    for name in TIMESTEP:
        yield "timestep", {"dim": width, "preset": name, "max_len": length, **window}
    side = math.isqrt(rows)
    if width % 4 == 0:
        for extra in (0, 1):
            side = math.isqrt(rows - extra)
            if side * side == rows - extra and side:
                for preset in ("mae", "diffusers", "timm"):
                    grid = {"height": side, "width": side, "dim": width, "preset": preset}
                    if extra:
                        grid["extra_tokens"] = extra
                    yield "sincos-2d", grid


def candidates(posted: Posted, start: int, named: int) -> list[tuple[str, dict[str, Any]]]:
    """The ``GET``s worth trying for the posted table (``named``: how many named arrays it
    was sent as), at most :data:`MAX_CANDIDATES`."""
    length = int(posted.positions.max()) + 1
    found: list[tuple[str, dict[str, Any]]] = []
    if named == 2:
        found.extend(_rotary(posted, start, length))
    else:
        found.extend(_single(posted.width, len(posted.positions), start, length))
    return found[:MAX_CANDIDATES]


def identify(
    posted: Posted, makers: Mapping[str, verify.Make], named: int, start: int = 0
) -> dict[str, Any]:
    """The candidates that reproduce the posted table, best first: each the ``GET`` (family
    and parameters), its largest difference and its bands; the nearest one and where it
    departs where none matches."""
    probe = _probe(posted)
    scored: list[tuple[float, str, dict[str, Any], Key]] = []
    tried = 0
    for family, parameters in candidates(posted, start, named):
        make = makers.get(family)
        if make is None:
            continue
        tried += 1
        try:
            key = make(parameters)
        except (InvalidParameter, ValueError, TypeError, ArithmeticError):
            continue
        if verify.width_of(key) != posted.width:
            continue
        try:
            score = _score(key, probe)
        except (InvalidParameter, ValueError, TypeError, ArithmeticError):
            continue
        scored.append((score if math.isfinite(score) else math.inf, family, parameters, key))
    # the nearest first; among those within CLOSE of the table, the simplest
    scored.sort(key=lambda each: (each[0] > CLOSE, complexity(each[2]), each[0]))
    answers: list[dict[str, Any]] = []
    for _, family, parameters, key in scored[:VERIFIED]:
        make = makers[family]
        # once one matches, the others are measured on the probe's rows alone (their
        # ``rows`` says how many): the answer is found, they are the runners-up
        matched = any(each["match"] in ("bitwise", "library") for each in answers)
        table = probe if matched else posted
        found = verify.verify(Claim(family, parameters, key, make), table, diagnosing=False)
        largest = max(
            (math.inf if band["max_difference"] is None else band["max_difference"])
            for band in found["bands"]
        )
        answers.append(
            {
                "family": family,
                "parameters": verify.said(parameters),
                "complexity": complexity(parameters),
                "match": found["match"],
                "rows": found["rows"],
                "max_error": largest if math.isfinite(largest) else None,
                "bands": found["bands"],
                "first_over": found["first_over"],
            }
        )
    rank = {"bitwise": 0, "library": 1, "float16": 2, "bfloat16": 3, "different": 4}
    answers.sort(
        key=lambda each: (
            rank[each["match"]],
            each.pop("complexity"),
            math.inf if each["max_error"] is None else each["max_error"],
        )
    )
    matched = any(each["match"] != "different" for each in answers)
    return {
        "matched": matched,
        "tried": tried,
        "candidates": answers,
        "read": _read(posted, named),
    }


def complexity(parameters: Mapping[str, Any]) -> int:
    """How much a candidate's parameters say beyond a model's usual ones: longrope's
    factors (read from the table, they make any frequencies) and an unusual base each
    count one, so that a named scaling and a usual base come first among equals."""
    longrope = parameters.get("scaling") == "longrope"
    base = parameters.get("base")
    unusual = base is not None and float(base) not in USUAL_BASES
    return int(longrope) + int(unusual)


def _probe(posted: Posted) -> Posted:
    """The rows candidates are scored on: in each position band, its first
    :data:`PROBE_HEAD` rows and a spread of :data:`PROBE_ROWS` of them."""
    order = np.argsort(posted.positions, kind="stable")
    positions = posted.positions[order]
    picked = []
    for band in bands.bands(int(positions[-1]) + 1):
        low, high = np.searchsorted(positions, [band.start, band.stop])
        if high > low:
            count = high - low
            picked.append(
                low + np.unique(np.linspace(0, count - 1, min(count, PROBE_ROWS)).astype(np.intp))
            )
    index = order[np.concatenate(picked)]
    return posted.at(index)


def _score(key: Key, probe: Posted) -> float:
    """The largest difference between the probe's rows and ``key``'s at their positions."""
    with np.errstate(invalid="ignore"):
        difference = np.abs(probe.take(slice(None)) - verify.rows_at(key, probe.positions))
    return float(np.nan_to_num(difference, nan=np.inf).max())


def _read(posted: Posted, named: int) -> dict[str, Any]:
    """What the table itself says: its rows and width, and for turned pairs the pairing,
    the base and the attention factor."""
    said: dict[str, Any] = {"rows": len(posted.positions), "width": posted.width}
    if named != 2:
        return said
    convention = pairing(posted)
    said["pairing"] = convention
    got = frequencies(posted, convention) if convention else None
    if got is not None:
        base = _base_from(got[0], 2 * len(got[0]))
        said["base"] = nice(base)[0] if base else None
        said["attention_factor"] = got[1]
    return said
