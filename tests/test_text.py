"""Text a client sent, quoted back: cut short in messages, escaped in log lines."""

from __future__ import annotations

import pytest

from service.text import printable, shown


@pytest.mark.parametrize(
    ("sent", "logged"),
    [
        pytest.param("/v1/x", "/v1/x", id="plain"),
        pytest.param("/caf\u00e9 \u4e2d", "/caf\u00e9 \u4e2d", id="printable-unicode"),
        pytest.param("/a\nforged line", "/a\\x0aforged line", id="newline"),
        pytest.param("/a\r\t", "/a\\x0d\\x09", id="return-and-tab"),
        pytest.param("/\x1b[2J", "/\\x1b[2J", id="terminal-escape"),
        pytest.param("/\x85\x9b", "/\\x85\\x9b", id="c1-controls"),
        pytest.param("/\u2028\u202e", "/\\u2028\\u202e", id="separator-and-bidi"),
        pytest.param('/"x" \\', "/\\x22x\\x22 \\x5c", id="quote-and-backslash"),
    ],
)
def test_what_clients_send_is_escaped_in_text_lines(sent: str, logged: str) -> None:
    assert printable(sent) == logged


def test_a_long_text_is_cut_short_with_an_ellipsis() -> None:
    assert shown("x" * 100) == "x" * 59 + "…"
    assert shown("short") == "short"
