"""The families of encodings, found by their key type.

A family is a frozen key type (everything that changes its values, with the ``width`` of
a row and its ``dtype``) and either two functions on it, ``fill``, which writes
consecutive rows into arrays the caller owns, and ``take``, which computes the rows of
scattered positions with the same bits (a table kept in the cache by pages of rows); or
one, ``block``, which computes a block of any shape per request (ALiBi's biases: each
entry one product, not worth keeping). A row may hold several named arrays side by side
(rotary's ``cos`` and ``sin``). A family that can be audited carries what the precision
audit needs of it (:class:`Audit`). Everything else (the cache, the table and apply pipelines,
replay, pictures, preload) works from a key through this module, never from a family's
name.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, Literal, Protocol, TypeVar, get_args

import numpy as np
from numpy.typing import NDArray

from service.arrays import DTYPES as DTYPES
from service.arrays import DType as DType
from service.arrays import Rows as Rows
from service.arrays import joined as joined
from service.encodings import kernels
from service.errors import InvalidParameter

# library: the arithmetic of the library a family follows; exact: exact, rounded once
Rounding = Literal["library", "exact"]
ROUNDINGS: Final[tuple[Rounding, ...]] = get_args(Rounding)


class Key(Protocol):
    """What every family's key tells: the columns of a row and their element type. Keys
    are frozen dataclasses whose fields are the family's parameters (as the client and
    ``/v1/cache`` name them)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def __hash__(self) -> int: ...

    @property
    def width(self) -> int: ...

    @property
    def dtype(self) -> DType: ...


K = TypeVar("K", bound=Key)


@dataclass(frozen=True, slots=True)
class Bound:
    """The largest magnitude a family's formula allows its entries with a key's parameters
    (a sine times a scale: the scale), and the parameters that set it, named in the
    refusal of a table that passes it (or holds NaN or infinity)."""

    largest: float
    parameters: tuple[str, ...]


# Entries are rounded to their dtype: float16 carries 11 bits, so a value at the bound
# may round up to it times 1 + 2^-11; and an exact sine is within 2^-51 of [-1, 1].
_ROUNDING: Final = 1 + 2.0**-9


def _rows_shape(key: Key, start: int, stop: int) -> tuple[int, ...]:
    return stop - start, key.width


Values = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class AuditPath(Generic[K]):
    """A computation path an audit measures: its name, what it is (and its source), and the
    entries a model would see along it at positions, as float64."""

    name: str
    description: str
    values: Callable[[K, NDArray[np.int64]], Values]


@dataclass(frozen=True, slots=True)
class Angles(Generic[K]):
    """Entries that are the cosine and sine of pairs turned by position times an inverse
    frequency, times an attention factor (RoPE): the audit turns them along the paths a
    model's arithmetic takes (positions or frequencies cast, TF32 angles), bounds what a
    GPU may produce (the ``device`` envelope) and finds where a pair points the wrong way.
    ``exact`` and ``library``: the inverse frequencies of the exact key and of the library
    key; ``turned``: the library's entries (each pair's cos, then sin) at float32 positions
    with float32 inverse frequencies, stored as the key stores its table; ``ulps``: how far
    a device's frequencies may be from the CPU's, in float32 ulps of each."""

    pairs: Callable[[K], int]
    exact: Callable[[K], Values]
    library: Callable[[K], NDArray[np.float32]]
    turned: Callable[[K, NDArray[np.float32], NDArray[np.float32]], Values]
    attention: Callable[[K], float]
    ulps: Callable[[K], float]
    # the positions as the formula takes them and as the library's arithmetic receives
    # them, (N,) or per pair (N, pairs) (none: the positions, and their float32 cast); the
    # envelope bounds the second's distance from the first
    received: Callable[[K, NDArray[np.int64]], tuple[Values, Values]] | None = None
    # what the envelope assumes of the device (none: transformers' powf, sinf and cosf)
    device: str | None = None
    # whether the library computes its angles, cos and sin in float64 (rounded to the
    # table's dtype once), where the device's math library is double's
    wide: Callable[[K], bool] = field(default=lambda key: False)


def _as_float64(key: Any, rows: Rows) -> Values:
    return np.asarray(rows, np.float64)


@dataclass(frozen=True, slots=True)
class Audit(Generic[K]):
    """What the precision audit (:mod:`service.audit`) needs of a family: the key of its
    exact table (float64, each entry rounded once) and of its library's (``exact`` and
    ``library``); a position's entries as the audit compares them (``entries`` of rows,
    ``width`` of them); where the family computes them otherwise than by its rows, the exact
    entries at positions (``exact_at``) and the library's at positions that need not be
    integers (``library_at``: positions cast to a narrow float); the largest difference two
    entries can have (``largest``; 0: none, an entry's own magnitude counts); ``angles``
    for entries that are turned pairs; the shared paths that apply (``paths``, none: every
    one its entries allow) and paths of its own (``own``); how many positions an audit of
    a table of ``max_len`` rows covers (``extent``: its rows, unless the family's entries
    reach further, as ALiBi's distances reach its keys')."""

    exact: Callable[[K], K]
    library: Callable[[K], K]
    width: Callable[[K], int] = field(default=lambda key: key.width)
    entries: Callable[[K, Rows], Values] = _as_float64
    exact_at: Callable[[K, NDArray[np.int64]], Values] | None = None
    library_at: Callable[[K, NDArray[np.float64]], Values] | None = None
    largest: Callable[[K], float] = field(default=lambda key: 2.0)  # a sine's from a cosine's
    angles: Angles[K] | None = None
    paths: tuple[str, ...] | None = None
    own: tuple[AuditPath[K], ...] = ()
    extent: Callable[[K, int], int] = field(default=lambda key, max_len: max_len)


