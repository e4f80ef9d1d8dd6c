"""The domain error tree. Each class carries the status and title of its family;
``service.web.problems`` renders any of them as an RFC 9457 problem document. Nothing here
knows where a value came from on the wire: a parameter (how to compute) or an input (the
data posted to be transformed), and the web layer says which part of a request that is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

PROBLEM_BASE = "urn:positional-encodings:problem:"


class ServiceError(Exception):
    """Base of every error the service reports to a client."""

    status: ClassVar[int] = 500
    title: ClassVar[str] = "Internal Server Error"
    slug: ClassVar[str] = "internal-error"

    def __init__(self, detail: str, **extensions: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extensions = extensions

    @property
    def type(self) -> str:
        return PROBLEM_BASE + self.slug


class InvalidParameter(ServiceError):
    """A parameter is out of its domain; ``name`` says which one."""

    status = 422
    title = "Invalid parameter"
    slug = "invalid-parameter"
    source: ClassVar[str] = "parameter"

    def __init__(self, name: str, message: str, also: tuple[str, ...] = ()) -> None:
        """``also``: more parameters that share the blame (named in ``errors`` too)."""
        super().__init__(
            f"{', '.join((name, *also))}: {message}",
            errors=[{"name": each, "detail": message} for each in (name, *also)],
        )
        self.name = name


class InvalidInput(InvalidParameter):
    """A field of the posted data is out of its domain; ``name`` says which one."""

    source = "input"


class LimitExceeded(ServiceError):
    """A request asks for more than a configured limit allows."""

    status = 422
    title = "Limit exceeded"
    slug = "limit-exceeded"

    def __init__(self, what: str, requested: int, limit: int, setting: str, hint: str = "") -> None:
        advice = f"; {hint}" if hint else ""
        super().__init__(
            f"{what} is {_amount(requested)}, over the limit of {limit:,} ({setting}){advice}",
            limit=limit,
            requested=requested,
            setting=setting,
        )


def _amount(number: int) -> str:
    """``number`` in a message: with separators, or its count of digits where a client sent
    one long enough to fill the message (a parameter of 400 digits)."""
    return f"{number:,}" if abs(number) < 10**30 else f"a number of {len(str(abs(number)))} digits"


@dataclass(frozen=True, slots=True)
class Limit:
    """A configured limit: its value and the setting that sets it. Every limit check in
    the service goes through :meth:`check`, so each says the same things the same way."""

    value: int
    setting: str

    def check(self, what: str, requested: int, hint: str = "") -> None:
        """Raise :class:`LimitExceeded` if ``requested`` is over the limit."""
        if requested > self.value:
            raise LimitExceeded(what, requested, self.value, self.setting, hint)

    def check_body(self, what: str, requested: int) -> None:
        """The same for the bytes of a posted body: :class:`BodyTooLarge` (413)."""
        if requested > self.value:
            raise BodyTooLarge(what, requested, self.value, self.setting)


class NotAcceptable(ServiceError):
    """No representation the service offers satisfies the ``Accept`` header."""

    status = 406
    title = "Not Acceptable"
    slug = "not-acceptable"

    def __init__(self, accept: str, available: list[str]) -> None:
        super().__init__(
            f"Accept: {accept!r} matches none of {', '.join(available)}; "
            "send one of them or use the format parameter",
            available=available,
        )


class MalformedBody(ServiceError):
    """A posted body cannot be decoded as the media type it claims."""

    status = 400
    title = "Malformed body"
    slug = "malformed-body"


class BodyTooLarge(LimitExceeded):
    """A posted body is over ``PE_MAX_BODY_BYTES``; refused while it is being read."""

    status = 413
    title = "Content Too Large"
    slug = "body-too-large"


class Busy(ServiceError):
    """The posted bodies the process holds would pass ``PE_POSTED_BYTES`` with this one's
    bytes: it is refused while it arrives, to be sent again in a moment (or to another
    replica, which a proxy does for a 503)."""

    status = 503
    title = "Service Unavailable"
    slug = "busy"

    def __init__(self, received: int, held: int, limit: int) -> None:
        super().__init__(
            f"the request bodies being received and worked on hold {held:,} bytes, and this "
            f"one's {received:,} so far would take them past {limit:,} (PE_POSTED_BYTES): "
            "send it again in a moment",
            limit=limit,
            requested=held + received,
            setting="PE_POSTED_BYTES",
            headers={"retry-after": "1"},
        )


class RequestTimeout(ServiceError):
    """No byte of a posted body arrived for ``PE_BODY_TIMEOUT`` seconds."""

    status = 408
    title = "Request Timeout"
    slug = "request-timeout"


class ClientGone(ServiceError):
    """The client closed the connection before its body was all sent: nobody reads the
    answer, but the status (499, as nginx counts it) says what happened."""

    status = 499
    title = "Client Closed Request"
    slug = "client-closed-request"


class UnsupportedMediaType(ServiceError):
    """A posted body's ``Content-Type`` is not one the endpoint reads."""

    status = 415
    title = "Unsupported Media Type"
    slug = "unsupported-media-type"

    def __init__(self, content_type: str | None, accepted: list[str], hint: str = "") -> None:
        """``accepted``: exactly the media types the endpoint reads; ``hint``: how to send
        one of them, where the type sent says what the client did (curl's ``-d``)."""
        shown = "no Content-Type" if not content_type else f"Content-Type {content_type!r}"
        advice = f"; {hint}" if hint else ""
        super().__init__(f"{shown} is not one of {', '.join(accepted)}{advice}", accepted=accepted)


class PlotsUnavailable(ServiceError):
    """This installation has no plotting library: the ``plots`` extra is not installed."""

    status = 501
    title = "Not Implemented"
    slug = "plots-unavailable"

    def __init__(self) -> None:
        super().__init__(
            "this installation cannot draw pictures: install the service with its plots "
            "extra (pip install '.[plots]'), as the Docker image does"
        )
