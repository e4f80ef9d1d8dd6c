"""The headers of a layered answer (:mod:`service.web.layered`): what a config read, which
layer is which type, each quoted, left out past ``MAX_HEADER``."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest

from service.web import layered


def test_a_long_list_is_quoted_only_as_far_as_the_header_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """65,536 layer names would be quoted on the event loop (67 ms) to be dropped: the
    quoting stops where the header would pass MAX_HEADER."""
    calls = 0
    quote = urllib.parse.quote

    def counted(*args: Any, **kwargs: Any) -> str:
        nonlocal calls
        calls += 1
        return quote(*args, **kwargs)

    monkeypatch.setattr(urllib.parse, "quote", counted)
    assert layered.listed(["sliding_attention"] * 65536) is None
    assert calls <= layered.MAX_HEADER // len("sliding_attention, ") + 1
    fits = ["a" * 10] * ((layered.MAX_HEADER + 2) // 12)  # 8,182 characters with ", "
    assert layered.listed(fits) == ", ".join(fits)
    assert layered.listed([*fits, "b" * 10]) is None
    assert layered.listed(["é x", "head_dim=256"]) == "%C3%A9%20x, head_dim=256"
