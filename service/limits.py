"""The service's limits, each checked in one place with one message: what a request may
compute and return, where its positions may go, and how large its pictures may be."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from service.errors import BodyTooLarge, Busy, Limit
from service.settings import Settings

# A piece of an answer left untaken this long makes its client a slow one: the pacing
# (service.server.pacing) counts its answer in PE_SLOW_CLIENT_BYTES, and a large answer
# gives back its permit (service.web.responses).
PATIENCE: Final = 2.0


class Budget:
    """Bytes held by many requests at once, all together at most ``limit``; taken and given
    back on the event loop or in worker threads (an ``.npz`` counts its members as they
    are decompressed)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        with self._lock:
            if self.held + size > self.limit:
                return False
            self.held += size
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self.held -= size


class Reservation:
    """The bytes one request holds (its body as it arrives, an ``.npz``'s members as they
    are decompressed, a gRPC message), taken from the process's budget of posted bodies
    (``PE_POSTED_BYTES``): only bytes that exist, never what a client declares. More than
    the whole budget is :class:`BodyTooLarge` (413: it can never be taken); more than is
    left now is :class:`Busy` (503, to be sent again in a moment)."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.held = 0

    def take(self, size: int) -> None:
        if self.held + size > self.budget.limit:
            raise BodyTooLarge(
                "the bytes this request holds (its body, and an .npz's members decompressed)",
                self.held + size,
                self.budget.limit,
                "PE_POSTED_BYTES",
            )
        if not self.budget.take(size):
            raise Busy(self.held + size, self.budget.held - self.held, self.budget.limit)
        self.held += size


@contextmanager
def reserving(budget: Budget) -> Iterator[Reservation]:
    """A :class:`Reservation` for a request's bytes, given back when the block ends (its
    answer computed, or the request refused)."""
    reservation = Reservation(budget)
    try:
        yield reservation
    finally:
        budget.give(reservation.held)


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits the settings set, as :class:`Limit` s that name their settings."""

    elements: Limit
    json_elements: Limit
    body_bytes: Limit
    config_bytes: Limit
    position: Limit
    width: Limit
    image_width: Limit
    image_height: Limit

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            elements=Limit(settings.max_elements, "PE_MAX_ELEMENTS"),
            json_elements=Limit(settings.max_json_elements, "PE_MAX_JSON_ELEMENTS"),
            body_bytes=Limit(settings.max_body_bytes, "PE_MAX_BODY_BYTES"),
            config_bytes=Limit(settings.max_config_bytes, "PE_MAX_CONFIG_BYTES"),
            position=Limit(settings.max_position, "PE_MAX_POSITION"),
            width=Limit(settings.max_width, "PE_MAX_WIDTH"),
            image_width=Limit(settings.max_image_width, "PE_MAX_IMAGE_WIDTH"),
            image_height=Limit(settings.max_image_height, "PE_MAX_IMAGE_HEIGHT"),
        )

    def rows(self, rows: int, width: int, what: str = "rows × width") -> None:
        """What a request computes: ``rows`` rows of ``width`` columns."""
        self.elements.check(f"the number of elements computed ({what})", rows * width)

    def row_width(self, width: int, name: str = "width") -> None:
        """A row's columns go up to ``PE_MAX_WIDTH``."""
        self.width.check(f"the width of a row ({name})", width)

    def allow_rows(self, rows: int, width: int) -> bool:
        """Whether :meth:`rows` would let ``rows`` rows of ``width`` columns through."""
        return rows * width <= self.elements.value

    def table_rows(
        self, rows: int, width: int, max_len: int, width_name: str, shift: int = 0
    ) -> None:
        """``rows`` rows of ``width`` columns of a table of ``max_len`` rows whose row 0 is
        position ``shift``."""
        self.row_width(width, width_name)
        self.rows(rows, width, f"rows × {width_name}")
        shifted = "start_index + " if shift else ""
        self.last_position(max_len - 1 + shift, f"the table's last position ({shifted}max_len - 1)")

    def last_position(self, position: int, what: str = "the largest position") -> None:
        """Positions go up to ``PE_MAX_POSITION``."""
        self.position.check(what, position)

    def json_answer(
        self, elements: int, hint: str = "ask for format=npy or raw, or a slice"
    ) -> None:
        """A JSON answer of ``elements`` numbers."""
        self.json_elements.check("the number of elements in the JSON answer", elements, hint)

    def picture(self, width: int, height: int) -> None:
        self.image_width.check("the picture's width", width)
        self.image_height.check("the picture's height", height)