def replacing(**changes: Any) -> Callable[[K], K]:
    """A key's copy with ``changes`` (an audit's exact or library key)."""
    return lambda key: dataclasses.replace(key, **changes)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a preset's arithmetic is written: repository, version, file and function."""

    repository: str
    version: str
    path: str
    function: str


class Listed(Protocol):
    """A family's preset as ``GET /v1/presets`` lists it: its name, what it is, the code it
    follows, the parameters it fixes (``settings``) and those a client may still give
    (``takes``), the arithmetic of its ``rounding=library``, and what its rows are."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def sources(self) -> tuple[Source, ...]: ...

    @property
    def settings(self) -> Mapping[str, Any]: ...

    @property
    def takes(self) -> tuple[str, ...]: ...

    @property
    def arithmetic(self) -> str: ...

    @property
    def rows(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Family(Generic[K]):
    """One family: its name (its routes' and listings' name), its key type, its functions
    (``fill`` and ``take`` for a cached table; ``block`` for one computed per request,
    with the ``shape`` of rows ``start .. stop-1``), the bound its entries keep, the
    position its row 0 is (a preset's ``start_index``: positions are bounded by
    ``PE_MAX_POSITION`` after the shift), and the names of the arrays a row holds side by
    side, each of equal width (none: one array)."""

    name: str
    key: type[K]
    fill: Callable[[K, int, Sequence[Rows]], None] | None = None
    take: Callable[[K, NDArray[np.int64]], Rows] | None = None
    bound: Callable[[K], Bound] = field(default=lambda key: Bound(math.inf, ()))
    shift: Callable[[K], int] = field(default=lambda key: 0)
    # what preparing the key costs before its first row (its frequencies), in table
    # numbers; 0 once done: it counts in the work that chooses the lane
    preparation: Callable[[K], int] = field(default=lambda key: 0)
    arrays: tuple[str, ...] = ()
    block: Callable[[K, int, int], NDArray[np.floating]] | None = None
    shape: Callable[[K, int, int], tuple[int, ...]] = _rows_shape
    # whether every block passes check(): not ALiBi's biases, whose largest magnitude is
    # computed exactly before the block, and whose masks are -inf
    checked: bool = True
    audit: Audit[K] | None = None
    # its presets, by name (the sinusoidal family's have a document of their own)
    presets: Mapping[str, Listed] = field(default_factory=dict)
    # whether the key's numbers are computed with the library engine's functions
    # (:mod:`.kernels`: a ``rounding=library`` path whose library is torch), so that its
    # bytes depend on the engine
    engine: Callable[[K], bool] = field(default=lambda key: False)

    def __post_init__(self) -> None:
        rows = (self.fill is not None, self.take is not None)
        if rows != ((self.block is None),) * 2:
            raise TypeError(f"family {self.name}: give fill and take, or block alone")
        if self.arrays and self.block is not None:
            raise TypeError(f"family {self.name}: named arrays are split from rows")


_FAMILIES: dict[type[Any], Family[Any]] = {}


def register(family: Family[K]) -> Family[K]:
    """Make ``family`` known by its key type."""
    _FAMILIES[family.key] = family
    return family


@contextmanager
def registered(family: Family[K]) -> Iterator[Family[K]]:
    """``family`` known by its key type while the block runs, and whatever was known by
    that type before it, afterwards (a test's family, or a real one made to fail)."""
    before = _FAMILIES.get(family.key)
    _FAMILIES[family.key] = family
    try:
        yield family
    finally:
        if before is None:
            del _FAMILIES[family.key]
        else:
            _FAMILIES[family.key] = before


def listed() -> dict[str, Mapping[str, Listed]]:
    """Each known family's presets, by family name (those that have any)."""
    return {family.name: family.presets for family in _FAMILIES.values() if family.presets}


def family_of(key: Key) -> Family[Any]:
    """The family whose key ``key`` is."""
    try:
        return _FAMILIES[type(key)]
    except KeyError:
        raise TypeError(f"{type(key).__name__} is not a registered family key") from None


def audit(key: Key) -> Audit[Key]:
    """What the precision audit needs of ``key``'s family."""
    family = family_of(key)
    if family.audit is None:
        raise TypeError(f"family {family.name} declares no audit record")
    return family.audit


def library_engine(*keys: Key) -> str | None:
    """The library engine whose functions compute any of ``keys`` (:func:`.kernels.label`),
    as answers name it and their ETags count it; None where none of them needs one."""
    if any(family_of(key).engine(key) for key in keys):
        return kernels.label()
    return None


def row_bytes(key: Key) -> int:
    """Bytes of one row of ``key``'s table."""
    return key.width * np.dtype(key.dtype).itemsize


def key_bytes(key: Key) -> int:
    """About what a key holds beyond a few numbers (a longrope key's factors), counted
    with each of its cached pages: 32 bytes per number in a tuple."""

    def size(value: Any) -> int:
        return sum(32 + size(item) for item in value) if isinstance(value, tuple) else 0

    return sum(size(getattr(key, name)) for name in key.__dataclass_fields__)


def per_request(key: Key) -> bool:
    """Whether ``key``'s blocks are computed per request (never kept in the cache)."""
    return family_of(key).block is not None


def shape(key: Key, start: int, stop: int) -> tuple[int, ...]:
    """The shape of the answer of rows ``start .. stop-1`` (all columns) of ``key``."""
    return family_of(key).shape(key, start, stop)


def arrays(key: Key) -> tuple[str, ...]:
    """The names of the arrays a row of ``key`` holds side by side (none: one array)."""
    return family_of(key).arrays


def split(key: Key, parts: Sequence[Rows]) -> dict[str, list[Rows]]:
    """Blocks of rows as the blocks of each of the row's named arrays (views)."""
    names = family_of(key).arrays
    width = parts[0].shape[1] // len(names) if parts else 0
    return {
        name: [part[:, i * width : (i + 1) * width] for part in parts]
        for i, name in enumerate(names)
    }


def block(key: Key, start: int, stop: int) -> NDArray[np.floating]:
    """The block of rows ``start .. stop-1`` of a family computed per request (its shape is
    the family's, its size rows × width); checked where the family is."""
    family = family_of(key)
    if family.block is None:
        raise TypeError(f"family {family.name} is a cached table: use fill")
    out = family.block(key, start, stop)
    if out.size != (stop - start) * key.width:  # what the limits and permits counted
        raise TypeError(f"family {family.name}: a block of {stop - start} rows holds {out.size}")
    if family.checked:
        check(family, key, out)
    return out


def fill(key: Key, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` of ``key``'s table written into ``out``, one array after
    the other (each ``(rows, key.width)`` of ``key.dtype``, C order); checked
    (:func:`check`)."""
    family = family_of(key)
    if family.fill is None:
        raise TypeError(f"family {family.name} is computed per request: use block")
    family.fill(key, start, out)
    for part in out:
        check(family, key, part)


def shift(key: Key) -> int:
    """What ``key``'s family adds to a row's index to get its position."""
    return int(family_of(key).shift(key))


def preparation(key: Key) -> int:
    """What preparing ``key`` costs before its first row, in table numbers (0: ready)."""
    return int(family_of(key).preparation(key))


def check(family: Family[Any], key: Key, rows: Rows) -> None:
    """That ``rows`` of ``key``'s table are finite and within its family's bound (a family
    that declares none: finite): every
    answer that holds table rows (tables, apply, the inference protocol, pictures) goes
    through here, so parameters whose arithmetic overflows, or runs away, are refused with
    their names rather than served. Two passes that allocate nothing (NaN fails both)."""
    if not rows.size:
        return
    bound = family.bound(key)
    limit = bound.largest * _ROUNDING
    high, low = float(rows.max()), float(rows.min())
    if high <= limit and -low <= limit:
        return
    worst = high if not high <= limit else low
    names = (*bound.parameters, "dtype") if key.dtype != "float64" else bound.parameters
    raise InvalidParameter(
        names[0] if names else "dtype",
        f"with {', '.join(names) or 'these parameters'} as given, the {family.name} table "
        f"holds {worst:g} in {key.dtype}, where its formula keeps every entry finite and "
        f"within ±{bound.largest:g}: change them (or ask for float64)",
        also=names[1:],
    )


def checked(key: Key, rows: Rows) -> Rows:
    """``rows`` of ``key``'s family, however computed, once :func:`check` passes them."""
    check(family_of(key), key, rows)
    return rows


def rows(key: Key, start: int, stop: int) -> Rows:
    """Rows ``start .. stop-1`` of ``key``'s table, in a new array."""
    out = np.empty((stop - start, key.width), dtype=key.dtype)
    fill(key, start, [out])
    return out


def take(key: Key, positions: NDArray[np.int64]) -> Rows:
    """The rows at ``positions`` (any order, repeats allowed), bit-identical to the same
    rows of the whole table, computed without the rows between them; checked
    (:func:`check`)."""
    family = family_of(key)
    if family.take is None:
        raise TypeError(f"family {family.name} is computed per request: use block")
    out = family.take(key, positions)
    check(family, key, out)
    return out
