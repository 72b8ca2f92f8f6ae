"""Positioned text lines of a PDF, shared by the outline and the font-statistics builders.

Both builders cut a document at heading *positions*, so they need every text line with its page,
its vertical position and the style of its first span, in reading order, with running headers,
footers and page numbers left out.
"""
from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass

import pymupdf

from engine.document.tree import DocumentError

# Font-name fragments that mark a bold face when the bold flag is not set (TeX fonts rarely set it:
# CMBX12 does, LMRomanDemi10 does not).
_BOLD_NAME = re.compile(r"bold|black|heavy|demi|semibold|cmbx|cmssbx|-bd|\bbx", re.IGNORECASE)
_SPAN_BOLD_FLAG = 16  # pymupdf TEXT_FONT_BOLD
_SPAN_MONO_FLAG = 8  # pymupdf TEXT_FONT_MONOSPACED
_MONO_NAME = re.compile(r"mono|courier|typewriter|consol|menlo|cmtt|sfmono|inconsolata", re.I)

# Running headers and footers live in these top/bottom fractions of the page height.
MARGIN_FRACTION = 0.1
# Page numbers sit lower or higher than running heads in some layouts (etoolbox's: docs/results.md,
# section "Phase one (tree and text evidence), quiet").
PAGE_NUMBER_FRACTION = 0.2
_LONE_NUMBER = re.compile(r"\d{1,4}|[ivxlc]{1,7}", re.IGNORECASE)
# A margin line (digits folded) repeated at the same height on this many pages is running text
# (chapter running heads may recur on only a few pages; headings print once per page range).
RUNNING_MIN_PAGES = 3


# Plain-text extraction without images; ligatures expanded ("ﬁ" -> "fi") so headings and body
# read as typed.
TEXT_FLAGS = pymupdf.TEXTFLAGS_TEXT & ~pymupdf.TEXT_PRESERVE_LIGATURES


@dataclass(frozen=True)
class TextLine:
    page: int  # 0-based page index
    y0: float  # top of the line, pymupdf coordinates (y grows downwards)
    y1: float
    x0: float
    text: str
    size: float  # font size of the line's first non-blank span, rounded to 0.1 pt
    font: str
    bold: bool
    chars: int  # non-blank characters in the line
    table: int = 0  # 1-based table of its page when the line is a table row, else 0
    mono: bool = False  # its first span is set in a monospaced (typewriter) font
    mono_end: bool = False  # its last span is (a line of code: a break there is no hyphen)

    @property
    def y_mid(self) -> float:
        return (self.y0 + self.y1) / 2


def is_bold(font: str, flags: int) -> bool:
    return bool(flags & _SPAN_BOLD_FLAG) or bool(_BOLD_NAME.search(font))


def is_mono(font: str, flags: int) -> bool:
    return bool(flags & _SPAN_MONO_FLAG) or bool(_MONO_NAME.search(font))


# A title-page line counts as the title when its size is this many times the page's body size.
TITLE_SIZE_RATIO = 1.4
TITLE_MAX_CHARS = 160


def title_page_title(doc: pymupdf.Document) -> str:
    """The document's title as printed on its first page with text: the lines set in that
    page's largest size, when it stands well above the page's common size (one heading-like
    run, at most TITLE_MAX_CHARS). Empty when the first page has no such line, so callers fall
    back (for PDFs whose metadata has no title)."""
    for lines in read_lines(doc, first=3):
        if not lines:
            continue
        sizes = Counter()
        for ln in lines:
            sizes[ln.size] += ln.chars
        common = sizes.most_common(1)[0][0]
        top = max(ln.size for ln in lines)
        if top < common * TITLE_SIZE_RATIO:
            return ""
        title = " ".join(" ".join(ln.text for ln in lines if ln.size == top).split())
        return title if 0 < len(title) <= TITLE_MAX_CHARS and re.search(r"[^\W\d_]", title) else ""
    return ""


