"""Single flight: one computation in progress, whose result (or failure) every request
that needs it shares, instead of each repeating it. Threads wait on it (numpy only)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


class ComputationFailed(RuntimeError):
    """The computation a request waited for failed (its cause); later ones compute again."""


@dataclass(slots=True)
class Flight(Generic[T]):
    """One computation in progress: the thread computing sets ``result`` or ``error`` and
    then :meth:`land`; the others wait in :meth:`outcome`."""

    done: threading.Event = field(default_factory=threading.Event)
    result: T | None = None
    error: BaseException | None = None

    def land(self) -> None:
        """The computation is over: wake everyone waiting."""
        self.done.set()

    def outcome(self) -> T:
        """The result, once done; :class:`ComputationFailed` if the computation failed."""
        self.done.wait()
        if self.result is None:
            failed = ComputationFailed("the computation this request waited for failed")
            raise failed from self.error
        return self.result
