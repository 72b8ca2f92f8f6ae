"""Tables on PDF pages, kept as tables: ``Page.find_tables`` finds them, and each row becomes one
text line "cell | cell | cell" at the row's position, in place of the lines the table's cells
held, so a row is a unit that can be quoted (with the table's header, ``engine.answer.passages``)
and highlighted whole.

``find_tables`` is slow (measured in docs/results.md, section "Issue 45: tables"), so it runs
only where a page plausibly holds a table: at least a grid of three heights and three
horizontal positions among the ruling lines and rectangle edges of its vector drawings
(``get_drawings``, far cheaper). Borderless tables are not looked for: the cost would fall on
every page.
Cell text is read from the page's words inside each cell (``extract`` drops the spaces of PDFs
that position words instead of writing spaces).
"""
from __future__ import annotations

import numpy as np
import pymupdf

MIN_ROWS = 2  # a table worth finding: a header and a row ...
MIN_COLUMNS = 2  # ... of two columns
CELL_SEPARATOR = " | "


def plausible_table(page: pymupdf.Page) -> bool:
    """A grid among the page's drawings: ruling lines or rectangle edges at ``MIN_ROWS`` + 1
    heights and at ``MIN_COLUMNS`` + 1 horizontal positions or more (a code listing's box, or a
    stack of them, has two)."""
    ys: set[int] = set()
    xs: set[int] = set()
    for path in page.get_drawings():
        for item in path["items"]:
            if item[0] == "l":
                a, b = item[1], item[2]
                if abs(a.y - b.y) < 1 and abs(a.x - b.x) > 5:
                    ys.add(round(a.y))
                elif abs(a.x - b.x) < 1 and abs(a.y - b.y) > 5:
                    xs.add(round(a.x))
            elif item[0] == "re":
                r = item[1]
                ys.update((round(r.y0), round(r.y1)))
                xs.update((round(r.x0), round(r.x1)))
    return len(ys) > MIN_ROWS and len(xs) > MIN_COLUMNS


def table_rows(page: pymupdf.Page) -> list[list[tuple[pymupdf.Rect, str]]]:
    """Per table on the page (at least 2 rows and 2 columns with text), its rows as
    (row rectangle, "cell | cell" text), top to bottom; [] where no table is plausible. Leading
    rows of one cell (a caption spanning the table) come as lines without a separator."""
    if not plausible_table(page):
        return []
    words = page.get_text("words", sort=True)
    centres = _word_centres(words)
    out = []
    for table in page.find_tables().tables:
        rows = []
        for row in table.rows:
            cells = [_cell_text(words, centres, c) if c is not None else "" for c in row.cells]
            if sum(1 for c in cells if c) >= 1:
                rows.append((pymupdf.Rect(row.bbox), cells))
        width = max((sum(1 for c in cells if c) for _, cells in rows), default=0)
        if len(rows) >= 2 and width >= 2:
            out.append([(rect, CELL_SEPARATOR.join(c for c in cells if c)) for rect, cells in rows])
    return out


def _word_centres(words: list) -> np.ndarray:
    """The words' centres as MuPDF's single-precision points (n x 2)."""
    if not words:
        return np.zeros((0, 2), dtype=np.float32)
    boxes = np.array([w[:4] for w in words], dtype=np.float64)
    return np.stack([(boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2],
                    axis=1).astype(np.float32)


def _cell_text(words: list, centres: np.ndarray, cell) -> str:
    """The words whose centre lies in the cell, in reading order. The test is MuPDF's
    ``fz_is_point_inside_rect`` (x0 <= x < x1, y0 <= y < y1, in single precision), written with
    numpy: through ``Rect.contains`` it cost two thirds of the ngspice manual's indexing time
    (3.5 million calls, 131 s of 208)."""
    x0, y0, x1, y1 = np.asarray(tuple(cell), dtype=np.float32)
    x, y = centres[:, 0], centres[:, 1]
    inside = np.flatnonzero((x >= x0) & (x < x1) & (y >= y0) & (y < y1))
    return " ".join(words[i][4] for i in inside)
