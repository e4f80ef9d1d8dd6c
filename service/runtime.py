"""The runtime a running service holds, as one typed object: its settings and limits, the
cache, the lanes that CPU work runs in, the permits of large answers, its telemetry and
its readiness. Built when the app starts; handed to routes by ``web.deps``."""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

import anyio

from service.cache import PAGE_BYTES, Cache
from service.limits import Limits
from service.settings import Settings
from service.telemetry import Telemetry

# glibc's mallopt parameter for the size from which allocations get their own mapping
_M_MMAP_THRESHOLD = -3
P = ParamSpec("P")
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
    # requests computing over 8 MiB of rows take turns, one per core, until answered
    large_answers: anyio.Semaphore = field(init=False)
    # matplotlib is not thread-safe: one picture at a time
    painter: anyio.CapacityLimiter = field(init=False)
    ready: bool = False
    preload_error: str | None = None

    def __post_init__(self) -> None:
        cores = os.cpu_count() or 1
        _pages_in_their_own_mappings()
        self.limits = Limits.of(self.settings)
        self.cache = Cache(self.settings.cache_bytes)
        self.cpu = anyio.CapacityLimiter(cores)
        self.large_answers = anyio.Semaphore(cores)
        self.painter = anyio.CapacityLimiter(1)

    async def offload(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run CPU-bound ``work`` in a worker thread of the CPU lane."""
        return await anyio.to_thread.run_sync(
            functools.partial(work, *args, **kwargs), limiter=self.cpu
        )


def _pages_in_their_own_mappings() -> None:
    """Give every cache page its own memory mapping, so that an evicted page goes back to
    the system at once. glibc raises its mapping threshold to the largest block freed (up
    to 32 MiB, e.g. after one large answer), after which pages come from the heap, where
    evicted ones leave holes: a 256 MiB budget then held 297 MiB of resident pages. A fixed
    threshold below the page size keeps RSS within the budget. Elsewhere: nothing to do."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, min(PAGE_BYTES // 2, 128 << 10))
    except (OSError, AttributeError):
        pass
