"""The page view: a cited section or an evidence line shown where it stands in the manual.

PDF sources (the uploaded file's bytes, stored with the document): each evidence sentence is
looked up on its page with PyMuPDF (``Page.search_for``; when the extracted text differs in
spacing, hyphenation or ligatures, by matching the page's words letter for letter), highlighted
with a highlight annotation on an in-memory copy of the file, and the pages are rendered to one
PNG image (stacked when there are several). A sentence that runs over a page break is split: its
beginning is highlighted at the foot of one page, the rest at the head of the next, and both
pages are shown. A sentence not found on the pages of its section is reported, and the page is
shown without a highlight.

Markdown, HTML and text sources have no pages: the section's text is shown as Markdown with the
evidence sentences marked (``<mark>``). Everything from the manual is escaped: never markup.

Plain data in (a SourceFile, a Node, the lines); no Gradio, no engine internals.
"""
from __future__ import annotations

import html
import io
import math
import re
import unicodedata
from dataclasses import dataclass, field

from app.shared.lines import highlighted
from engine.document.tree import page_name

MIN_SPLIT_CHARS = 12  # the part of a sentence left on a page before a break: at least this long
DPI = 110  # about 935 x 1210 pixels for a letter page
MAX_PAGES = 4  # pages rendered at once (a citation spanning more shows those with highlights)
# The most pixels one rendered page may have (a letter page at DPI is about 1.1 million): a
# page that declares a huge size (an untrusted PDF can say 200 inches) is rendered at a lower
# resolution instead of allocating gigabytes.
MAX_PAGE_PIXELS = 4_000_000
PAGE_GAP = 12  # pixels between stacked pages
HIGHLIGHT = (1.0, 0.92, 0.0)  # annotation colour (yellow)


@dataclass
class Line:
    """An evidence sentence to show: its text and the page it is said to be on (None: unknown)."""

    text: str
    page: int | None = None
    score: float | None = None


@dataclass
class Placement:
    """Where one line was found: page number (1-based) -> rectangles (x0, y0, x1, y1), in PDF
    points; empty when not found."""

    line: Line
    rects: dict[int, list[tuple[float, float, float, float]]] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        return bool(self.rects)

    @property
    def split(self) -> bool:
        return len(self.rects) > 1


@dataclass
class PageView:
    """What the page view shows: a caption (Markdown), the rendered pages (PNG bytes, PDF
    sources) or the section text with the lines marked (Markdown, other sources)."""

    caption: str
    png: bytes | None = None
    markdown: str = ""
    pages: list[int] = field(default_factory=list)
    placements: list[Placement] = field(default_factory=list)
    marked: int = 0  # lines marked in the Markdown text

    @property
    def highlights(self) -> int:
        """Highlighted areas over all pages (0: no highlight)."""
        return sum(len(r) for p in self.placements for r in p.rects.values())


# -- text matching --------------------------------------------------------------------------------

def _fold(text: str) -> str:
    """Letters and digits only, lower case, compatibility-decomposed (ligatures split)."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


def _stream(pieces: list[str]) -> tuple[str, list[int]]:
    """The folded concatenation of ``pieces`` and, per character, the index of its piece."""
    chars, owner = [], []
    for i, p in enumerate(pieces):
        f = _fold(p)
        chars.append(f)
        owner.extend([i] * len(f))
    return "".join(chars), owner


def _longest_prefix(needle: str, hay: str) -> int:
    """The length of the longest prefix of ``needle`` occurring in ``hay`` (binary search:
    a prefix that occurs has every shorter prefix occurring)."""
    lo, hi = 0, len(needle)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if needle[:mid] in hay:
            lo = mid
        else:
            hi = mid - 1
    return lo


# -- PDF ------------------------------------------------------------------------------------------

class _Pdf:
    """An open PDF with its pages' words cached (1-based page numbers)."""

    def __init__(self, data: bytes):
        import pymupdf

        self.doc = pymupdf.open(stream=data, filetype="pdf")
        self._words: dict[int, list] = {}

    @property
    def n(self) -> int:
        return self.doc.page_count

    def words(self, page: int) -> list:
        if page not in self._words:
            self._words[page] = self.doc[page - 1].get_text("words")
        return self._words[page]

    def stream(self, page: int) -> tuple[str, list[int]]:
        return _stream([w[4] for w in self.words(page)])

    def rects(self, page: int, owner: list[int], start: int, end: int):
        """One rectangle per text line covering the words of folded characters [start, end)."""
        ws = self.words(page)
        by_line: dict[tuple[int, int], list[float]] = {}
        for wi in sorted(set(owner[start:end])):
            x0, y0, x1, y1, _, block, line = ws[wi][:7]
            r = by_line.get((block, line))
            by_line[(block, line)] = ([x0, y0, x1, y1] if r is None else
                                      [min(r[0], x0), min(r[1], y0), max(r[2], x1), max(r[3], y1)])
        return [tuple(r) for r in by_line.values()]

    def search(self, page: int, text: str):
        """``Page.search_for`` of the whole sentence (exact up to spacing); its rectangles."""
        flat = " ".join(text.split())
        if not flat or len(flat) > 1000:
            return []
        return [tuple(r) for r in self.doc[page - 1].search_for(flat)]


