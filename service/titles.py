"""A picture's title within its width: its lines broken at spaces where the glyphs of
matplotlib's font say they pass it, each into two lines at most, the last cut short with
"…" where more would follow. A long title (a longrope's factors) neither passes the
picture's edges nor leaves the picture no room; matplotlib is imported on first use."""

from __future__ import annotations

import functools
from typing import Final

# the titles' font size (matplotlib's name), and how many lines each line may wrap into
TITLE_SIZE: Final = "medium"
LINES: Final = 2
ELLIPSIS: Final = "\u2026"


@functools.lru_cache(maxsize=1024)
def _advance(char: str) -> float:
    """How wide ``char`` is in a title, in points: a line is at most as wide as the sum of
    its characters (kerning only narrows it)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    font = FontProperties(size=TITLE_SIZE)
    width, _, _ = text_to_path.get_text_width_height_descent(char, font, ismath=False)
    return float(width)


def points(text: str) -> float:
    """How wide ``text`` is in a title, in points, at most."""
    return sum(_advance(char) for char in text)


def cut(text: str, width: float) -> str:
    """``text`` within ``width`` points: whole, or its longest head that fits with "…"."""
    if points(text) <= width:
        return text
    room, kept = width - _advance(ELLIPSIS), 0
    for char in text:
        room -= _advance(char)
        if room < 0:
            break
        kept += 1
    return text[:kept].rstrip() + ELLIPSIS


def wrap(title: str, width: float) -> str:
    """``title``'s lines broken at spaces into lines of at most ``width`` points, each into
    at most :data:`LINES`, the last cut short with "…" where more would follow."""
    out: list[str] = []
    for line in title.splitlines():
        lines = [""]
        # no line holds more characters than this: the narrowest glyph is over 2 points
        for word in line[: int(LINES * width / 2) + 1].split(" "):
            joined = f"{lines[-1]} {word}" if lines[-1] else word
            if lines[-1] and points(joined) > width:
                lines.append(word)
            else:
                lines[-1] = joined
            if len(lines) > LINES:
                break
        if len(lines) > LINES:  # more follows: the last line kept says so
            lines = lines[:LINES]
            lines[-1] = cut(lines[-1] + ELLIPSIS, width)
        out.extend(cut(each, width) for each in lines)
    return "\n".join(out)
