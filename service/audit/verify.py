"""A client's own table against the table a claim names (a family's ``GET`` parameters):
whether they match, and how (bit for bit, within the library rounding's bound, within a
narrow dtype's rounding), the difference by position band, and when they differ, which of
the known mistakes explains it.

Every posted row is compared, a chunk of rows at a time (:data:`CHUNK_ENTRIES` entries of
each table at once): verification costs O(entries) and holds a few numbers a row besides.

The bound of ``library`` is an entry's, around the claimed table (:class:`Bound`): twice
what separates the library's table from the exact one (for turned pairs each pair's
``device`` envelope, :mod:`.envelope`, which bounds a GPU's table and the CPU's alike; for
other families the library's largest error in the row, measured on the audit's sample of
each position band), plus 2^-22 of the row's magnitude. A table computed in float64, on a
GPU or by the library on a CPU is within it; a table with any mistake below is not, from the
position where the mistake matters. No exact table is computed but on that sample:
verifying costs about what computing the claimed table twice does.

A mistake is a record (:data:`MISTAKES`): the trials it makes from the claim (another
``GET``'s parameters, an audit path's arithmetic, rows moved or a transform of the claimed
rows); a trial is kept when the posted table is within the bound of it at every row, that is,
when correcting for it leaves no difference beyond the rounding. Trials are first tried on
the positions an audit samples (:func:`.bands.plan`), and only those that hold there are
checked on every row."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray

from service.audit import bands, envelope, paths
from service.encodings import registry
from service.encodings.registry import Key
from service.errors import InvalidParameter

Values = NDArray[np.float64]
Match = Literal["bitwise", "library", "float16", "bfloat16", "different"]
# the entries of each table computed at once
CHUNK_ENTRIES: Final = 1 << 20
# a row's bound beyond the library's own error: 2^-22 of its magnitude (four float32 ulps
# of an entry of 1, where the libraries' sin and cos are documented within two)
_RELATIVE: Final = 2.0**-22
# the names of a base, by family parameter
BASES: Final = ("base", "theta", "max_period", "temperature")
# the bases tried besides one read from the table (the libraries' and models' usual ones)
COMMON_BASES: Final = (1e4, 1e5, 5e5, 1e6, 5e6, 1e7, 1e8)
SHIFTS: Final = (-2, -1, 1, 2)
# how many distinct mistakes an answer lists, at most
MAX_DIAGNOSES: Final = 8


Index = slice | NDArray[np.intp] | NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Posted:
    """A client's table: its rows (one array, or the family's named arrays, each
    ``(rows, width)``, as they were sent: views of the body, in any float dtype), the element
    type it was sent in, and the position of each row. Its rows are read a chunk at a time
    as float64, the named arrays side by side (:meth:`take`): the table is never copied
    whole."""

    table: NDArray[Any] | tuple[NDArray[Any], ...]
    dtype: str
    positions: NDArray[np.int64]

    @property
    def parts(self) -> tuple[NDArray[Any], ...]:
        return self.table if isinstance(self.table, tuple) else (self.table,)

    @property
    def width(self) -> int:
        return sum(int(part.shape[1]) for part in self.parts)

    def take(self, index: Index) -> Values:
        """The rows at ``index``, as float64, the named arrays side by side."""
        parts = [np.asarray(part[index], np.float64) for part in self.parts]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    def at(self, index: Index) -> Posted:
        """The table of the rows at ``index`` (a probe of it)."""
        return Posted(self.take(index), self.dtype, self.positions[index])


Make = Callable[[Mapping[str, Any]], Key]


@dataclass(frozen=True, slots=True)
class Claim:
    """What the table should be: its family, the ``GET``'s parameters that name it, their
    key, and how another ``GET``'s parameters make a key (raising ``ValueError`` or the
    service's :class:`service.errors.InvalidParameter` for parameters it refuses)."""

    family: str
    parameters: Mapping[str, Any]
    key: Key
    make: Callable[[Mapping[str, Any]], Key]
    # where the claimed rows come from: the family's take, or a service's cache of them
    source: Source = registry.take


@dataclass(frozen=True, slots=True)
class Trial:
    """One way a mistake may have made the posted table: the ``GET``'s parameters that
    reproduce it (``changes`` over the claim's; ``None`` drops one), rows moved by ``shift``
    positions, or, where no parameter says it, the entries at positions (``values``: an
    audit path's or a transform of the claimed rows), said by ``note``."""

    changes: Mapping[str, Any] = field(default_factory=dict)
    shift: int = 0
    values: Callable[[NDArray[np.int64]], Values] | None = None
    note: str = ""
    # what a trial no GET makes changes (the preset's table with another theta)
    shows: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Mistake:
    """A known mistake: its name, what it is, and the trials it makes of a claim and a
    posted table."""

    name: str
    description: str
    trials: Callable[[Claim, Posted], Iterable[Trial]]