def _candidates(hint: int | None, first: int | None, last: int | None, n: int) -> list[int]:
    """Pages to look on: the line's page, then the rest of its section's pages (and one page
    either side of them, for a sentence the section's page range misses), in that order."""
    lo = max(1, (first or hint or 1) - 1)
    hi = min(n, max(last or 0, first or 0, hint or 0) + 1)
    pages = [hint] if hint and 1 <= hint <= n else []
    pages += [p for p in range(lo, hi + 1) if p not in pages]
    return pages


def place(pdf: _Pdf, line: Line, first: int | None, last: int | None) -> Placement:
    """Find ``line`` on the pages of its section: whole on one page, or split over a break."""
    out = Placement(line)
    needle = _fold(line.text)
    if not needle:
        return out
    pages = _candidates(line.page, first, last, pdf.n)
    # 1. the sentence as it stands on the page it is said to be on
    if pages and pages[0] == line.page:
        hits = pdf.search(line.page, line.text)
        if hits:
            out.rects[line.page] = hits
            return out
    # 2. letter for letter, on one page
    for p in pages:
        hay, owner = pdf.stream(p)
        at = hay.find(needle)
        if at >= 0:
            out.rects[p] = pdf.rects(p, owner, at, at + len(needle))
            return out
    # 3. over a page break: the longest beginning at the foot of page p, the rest on p + 1
    for p in pages:
        if p + 1 > pdf.n:
            continue
        hay, owner = pdf.stream(p)
        cut = _longest_prefix(needle, hay)
        if cut < MIN_SPLIT_CHARS:
            continue
        nxt, owner2 = pdf.stream(p + 1)
        at2 = nxt.find(needle[cut:])
        if at2 < 0:
            continue
        at = hay.rfind(needle[:cut])
        out.rects[p] = pdf.rects(p, owner, at, at + cut)
        out.rects[p + 1] = pdf.rects(p + 1, owner2, at2, at2 + len(needle) - cut)
        return out
    return out


def render_pdf(data: bytes, lines: list[Line], first: int | None, last: int | None,
               *, title: str = "", dpi: int = DPI, what: str = "evidence") -> PageView:
    """The pages of a section (pages ``first``..``last``) with ``lines`` highlighted
    (``what``: "passage" or "evidence", as the caption calls them, app/shared/lines.py)."""
    import pymupdf

    pdf = _Pdf(data)
    try:
        placements = [place(pdf, ln, first, last) for ln in lines]
        pages = sorted({p for pl in placements for p in pl.rects})
        if not pages:  # nothing to highlight: the page the first line names, or the section's
            start = next((ln.page for ln in lines if ln.page), None) or first or 1
            pages = [min(max(1, start), pdf.n)]
        pages = pages[:MAX_PAGES]
        images = []
        for p in pages:
            page = pdf.doc[p - 1]
            rects = [pymupdf.Rect(r) for pl in placements for r in pl.rects.get(p, [])]
            if rects:
                annot = page.add_highlight_annot(rects)
                annot.set_colors(stroke=HIGHLIGHT)
                annot.update()
            images.append(page.get_pixmap(dpi=capped_dpi(page.rect, dpi), annots=True))
        png = _stack(images)
        labels = {p: pdf.doc[p - 1].get_label() for p in pages}
    finally:
        pdf.doc.close()
    return PageView(caption=_caption(title, lines, placements, pages, labels, what), png=png,
                    pages=pages,
                    placements=placements)


def capped_dpi(rect, dpi: int, max_pixels: int = MAX_PAGE_PIXELS) -> int:
    """``dpi``, or less so that a page of ``rect`` (PDF points) renders to at most
    ``max_pixels`` pixels."""
    pixels = (rect.width * dpi / 72) * (rect.height * dpi / 72)
    if pixels <= max_pixels:
        return dpi
    return max(1, int(dpi * math.sqrt(max_pixels / pixels)))


def _stack(pixmaps) -> bytes:
    """The pixmaps one under the other, as one PNG."""
    from PIL import Image

    if len(pixmaps) == 1:
        return pixmaps[0].tobytes("png")
    imgs = [Image.open(io.BytesIO(pm.tobytes("png"))).convert("RGB") for pm in pixmaps]
    width = max(i.width for i in imgs)
    height = sum(i.height for i in imgs) + PAGE_GAP * (len(imgs) - 1)
    out = Image.new("RGB", (width, height), (120, 120, 120))
    y = 0
    for i in imgs:
        out.paste(i, (0, y))
        y += i.height + PAGE_GAP
    buf = io.BytesIO()
    out.save(buf, format="PNG")
    return buf.getvalue()