def read_lines(doc: pymupdf.Document, first: int | None = None,
               tables: bool = True) -> list[list[TextLine]]:
    """Every page's text lines in reading order (blocks sorted top-to-bottom, left-to-right);
    ``first`` limits it to the first pages. With ``tables``, a table's rows replace the lines
    of its cells (``pdf_tables``: one line per row, cells separated by " | ")."""
    pages_out: list[list[TextLine]] = []
    for page in itertools.islice(doc, first):
        out: list[TextLine] = []
        data = page.get_text("dict", flags=TEXT_FLAGS, sort=True)
        for block in data["blocks"]:
            for line in block.get("lines", []):
                spans = [s for s in line["spans"] if s["text"]]
                text = "".join(s["text"] for s in spans).strip()
                if not text:
                    continue
                first = next(s for s in spans if s["text"].strip())
                last = next(s for s in reversed(spans) if s["text"].strip())
                x0, y0, _, y1 = line["bbox"]
                out.append(TextLine(page=page.number, y0=y0, y1=y1, x0=x0, text=text,
                                    size=round(first["size"], 1), font=first["font"],
                                    bold=is_bold(first["font"], first["flags"]),
                                    chars=sum(len(s["text"].strip()) for s in spans),
                                    mono=is_mono(first["font"], first["flags"]),
                                    mono_end=is_mono(last["font"], last["flags"])))
        pages_out.append(with_table_rows(page, out) if tables else out)
    return pages_out


def with_table_rows(page: pymupdf.Page, lines: list[TextLine]) -> list[TextLine]:
    """The page's lines with each table's cell lines replaced by its rows (``pdf_tables``)."""
    from engine.document.builders.pdf_tables import CELL_SEPARATOR, table_rows

    found = table_rows(page)
    if not found:
        return lines
    boxes = [pymupdf.Rect(rows[0][0]) | rows[-1][0] for rows in found]
    kept = [ln for ln in lines
            if not any(b.contains(pymupdf.Point(ln.x0 + 1, ln.y_mid)) for b in boxes)]
    covered = [ln for ln in lines if ln not in kept]  # the cells' own lines: the rows' style
    style = covered[0] if covered else (lines[0] if lines else None)
    for t, rows in enumerate(found, 1):
        for rect, text in rows:
            kept.append(TextLine(page=page.number, y0=rect.y0, y1=rect.y1, x0=rect.x0, text=text,
                                 size=style.size if style else 0.0,
                                 font=style.font if style else "", bold=False,
                                 chars=len(text.replace(" ", "")),
                                 table=t if CELL_SEPARATOR in text else 0))  # a caption: no row
    return sorted(kept, key=lambda ln: (ln.y0, ln.x0))


def require_text_layer(pages: list[list[TextLine]], name: str) -> None:
    if not any(pages):
        raise DocumentError(f"{name} has no text: no text layer, and no page image OCR could read")


def _running_key(line: TextLine) -> tuple[str, int]:
    folded = re.sub(r"\d+", "#", " ".join(line.text.split()).lower())
    return folded, round(line.y0 / 4)


def drop_running_lines(doc: pymupdf.Document, pages: list[list[TextLine]]) -> list[list[TextLine]]:
    """Remove running headers/footers: margin lines repeated (digits folded) on many pages.

    Page numbers fold to "#" and so are caught by the same rule. Cheap and conservative: a line
    must sit in the top or bottom margin band *and* recur at the same height.
    """
    if len(pages) < 3:
        return pages
    heights = [doc[i].rect.height for i in range(len(pages))]

    def in_margin(line: TextLine) -> bool:
        lone_number = _LONE_NUMBER.fullmatch(line.text) is not None
        if line.bold and lone_number:
            return False  # a section number printed on its own line ("3" then "Pointers")
        band = PAGE_NUMBER_FRACTION if lone_number else MARGIN_FRACTION
        h = heights[line.page]
        return line.y0 <= h * band or line.y1 >= h * (1 - band)

    seen: Counter[tuple[str, int]] = Counter()
    for lines in pages:
        seen.update({_running_key(ln) for ln in lines if in_margin(ln)})
    running = {k for k, n in seen.items() if n >= RUNNING_MIN_PAGES}
    return [[ln for ln in lines if not (in_margin(ln) and _running_key(ln) in running)]
            for lines in pages]


