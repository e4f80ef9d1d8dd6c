"""What the protocol and the pacing take from the app they serve: its settings, the
process's budget of answers held for slow clients, and the headers every answer carries
that a refusal written before the app sees a request must carry too (CORS's blanket
``Access-Control-Allow-Origin: *``), and the stack's replayed answers as a function the
protocol calls (:mod:`service.middleware.direct`). uvicorn builds the protocol from its own
configuration, so the app's settings reach it only through the app: one source of settings,
the app's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from service.limits import Budget
from service.settings import Settings

if TYPE_CHECKING:
    from service.middleware.direct import Direct


@dataclass(frozen=True, slots=True)
class Edge:
    settings: Settings
    slow_clients: Budget
    refusal_headers: tuple[tuple[bytes, bytes], ...] = ()
    # the answers the app's middleware stack would replay, made without ASGI
    direct: Direct | None = None

    @classmethod
    def of(cls, settings: Settings, refusal_headers: tuple[tuple[bytes, bytes], ...]) -> Edge:
        return cls(settings, Budget(settings.slow_client_bytes), refusal_headers)


def edge_of(app: Any) -> Edge:
    """The edge of the service's app, found through the layers uvicorn wraps it in (each
    keeps the one inside as ``app``; a few at most, so the search stops at 16). The
    protocol serves the service's app only: another app fails at its first connection."""
    seen = 0
    while app is not None and seen < 16:
        edge = getattr(app, "edge", None)
        if isinstance(edge, Edge):
            return edge
        app, seen = getattr(app, "app", None), seen + 1
    raise TypeError("the service's protocol serves the service's app (service.app.create_app)")