def _caption(title: str, lines: list[Line], placements: list[Placement],
             pages: list[int], labels: dict[int, str] | None = None,
             what: str = "evidence") -> str:
    """``labels``: the pages' printed labels (``Page.get_label``), shown first where they differ."""
    labels = labels or {}
    named = [page_name(p, labels.get(p)) for p in pages]
    where = named[0] if len(pages) == 1 else "pp. " + ", ".join(n[3:] for n in named)
    head = f"**{escape_md(title) or '(untitled)'}**, {where}"
    if not lines:
        return (f"{head}: no sentence of this section passed the evidence threshold, so "
                "this page has no highlight.")
    found = [p for p in placements if p.found]
    parts = [f"{head}: {highlighted(len(found), len(lines), what)}"]
    for p in placements:
        if p.split:
            a, b = sorted(p.rects)
            parts.append(f"One runs over the page break from {page_name(a, labels.get(a))} "
                         f"to {page_name(b, labels.get(b))}")
    missing = [p for p in placements if not p.found]
    if missing:
        parts.append("Not found on the page (shown without a highlight): "
                     + "; ".join(f"“{escape_md(_short(p.line.text))}”" for p in missing))
    return ". ".join(parts) + "."


# -- Markdown, HTML, text -------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|>~<])")


def escape_md(text: str) -> str:
    """Manual text shown in Markdown: HTML escaped and Markdown syntax neutralised, one line."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(" ".join((text or "").split()), quote=False))


def _short(text: str, n: int = 80) -> str:
    one = " ".join((text or "").split())
    return one if len(one) <= n else one[: n - 1] + "…"


def _spans(text: str, needle: str) -> tuple[int, int] | None:
    """The character span of ``text`` whose folded letters are ``needle`` (folded), or None."""
    chars, pos = [], []
    for i, c in enumerate(text):
        f = _fold(c)
        chars.append(f)
        pos.extend([i] * len(f))
    hay = "".join(chars)
    at = hay.find(needle) if needle else -1
    if at < 0:
        return None
    end = pos[at + len(needle) - 1] + 1
    while end < len(text) and text[end] in ".!?;:)]\"'”’":  # the sentence's closing marks
        end += 1
    return pos[at], end


def mark_text(text: str, lines: list[Line]) -> tuple[str, int]:
    """``text`` as Markdown (escaped, paragraphs kept) with each line found in it wrapped in
    ``<mark>``; (markdown, lines marked)."""
    spans = []
    for ln in lines:
        s = _spans(text, _fold(ln.text))
        if s and not any(a < s[1] and s[0] < b for a, b in spans):
            spans.append(s)
    spans.sort()
    out, at = [], 0
    for a, b in spans:
        out.append(_md_block(text[at:a]))
        out.append(_md_block(text[a:b], mark=True))
        at = b
    out.append(_md_block(text[at:]))
    return "".join(out), len(spans)


def _md_block(text: str, mark: bool = False) -> str:
    """Escaped text keeping paragraph breaks (blank lines) and line breaks; ``mark``: each
    line wrapped in <mark> (a mark never spans a paragraph break)."""
    def one(line: str) -> str:
        esc = _MD_SPECIAL.sub(r"\\\1", html.escape(" ".join(line.split()), quote=False))
        esc = f"<mark>{esc}</mark>" if mark and esc else esc
        lead = " " if line[:1].isspace() and esc else ""
        trail = " " if line[-1:].isspace() and esc else ""
        return lead + esc + trail

    paras = re.split(r"\n\s*\n", text)
    return "\n\n".join("  \n".join(one(line) for line in p.split("\n")) for p in paras)


def render_text(section_text: str, lines: list[Line], *, title: str = "",
                file_name: str = "", what: str = "evidence") -> PageView:
    """A section of a Markdown, HTML or text manual with ``lines`` marked."""
    md, marked = mark_text(section_text, lines)
    head = f"**{escape_md(title) or '(untitled)'}**"
    if file_name:
        head += f" in {escape_md(file_name)} (no pages: the section's text)"
    if not lines:
        caption = (f"{head}: no sentence of this section passed the evidence threshold, so "
                   "nothing is marked.")
    else:
        caption = f"{head}: {highlighted(marked, len(lines), what).replace('highlighted', 'marked')}."
        if marked < len(lines):
            caption = caption[:-1] + "; the others were not found in this section's text."
    return PageView(caption=caption, markdown=md, marked=marked)


def page_view(source, node, lines: list[Line], *, section_text: str | None = None,
              title: str | None = None, what: str = "evidence") -> PageView:
    """The page view of ``node`` (a stored tree Node) with ``lines`` highlighted, from the
    document's ``source`` (storage.SourceFile, or None when the library has not got the file)."""
    title = title or node.title or _short(node.text, 60)
    if source is not None and source.is_pdf:
        return render_pdf(source.data, lines, node.page_start, node.page_end, title=title,
                          what=what)
    text = section_text if section_text is not None else node.text
    view = render_text(text, lines, title=title,
                       file_name=source.file_name if source is not None else "", what=what)
    if not text.strip():
        view.markdown = "*(This section has only its heading: its text is in its subsections.)*"
    if source is None and node.page_start:
        view.caption += (" The original file is not in the library (stored by an older "
                         "version): upload it again to see its pages.")
    return view
