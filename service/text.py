"""Text a client sent, quoted back: cut short in a message, escaped in a log line. Every
module that quotes a client uses these, so that none can grow a message without bound,
break a log line or send escape sequences to a terminal."""

from __future__ import annotations


def shown(text: str, limit: int = 60) -> str:
    """``text``, which a client sent, cut to ``limit`` characters to quote in a message."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _escape(char: str) -> str:
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def printable(text: str) -> str:
    """``text`` for a line of text: control and other unprintable characters, quotes and
    backslashes as escapes (``\\x0a``), so that no client can break a line, forge one or
    send escape sequences to a terminal."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return text
    return "".join(c if c.isprintable() and c not in '"\\' else _escape(c) for c in text)
