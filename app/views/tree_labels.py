"""Which markers of the routing tree print their text: on one row of the tree (one depth), a
label that would run into one already printed is left to the marker's hover, so that counts and
titles never print over each other."""
from __future__ import annotations

PLOT_WIDTH_PX = 820  # the tree's width on the Ask tab at 1440 pixels (its left column)
CHAR_PX = 6.5  # one character of a 9-10 px label, with room
GAP_PX = 6  # the least room between two printed labels


class Rows:
    """The labels printed so far, as pixel intervals per row; ``span``: the x range the
    figure spans (its markers' x coordinates are in tree units)."""

    def __init__(self, span: float, width_px: float = PLOT_WIDTH_PX):
        self.px = width_px / max(span, 1.0)
        self.taken: dict[float, list[tuple[float, float]]] = {}

    def place(self, xs: list[float], ys: list[float], texts: list[str]) -> list[str]:
        """``texts`` with "" for each label that would overlap one printed before (these
        first, then left to right); the others are printed from now on."""
        out = list(texts)
        for i in sorted(range(len(xs)), key=lambda i: xs[i]):
            if not texts[i]:
                continue
            half = len(texts[i]) * CHAR_PX / 2 + GAP_PX / 2
            left, right = xs[i] * self.px - half, xs[i] * self.px + half
            row = self.taken.setdefault(ys[i], [])
            if any(left < r and l < right for l, r in row):
                out[i] = ""
            else:
                row.append((left, right))
        return out