def width_of(key: Key) -> int:
    """The width of a posted row for ``key``: its named arrays side by side."""
    return int(key.width)


Source = Callable[[Key, NDArray[np.int64]], NDArray[Any]]


def rows_at(key: Key, positions: NDArray[np.int64], source: Source = registry.take) -> Values:
    """``key``'s rows at ``positions`` as float64, from ``source`` (a service's cache)."""
    return np.asarray(source(key, positions), np.float64)


def _chunks(count: int, width: int) -> Iterator[slice]:
    step = max(1, CHUNK_ENTRIES // max(1, width))
    for begin in range(0, count, step):
        yield slice(begin, min(count, begin + step))


@dataclass(frozen=True, slots=True)
class Bound:
    """The library's error at each entry of a claimed table (module docstring): for
    turned pairs each pair's device envelope; else the largest error measured, in each
    position band, on the positions an audit samples there (``starts``: the bands' first
    positions; ``measured``: their errors, an entry each). ``columns``: which entry each of
    a row's columns repeats (a rotary row holds each pair's cos and sin twice); None where
    that is not known, and each column then takes its row's largest."""

    key: Key
    columns: NDArray[np.intp] | None
    starts: NDArray[np.int64] | None = None
    measured: Values | None = None

    @classmethod
    def of(cls, key: Key, positions: NDArray[np.int64]) -> Bound:
        if paths.angles(key) is not None:
            # each pair its own envelope: a float32 library at 2^22 may turn its fastest
            # pairs anywhere, never its slow ones
            return cls(key, _columns(key, positions))
        spans = bands.bands(int(positions.max()) + 1)
        kept = [
            span for span in spans if ((positions >= span.start) & (positions < span.stop)).any()
        ]
        sampled = bands.plan(kept)
        exact = paths.exact(key, sampled)
        library = paths.entries(key, registry.take(paths.library_key(key), sampled))
        with np.errstate(invalid="ignore"):
            error = np.nan_to_num(np.abs(library - exact), nan=0.0, posinf=0.0)
        measured = np.zeros((len(kept), error.shape[1]))
        for row, span in enumerate(kept):
            inside = (sampled >= span.start) & (sampled < span.stop)
            measured[row] = error[inside].max(axis=0)
        starts = np.array([span.start for span in kept], dtype=np.int64)
        return cls(key, None, starts, measured)

    def entries(self, positions: NDArray[np.int64]) -> Values:
        """The library's error at each entry (as the audit compares them) at ``positions``."""
        if self.measured is None:
            error = envelope.bounds(self.key, positions)[0]
            width = paths.width(self.key)
            doubled = np.concatenate([error, error], axis=1)
            if doubled.shape[1] < width:  # an odd width's last column: zero
                padding = np.zeros((len(positions), width - doubled.shape[1]))
                doubled = np.concatenate([doubled, padding], axis=1)
            return doubled
        assert self.starts is not None
        band = np.searchsorted(self.starts, positions, side="right") - 1
        measured: Values = self.measured[np.maximum(band, 0)]
        return measured

    def around(self, positions: NDArray[np.int64], claimed: Values, rows: bool = True) -> Values:
        """The bound of each entry around ``claimed`` (rows, or entries as the audit
        compares them): twice the library's error, plus 2^-22 of the row's magnitude."""
        error = self.entries(positions)
        width = claimed.shape[1]
        if rows and self.columns is not None and len(self.columns) == width:
            error = error[:, self.columns]
        elif rows or self.measured is not None or error.shape[1] != width:
            # the row's largest: where no column's own is known, for another table's
            # width (a width mistake's), and for the measured families' (the libraries'
            # rounding differs from column to column)
            error = np.repeat(error.max(axis=1, initial=0.0)[:, None], width, 1)
        with np.errstate(invalid="ignore"):
            magnitude = np.maximum(1.0, np.fmax.reduce(np.abs(claimed), axis=1, initial=0.0))
        bound: Values = 2 * error + _RELATIVE * magnitude[:, None]
        return bound


def _columns(key: Key, positions: NDArray[np.int64]) -> NDArray[np.intp] | None:
    """Which entry (as the audit compares them) each column of ``key``'s row repeats, read
    from the claimed rows at a few of ``positions``; None where a column repeats none."""
    width = paths.width(key)
    if width == key.width:
        return np.arange(width, dtype=np.intp)
    distinct = np.unique(positions)
    probe = distinct[np.unique(np.linspace(0, len(distinct) - 1, 32).astype(np.intp))]
    rows = rows_at(key, probe)
    entries = paths.entries(key, rows)
    columns = np.empty(key.width, dtype=np.intp)
    for column in range(key.width):
        same = np.flatnonzero((entries == rows[:, column : column + 1]).all(axis=0))
        if not len(same):
            return None
        columns[column] = same[0]
    return columns


def _ulps(values: Values, dtype: str) -> Values:
    """One ulp of each entry in ``dtype`` (bfloat16: float32's spacing times 2^16)."""
    magnitude = np.abs(values)
    if dtype == "float16":
        with np.errstate(over="ignore"):
            spacing = np.spacing(magnitude.astype(np.float16)).astype(np.float64)
        return np.where(np.isfinite(spacing), spacing, np.inf)
    return np.spacing(magnitude.astype(np.float32)).astype(np.float64) * 65536.0


@dataclass(slots=True)
class _Rows:
    """Per posted row: the largest and summed difference from the claimed table, its
    largest excess over the row's bound (plain, and allowing a float16 or bfloat16 ulp of
    each entry), whether it is finite, and its largest angle drift; and whether the table
    is the claimed one bit for bit."""

    largest: Values
    sums: Values
    excess: dict[str, Values]
    finite: NDArray[np.bool_]
    drift: Values | None
    equal: bool


def _measure(claim: Claim, posted: Posted, bound: Bound) -> _Rows:
    """The posted rows against the claimed ones, a chunk at a time, each entry against its
    ``bound``."""
    key, count = claim.key, len(posted.positions)
    largest, sums = np.empty(count), np.empty(count)
    excess = {kind: np.empty(count) for kind in ("library", "float16", "bfloat16")}
    finite: NDArray[np.bool_] = np.ones(count, bool)
    turning = paths.angles(key) is not None
    drift = np.empty(count) if turning else None
    equal = posted.dtype == str(key.dtype)
    for part in _chunks(count, posted.width):
        at, mine = posted.positions[part], posted.take(part)
        finite[part] = np.isfinite(mine).all(axis=1)
        expected = rows_at(key, at, claim.source)
        if np.array_equal(mine, expected) and np.array_equal(
            np.signbit(mine), np.signbit(expected)
        ):  # the claimed rows, bit for bit (-0.0 is not 0.0): nothing more to measure
            largest[part] = sums[part] = 0.0
            for each in excess.values():
                each[part] = -np.inf
            if drift is not None:
                drift[part] = 0.0
            continue
        equal = False
        with np.errstate(invalid="ignore"):
            difference = np.abs(mine - expected)
        difference[~np.isfinite(difference)] = np.inf
        largest[part], sums[part] = difference.max(axis=1), difference.sum(axis=1)
        difference -= bound.around(at, expected)
        beyond = difference.max(axis=1)
        excess["library"][part] = beyond
        for dtype in ("float16", "bfloat16"):
            # a dtype's ulp only where the library's bound is passed
            over = np.flatnonzero(beyond > 0)
            narrow = beyond.copy()
            if len(over):
                ulps = _ulps(expected[over], dtype)
                narrow[over] = (difference[over] - ulps).max(axis=1)
            excess[dtype][part] = narrow
        if drift is not None:
            drift[part] = _drift(paths.entries(key, expected), paths.entries(key, mine))
    return _Rows(largest, sums, excess, finite, drift, equal)


def _drift(expected: Values, given: Values) -> Values:
    """Each row's largest angle between a pair as claimed and as posted (entries: each
    pair's cos, then its sin)."""
    half = expected.shape[1] // 2
    # in float32, twice as fast: a drift is said to about 1e-7
    given, expected = given.astype(np.float32), expected.astype(np.float32)
    with np.errstate(invalid="ignore"):
        turned = np.arctan2(given[:, half:], given[:, :half]).astype(np.float64)
        turned -= np.arctan2(expected[:, half:], expected[:, :half])
        angle = np.abs((turned + np.pi) % (2 * np.pi) - np.pi)
    angle[~np.isfinite(angle)] = np.pi
    drift: Values = angle.max(axis=1, initial=0.0)
    return drift


def _match(rows: _Rows) -> Match:
    if rows.equal and rows.finite.all():
        return "bitwise"
    kinds: tuple[Match, ...] = ("library", "float16", "bfloat16")
    for kind in kinds:
        if (rows.excess[kind] <= 0).all():
            return kind
    return "different"


def _label(threshold: float) -> str:
    return f"1e{round(math.log10(threshold))}"


def _bands(posted: Posted, rows: _Rows) -> list[dict[str, Any]]:
    positions = posted.positions
    out = []
    for span in bands.bands(int(positions.max()) + 1):
        inside = (positions >= span.start) & (positions < span.stop)
        count = int(inside.sum())
        if not count:
            continue
        band: dict[str, Any] = {
            "start": span.start,
            "stop": span.stop,
            "rows": count,
            "max_difference": _number(float(rows.largest[inside].max())),
            "mean_difference": _number(float(rows.sums[inside].sum() / (count * posted.width))),
        }
        if rows.drift is not None:
            band["max_angle_drift"] = _number(float(rows.drift[inside].max()))
        out.append(band)
    return out


def _number(value: float) -> float | None:
    """A JSON number: ``None`` where the difference is infinite (a non-finite entry)."""
    return value if math.isfinite(value) else None


def _first(positions: NDArray[np.int64], hits: NDArray[np.bool_]) -> int | None:
    return int(positions[hits].min()) if hits.any() else None


def verify(claim: Claim, posted: Posted, diagnosing: bool = True) -> dict[str, Any]:
    """The posted table against the claim: ``match``, ``bands``, ``first_over``, the first
    pair pointing the wrong way (turned pairs), where non-finite entries are, and, unless
    it matches, the mistakes that explain the difference (:func:`diagnose`)."""
    claimed = {"family": claim.family, "parameters": said(claim.parameters)}
    error = Bound.of(claim.key, posted.positions)
    expected = width_of(claim.key)
    if posted.width != expected:
        return {
            "match": "different",
            "claim": claimed,
            "rows": len(posted.positions),
            "shape": {"posted_width": posted.width, "claimed_width": expected},
            "bands": [],
            "first_over": {},
            "non_finite": _non_finite(posted),
            "diagnoses": diagnose(claim, posted, error) if diagnosing else [],
        }
    rows = _measure(claim, posted, error)
    match = _match(rows)
    answer: dict[str, Any] = {
        "match": match,
        "claim": claimed,
        "rows": len(posted.positions),
        "bands": _bands(posted, rows),
        "first_over": {
            _label(t): _first(posted.positions, rows.largest > t) for t in bands.THRESHOLDS
        },
    }
    if rows.drift is not None:
        answer["first_wrong_way"] = _first(posted.positions, rows.drift > np.pi / 2)
    answer["non_finite"] = _non_finite(posted)
    wanted = diagnosing and match not in ("bitwise", "library")
    answer["diagnoses"] = diagnose(claim, posted, error) if wanted else []
    return answer


def _non_finite(posted: Posted) -> dict[str, Any] | None:
    """Where the posted table holds NaN or infinity: how many entries, and the first rows'
    positions (data, not an error)."""
    count, rows = 0, []
    for part in _chunks(len(posted.positions), posted.width):
        bad = ~np.isfinite(posted.take(part))
        count += int(bad.sum())
        rows.append(posted.positions[part][bad.any(axis=1)])
    if not count:
        return None
    at = np.unique(np.concatenate(rows))
    return {"entries": count, "first_positions": at[:10].tolist()}


# -- the mistakes ------------------------------------------------------------------------


def _toggled(name: str) -> Callable[[Claim, Posted], Iterable[Trial]]:
    """A boolean parameter given the other way."""

    def trials(claim: Claim, posted: Posted) -> Iterable[Trial]:
        fields = getattr(claim.key, "__dataclass_fields__", {})
        current = getattr(claim.key, name, claim.parameters.get(name))
        if name in fields or name in claim.parameters:
            yield Trial({name: not bool(current)})

    return trials


def _other(name: str, values: Sequence[Any]) -> Callable[[Claim, Posted], Iterable[Trial]]:
    """A parameter given another of ``values``."""

    def trials(claim: Claim, posted: Posted) -> Iterable[Trial]:
        current = getattr(claim.key, name, claim.parameters.get(name))
        for value in values:
            if value != current:
                yield Trial({name: value})

    return trials


def _transformed(
    transform: Callable[[Values, Key], Values | None], note: str
) -> Callable[[Claim, Posted], Iterable[Trial]]:
    """The claimed rows changed by ``transform`` (``None``: it does not apply)."""

    def trials(claim: Claim, posted: Posted) -> Iterable[Trial]:
        key = claim.key
        probe = transform(np.zeros((1, width_of(key))), key)
        if probe is None:
            return

        def values(positions: NDArray[np.int64]) -> Values:
            moved = transform(rows_at(key, positions), key)
            assert moved is not None
            return paths.entries(key, moved)

        yield Trial(values=values, note=note)

    return trials


def _swap_halves(rows: Values, key: Key) -> Values | None:
    width = rows.shape[1]
    if width % 2:
        return None
    half = width // 2
    return np.concatenate([rows[:, half:], rows[:, :half]], axis=1)


def _swap_arrays(rows: Values, key: Key) -> Values | None:
    return _swap_halves(rows, key) if len(registry.arrays(key)) == 2 else None


def _swap_pairs(rows: Values, key: Key) -> Values | None:
    """Each pair of columns ``(2i, 2i+1)`` swapped: an interleaved table's sin and cos."""
    if registry.arrays(key) or rows.shape[1] % 2:
        return None
    out = rows.copy()
    out[:, 0::2], out[:, 1::2] = rows[:, 1::2], rows[:, 0::2]
    return out


def _flip_single(rows: Values, key: Key) -> Values | None:
    return _swap_halves(rows, key) if not registry.arrays(key) else None


def _path(name: str) -> Callable[[Claim, Posted], Iterable[Trial]]:
    """The arithmetic of the audit's path ``name`` (:mod:`.paths`), where the family has it."""

    def trials(claim: Claim, posted: Posted) -> Iterable[Trial]:
        found = [each for each in paths.paths_of(claim.key) if each.name == name]
        if found:
            yield Trial(values=_along(found[0], claim.key), note=f"the audit's {name} path")

    return trials


def _along(path: paths.Path, key: Key) -> Callable[[NDArray[np.int64]], Values]:
    def values(positions: NDArray[np.int64]) -> Values:
        with np.errstate(all="ignore"):
            return path.values(key, positions)

    return values


def _bases(claim: Claim, posted: Posted) -> Iterable[Trial]:
    """Another base: the one read from the table (:func:`read_base`), then the usual ones;
    each the ``GET``'s parameter, or where the preset fixes it, the preset's table with
    that base (no ``GET`` names it)."""
    name = next((each for each in BASES if each in claim.key.__dataclass_fields__), None)
    if name is None:
        return
    current = float(getattr(claim.key, name))
    read = read_base(claim, posted, name)
    tried: set[float] = set()
    for value in ((read,) if read is not None else ()) + COMMON_BASES:
        if value in tried or math.isclose(value, current):
            continue
        tried.add(value)
        trial = Trial({name: value})
        if _trial_key(claim, trial) is not None:
            yield trial
            continue
        try:
            key = dataclasses.replace(claim.key, **{name: value})
        except (ValueError, TypeError, ArithmeticError, InvalidParameter):
            continue
        yield Trial(
            values=_entries_of(claim.key, key),
            note=f"the preset's table with {name}={value:g}",
            shows={name: value},
        )


def _entries_of(claimed: Key, key: Key) -> Callable[[NDArray[np.int64]], Values]:
    def values(positions: NDArray[np.int64]) -> Values:
        return paths.entries(claimed, rows_at(key, positions))

    return values


# rows the base is read on: the first whose entries depend on it, where a step of the search
# moves each angle by far less than a turn
READ_ROWS: Final = 64
# the bases searched, log-spaced (about 9 % apart), before the search is refined
BASE_GRID: Final = np.geomspace(1.5, 1e9, 240)


def read_base(claim: Claim, posted: Posted, name: str) -> float | None:
    """The base (``name``: base, theta, max_period, temperature) that makes the claimed
    table nearest the posted one, the claim's other parameters kept: searched on the first
    :data:`READ_ROWS` rows it changes, over :data:`BASE_GRID`, refined about the best
    (golden section) and rounded as a config writes it where that is as near; None where
    the family takes no base or nothing is nearer than the claim."""
    if posted.width != width_of(claim.key):
        return None
    order = np.argsort(posted.positions, kind="stable")
    head = order[: 4 * READ_ROWS]
    at = posted.positions[head]
    current = float(getattr(claim.key, name))

    def key_of(base: float) -> Key | None:
        try:
            made: Key = dataclasses.replace(claim.key, **{name: base})
        except (ValueError, TypeError, ArithmeticError, InvalidParameter):
            return None
        return made

    other = key_of(current * 1.5)
    if other is None:
        return None
    with np.errstate(all="ignore"):
        moved = np.abs(rows_at(claim.key, at) - rows_at(other, at)).max(axis=1) > 0
    index = head[moved][:READ_ROWS]
    if not len(index):
        return None
    at, mine = posted.positions[index], posted.take(index)

    def score(base: float) -> float:
        key = key_of(base)
        if key is None:
            return math.inf
        with np.errstate(all="ignore"):
            difference = np.abs(mine - rows_at(key, at))
        return float(np.nan_to_num(difference, nan=np.inf).max())

    scores = [score(float(base)) for base in BASE_GRID]
    best = float(BASE_GRID[int(np.argmin(scores))])
    low, high = math.log(best / 1.1), math.log(best * 1.1)
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if score(math.exp(a)) < score(math.exp(b)):
            high = b
        else:
            low = a
    found = math.exp((low + high) / 2)
    from service.audit import identify

    options = [*identify.nice(found), found]
    chosen = min(options, key=lambda each: (score(each), options.index(each)))
    if score(chosen) >= score(current):
        return None
    return chosen


def _shifted(claim: Claim, posted: Posted) -> Iterable[Trial]:
    from service.audit import identify

    read = identify.offset_of(claim, posted)
    for shift in ((read,) if read not in (None, 0) else ()) + SHIFTS:
        if int(posted.positions.min()) + shift >= 0:
            yield Trial(shift=shift)


def _scalings(claim: Claim, posted: Posted) -> Iterable[Trial]:
    if claim.family != "rotary":
        return
    from service.audit import identify

    if claim.parameters.get("scaling", "none") != "none":
        yield Trial(dict.fromkeys(identify.SCALING_FIELDS) | {"scaling": "none"})
    for changes in identify.scalings_of(claim, posted):
        # longrope's factors, read from the table, reproduce any frequencies: a diagnosis
        # only where the claim is longrope's
        if changes["scaling"] != "longrope" or claim.parameters.get("scaling") == "longrope":
            yield Trial(changes)


def _widths(claim: Claim, posted: Posted) -> Iterable[Trial]:
    """The rotated width the posted table has: ``head_dim`` or ``partial_rotary_factor``."""
    arrays = max(1, len(registry.arrays(claim.key)))
    if posted.width % arrays:
        return
    width = posted.width // arrays
    if claim.family == "rotary":
        head_dim = int(claim.parameters.get("head_dim", 0))
        if posted.width != claim.key.width:
            if head_dim and width < head_dim:
                yield Trial({"partial_rotary_factor": width / head_dim})
            yield Trial({"head_dim": width, "partial_rotary_factor": None})
        return
    for name in ("d_model", "dim"):
        if name in claim.parameters and int(claim.parameters[name]) != width:
            yield Trial({name: width})


def _scale(claim: Claim, posted: Posted) -> Iterable[Trial]:
    """The table times sqrt(d_model), or divided by it: the ``scale`` parameter where the
    preset takes one, else the rows scaled."""
    if claim.family != "sinusoidal" or "d_model" not in claim.parameters:
        return
    root = math.sqrt(int(claim.parameters["d_model"]))
    current = claim.parameters.get("scale")
    for value in (root, 1.0):
        if current is None or not math.isclose(float(current), value):
            yield Trial({"scale": value})
    for factor, said in ((root, "times"), (1 / root, "divided by")):

        def scaled(rows: Values, key: Key, factor: float = factor) -> Values:
            return rows * factor

        yield from _transformed(scaled, f"the rows {said} sqrt(d_model)")(claim, posted)


MISTAKES: Final[tuple[Mistake, ...]] = (
    Mistake(
        "swapped-cos-sin",
        "cos and sin swapped.",
        lambda claim, posted: [
            *_transformed(_swap_arrays, "cos and sin swapped")(claim, posted),
            *_transformed(_swap_pairs, "each pair's columns swapped")(claim, posted),
        ],
    ),
    Mistake(
        "flipped-halves",
        "The row's halves in the other order ([cos | sin] for [sin | cos]: "
        "flip_sin_to_cos; a grid's [h | w] for [w | h]).",
        lambda claim, posted: [
            *_toggled("flip_sin_to_cos")(claim, posted),
            *_toggled("reverse_coord")(claim, posted),
            *_transformed(_flip_single, "the halves of each row swapped")(claim, posted),
        ],
    ),
    Mistake(
        "pairing",
        "Half vs interleaved pairing: pair k is entries (k, k + d/2) or (2k, 2k + 1).",
        lambda claim, posted: [
            *(
                _other("convention", ("half", "interleaved"))(claim, posted)
                if claim.family == "rotary"
                else ()
            ),
            *(
                _other("layout", ("half", "interleaved"))(claim, posted)
                if claim.family == "rope-nd"
                else ()
            ),
            *_toggled("interleave_sin_cos")(claim, posted),
            *(
                _other("layout", ("interleaved", "split"))(claim, posted)
                if claim.family == "sinusoidal"
                else ()
            ),
        ],
    ),
    Mistake(
        "rows-shifted",
        "Rows shifted by k positions (fairseq's padding_idx + 1; counting from 1 instead of 0).",
        _shifted,
    ),
    Mistake("base", "Another base (rope_theta, max_period, temperature).", _bases),
    Mistake("scaling", "A scaling missing, or another one applied.", _scalings),
    Mistake(
        "width", "head_dim, partial_rotary_factor or the embedding width not as claimed.", _widths
    ),
    Mistake("scale", "The sqrt(d_model) scale applied, or not.", _scale),
    Mistake(
        "float32-positions",
        "Positions cast to float32 before the product.",
        _path("float32-positions"),
    ),
    Mistake(
        "bf16-positions", "Positions cast to bfloat16 before the product.", _path("bf16-positions")
    ),
    Mistake(
        "fp16-positions", "Positions cast to float16 before the product.", _path("fp16-positions")
    ),
    Mistake("bf16-timesteps", "Timesteps cast to bfloat16.", _path("bf16-timesteps")),
    Mistake("fp16-timesteps", "Timesteps cast to float16.", _path("fp16-timesteps")),
    Mistake("bf16-ids", "Position ids cast to bfloat16.", _path("bf16-ids")),
    Mistake("fp16-ids", "Position ids cast to float16.", _path("fp16-ids")),
    Mistake("bf16-table", "The table stored in bfloat16.", _path("bf16-table")),
    Mistake("fp16-table", "The table stored in float16.", _path("fp16-table")),
    Mistake(
        "bf16-frequencies",
        "The frequencies in bfloat16 before the product.",
        _path("bf16-frequencies"),
    ),
)


def _trial_key(claim: Claim, trial: Trial) -> tuple[Key, dict[str, Any]] | None:
    """The trial's key and the parameters that reproduce it; None where the family refuses
    them (a trial that cannot be)."""
    parameters = {**claim.parameters}
    for name, value in trial.changes.items():
        if value is None:
            parameters.pop(name, None)
        else:
            parameters[name] = value
    if trial.shift:
        parameters["start"] = int(parameters.get("start", 0)) + trial.shift
    if not trial.changes:
        return claim.key, parameters
    try:
        return claim.make(parameters), parameters
    except (ValueError, TypeError, ArithmeticError, InvalidParameter):
        return None


def _trial_rows(
    claim: Claim, trial: Trial, key: Key, positions: NDArray[np.int64]
) -> tuple[Values, bool] | None:
    """The trial's rows at ``positions``, and whether they are rows (else entries as the
    audit compares them: an audit path's); None where its table has no rows there."""
    if trial.values is not None:
        return trial.values(positions), False
    moved = positions + trial.shift
    if moved.min() < 0:
        return None
    with np.errstate(all="ignore"):
        return rows_at(key, moved), True


def _against(
    claim: Claim,
    trial: Trial,
    key: Key,
    posted: Posted,
    index: NDArray[np.intp],
    error: Bound,
    allowed: str,
    claimed: Values | None = None,
) -> tuple[float, float, NDArray[np.int64]] | None:
    """The posted rows ``index`` against the trial: the largest excess over their bound,
    the largest difference, and the positions where the trial and the claim part beyond
    it (``claimed``: the claim's rows there, where known); None where the trial makes no
    rows there."""
    positions = posted.positions[index]
    try:
        made = _trial_rows(claim, trial, key, positions)
    except (ValueError, TypeError, ArithmeticError, InvalidParameter):
        return None
    if made is None:
        return None
    values, whole = made
    if claimed is None:
        claimed = rows_at(claim.key, positions, claim.source)
    given = posted.take(index)
    if not whole and error.columns is not None and len(error.columns) == given.shape[1]:
        # an audit path's entries, each where the row repeats it: every column compared
        values, whole = values[:, error.columns], True
    if not whole:
        claimed, given = paths.entries(claim.key, claimed), paths.entries(claim.key, given)
    if given.shape != values.shape:
        return None
    with np.errstate(invalid="ignore"):
        off = np.abs(given - values)
    off[~np.isfinite(given) & ~np.isfinite(values)] = 0.0  # both NaN: as the trial makes it
    off[~np.isfinite(off)] = np.inf
    bound = error.around(positions, values, rows=whole)
    if allowed != "none":
        bound = bound + _ulps(np.nan_to_num(values), allowed)
    excess = float((off - bound).max())
    apart = positions  # another width: every position
    if claimed.shape == values.shape:
        with np.errstate(invalid="ignore"):
            moved = ~(np.abs(values - claimed) <= bound)
        apart = positions[moved.any(axis=1)]
    return excess, float(off[np.isfinite(off)].max(initial=0.0)), apart


def diagnose(claim: Claim, posted: Posted, error: Bound) -> list[dict[str, Any]]:
    """The mistakes that explain the posted table: each trial kept where the table is
    within the bound of it at every row (first on the audit's sample of positions), with
    what it changes, from which position it matters, the largest difference left, and the
    ``GET`` that reproduces it (``by``: ``parameters`` where that ``GET`` makes the table,
    else the audit path or the transform that does)."""
    found: list[dict[str, Any]] = []
    allowed = posted.dtype if posted.dtype in ("float16", "bfloat16") else "none"
    order = np.argsort(posted.positions, kind="stable")
    sample = order[sampled(posted.positions[order])]
    claimed = rows_at(claim.key, posted.positions[sample], claim.source)
    context = _Context(claim, posted, error, allowed, sample, claimed)
    for mistake in MISTAKES:
        for trial in mistake.trials(claim, posted):
            kept = _kept(context, trial)
            if kept is None:
                continue
            _, parameters, largest, apart = kept
            found.append(
                {
                    "mistake": mistake.name,
                    "description": mistake.description,
                    "from_position": int(apart.min()),
                    "max_error": largest,
                    "family": claim.family,
                    "parameters": said(parameters),
                    "changes": said(_changes(trial, parameters, claim)),
                    "by": "parameters" if trial.values is None else trial.note,
                }
            )
            break  # one trial a mistake
        if len(found) >= MAX_DIAGNOSES:
            break
    return found or _several(context)


class _Context(NamedTuple):
    """What every trial of a diagnosis is measured with: the claim, the posted table, the
    claim's bound, the dtype whose ulp it allows, the sampled rows and the claimed ones."""

    claim: Claim
    posted: Posted
    error: Bound
    allowed: str
    sample: NDArray[np.intp]
    claimed: Values


def _kept(
    context: _Context, trial: Trial
) -> tuple[Key, dict[str, Any], float, NDArray[np.int64]] | None:
    """Whether ``trial`` explains the posted table: its key and parameters, the largest difference
    left and where it parts from the claim, when the table is within the bound of it on
    the sample, then on every row, and it parts from the claim somewhere; else None."""
    claim, posted = context.claim, context.posted
    made = _trial_key(claim, trial)
    if made is None:
        return None
    key, parameters = made
    if trial.values is None and width_of(key) != posted.width:
        return None
    bound = _bound_of(context.error, trial, key, posted)
    first = _against(
        claim, trial, key, posted, context.sample, bound, context.allowed, context.claimed
    )
    if first is None or not first[0] <= 0:
        return None
    whole = _whole(claim, trial, key, posted, bound, context.allowed)
    if whole is None or not len(whole[1]):  # the claim itself explains nothing
        return None
    return key, parameters, whole[0], whole[1]


def _several(context: _Context) -> list[dict[str, Any]]:
    """Where no one mistake explains the table, the parameters read from it
    (:func:`.identify.candidates`, of the claim's family) that make it: the diagnosis
    ``several``, naming each parameter the claim has otherwise."""
    from service.audit import identify

    claim, posted = context.claim, context.posted
    named = max(1, len(registry.arrays(claim.key)))
    start = int(posted.positions.min())
    found = [each for each in identify.candidates(posted, start, named) if each[0] == claim.family]
    # the simplest first: a named scaling and a usual base before longrope's read factors
    found.sort(key=lambda each: identify.complexity(each[1]))
    for _, read in found:
        kept = {k: v for k, v in claim.parameters.items() if k not in identify.SCALING_FIELDS}
        changes = {**dict.fromkeys(set(claim.parameters) - set(kept)), **read}
        changes = {k: v for k, v in changes.items() if k not in ("max_len", "start")}
        trial = Trial(changes)
        result = _kept(context, trial)
        if result is None:
            continue
        key, parameters, largest, apart = result
        fields = claim.key.__dataclass_fields__
        differ = [
            name
            for name in sorted(set(parameters) | set(claim.parameters))
            if name not in ("max_len", "start")
            and parameters.get(name) != claim.parameters.get(name)
            # a default given where the claim left it out is no difference
            and not (name in fields and getattr(key, name) == getattr(claim.key, name))
        ]
        return [
            {
                "mistake": "several",
                "description": "Several parameters not as claimed: " + ", ".join(differ) + ".",
                "from_position": int(apart.min()),
                "max_error": largest,
                "family": claim.family,
                "parameters": said(parameters),
                "changes": said({name: parameters.get(name) for name in differ}),
                "by": "parameters",
            }
        ]
    return []


def _changes(trial: Trial, parameters: Mapping[str, Any], claim: Claim) -> dict[str, Any]:
    """What a trial changes in the claim: its parameters (``None``: one the claim gave, left
    out), the rows' ``start``, or what its arithmetic takes otherwise."""
    changes = {
        name: value
        for name, value in {**trial.changes, **trial.shows}.items()
        if value is not None or name in claim.parameters
    }
    if trial.shift:
        changes["start"] = parameters["start"]
    return changes


def _bound_of(claimed: Bound, trial: Trial, key: Key, posted: Posted) -> Bound:
    """The bound a trial is held to: the claim's, or where the trial's rows are another
    key's (another pairing puts each pair in other columns), that key's."""
    if trial.values is not None or key == claimed.key:
        return claimed
    return Bound.of(key, posted.positions)


def _whole(
    claim: Claim, trial: Trial, key: Key, posted: Posted, error: Bound, allowed: str
) -> tuple[float, NDArray[np.int64]] | None:
    largest, apart = 0.0, []
    for part in _chunks(len(posted.positions), posted.width):
        index = np.arange(part.start, part.stop, dtype=np.intp)
        got = _against(claim, trial, key, posted, index, error, allowed)
        if got is None or not got[0] <= 0:
            return None
        largest = max(largest, got[1])
        apart.append(got[2])
    return largest, np.concatenate(apart) if apart else np.empty(0, np.int64)


def sampled(positions: NDArray[np.int64]) -> NDArray[np.intp]:
    """Indices (into sorted ``positions``) of the rows an audit would sample."""
    if len(positions) <= bands.SAMPLES:
        return np.arange(len(positions), dtype=np.intp)
    planned = bands.plan(bands.bands(int(positions[-1]) + 1))
    index = np.searchsorted(positions, planned)
    index = index[index < len(positions)]
    return np.unique(index).astype(np.intp)


def said(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters as a ``GET`` takes them: numbers that are integers without ``.0``."""
    out: dict[str, Any] = {}
    for name, value in parameters.items():
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
            value = int(value)
        out[name] = value
    return out
