"""The runtime a running service holds, as one typed object: its settings and limits, the
cache, the lanes that CPU work runs in, the permits of large answers, its telemetry and
its readiness. Built when the app starts; handed to routes by ``web.deps``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

import anyio

from service.cache import Cache
from service.cores import available as available_cores
from service.flight import SingleFlight
from service.limits import Budget, Limits
from service.metrics import Telemetry
from service.settings import Settings

P = ParamSpec("P")
# Work on at most this many numbers takes the quick lane (about a millisecond per 2^18).
QUICK_ELEMENTS = 1 << 18
T = TypeVar("T")


@dataclass(slots=True)
class Runtime:
    """What a running service holds: its settings and limits, the cache, the lanes that CPU
    work runs in, the permits of large answers, its telemetry and its readiness."""

    settings: Settings
    telemetry: Telemetry
    limits: Limits = field(init=False)
    cache: Cache = field(init=False)
    # CPU work, one thread per core: more would only fight over the GIL and hold more memory
    cpu: anyio.CapacityLimiter = field(init=False)
    # small CPU work has a lane of its own, so it never waits behind large work
    quick: anyio.CapacityLimiter = field(init=False)
    # requests computing over 8 MiB of rows take turns, one per core, until answered
    large_answers: anyio.Semaphore = field(init=False)
    # the bytes of the posted bodies held at once (PE_POSTED_BYTES)
    posted: Budget = field(init=False)
    # matplotlib is not thread-safe: one picture at a time
    painter: anyio.CapacityLimiter = field(init=False)
    # identical pictures asked for at once are drawn once
    drawings: SingleFlight[bytes] = field(init=False)
    ready: bool = False
    preload_error: str | None = None

    def __post_init__(self) -> None:
        cores = available_cores()
        self.limits = Limits.of(self.settings)
        self.cache = Cache(self.settings.cache_bytes)
        self.cpu = anyio.CapacityLimiter(cores)
        self.quick = anyio.CapacityLimiter(cores)
        self.large_answers = anyio.Semaphore(cores)
        self.posted = Budget(self.settings.posted_bytes)
        self.painter = anyio.CapacityLimiter(1)
        self.drawings = SingleFlight()

    async def compute(
        self, elements: int, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run CPU-bound ``work`` on about ``elements`` numbers in a worker thread: in the
        quick lane if that is at most :data:`QUICK_ELEMENTS` (a few milliseconds), else in
        the CPU lane. A one-row apply is answered while both cores compute large tables."""
        lane = self.quick if elements <= QUICK_ELEMENTS else self.cpu
        return await anyio.to_thread.run_sync(
            functools.partial(work, *args, **kwargs), limiter=lane
        )