# A word broken at a line's end: letters, a hyphen; the next line goes on in lower case.
_BROKEN = re.compile(r"(?<![\\\w-])([^\W\d_]{2,})-$")
_GOES_ON = re.compile(r"[a-z]")
# A hyphen that a word keeps: after a capital or digit inside it ("LaTeX-", "UTF-"), or in a
# token that reads as code (a dash or backslash first, or "_", "=", "/", "." inside).
_KEEPS = re.compile(r"[A-Z\d].*-$|^[-\\]|[_=/.]")
# Same row: lines whose heights overlap by this share of the lower one (a margin note or a
# default set in a smaller size beside its key).
ROW_OVERLAP = 0.5
# A signature line (its first span monospaced or bold) and the description set indented under
# it are one paragraph when the gap between them is under this many line heights.
ENTRY_GAP = 1.6
ENTRY_INDENT = 6.0  # points the description starts right of the signature line


def dehyphenated(text: str, next_text: str) -> str | None:
    """``text`` without the hyphen that breaks its last word across the line's end, when the
    next line goes on in lower case and the word is prose (``_KEEPS``); None otherwise."""
    m = _BROKEN.search(text)
    if m is None or not _GOES_ON.match(next_text):
        return None
    word = text[:m.end()].rsplit(None, 1)[-1]
    if _KEEPS.search(word):
        return None
    return text[:-1]


def same_row(a: TextLine, b: TextLine) -> bool:
    """Whether two lines of a page share a row (``ROW_OVERLAP``)."""
    overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
    return abs(a.y0 - b.y0) < 2 or overlap >= ROW_OVERLAP * min(a.y1 - a.y0, b.y1 - b.y0)


def opens_entry(sig: TextLine, desc: TextLine) -> bool:
    """A definition entry's signature line and the first line of its description: the
    signature starts in a monospaced or bold face, the description (in neither) starts
    ``ENTRY_INDENT`` right of it, within ``ENTRY_GAP`` line heights below."""
    height = max(sig.y1 - sig.y0, 4)
    return (sig.page == desc.page and (sig.mono or sig.bold) and not (desc.mono or desc.bold)
            and desc.x0 - sig.x0 >= ENTRY_INDENT and 0 <= desc.y0 - sig.y1 < ENTRY_GAP * height)


def join_lines(lines: list[TextLine]) -> str:
    """Body text of consecutive lines: lines on one row (``same_row``) joined by a space, else
    newline; a larger vertical gap (or a new page) starts a new paragraph (blank line), except
    between a definition entry's signature and its description (``opens_entry``). A word
    hyphenated at a prose line's end is joined again ("com-" / "mands": ``dehyphenated``); a
    line of code keeps its hyphen."""
    parts: list[str] = []
    prev: TextLine | None = None
    for ln in lines:
        if prev is None:
            parts.append(ln.text)
        elif ln.table != prev.table or (ln.table and ln.page != prev.page):
            parts.append("\n\n" + ln.text)  # a table is a paragraph of its own
        elif ln.table:
            parts.append("\n" + ln.text)  # one row a line
        elif ln.page == prev.page and same_row(prev, ln):
            parts.append(" " + ln.text)
        elif ln.page == prev.page and 0 <= ln.y0 - prev.y1 < max(ln.y1 - ln.y0, 4) * 0.6:
            joined = None if prev.mono_end else dehyphenated(parts[-1], ln.text)
            if joined is not None:
                parts[-1] = joined
                parts.append(ln.text)
            else:
                parts.append("\n" + ln.text)
        elif opens_entry(prev, ln):
            parts.append("\n" + ln.text)
        else:
            parts.append("\n\n" + ln.text)
        prev = ln
    return "".join(parts)
