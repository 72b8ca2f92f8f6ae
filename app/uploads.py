"""Server-side checks of an uploaded file before the engine sees it.

The engine's builders already recognise PDFs by their header and reject bad files with a
DocumentError; these checks run first so a user gets a clear message about the size and page
limits of this app without waiting for a parse.
"""
from __future__ import annotations

from pathlib import Path

ALLOWED_EXTS = (".pdf", ".md", ".markdown", ".txt", ".html", ".htm", ".json")
MAX_FILE_MB = 100
MAX_PAGES = 2000


class UploadRejected(ValueError):
    """The file breaks one of the app's limits (message shown as is)."""


def check_upload(path: str | Path, max_mb: float = MAX_FILE_MB, max_pages: int = MAX_PAGES) -> None:
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in ALLOWED_EXTS:
        raise UploadRejected(f"{path.name}: unsupported file type {ext or '(none)'!r} "
                             f"(supported: {', '.join(ALLOWED_EXTS)})")
    size = path.stat().st_size
    if size == 0:
        raise UploadRejected(f"{path.name} is empty")
    if size > max_mb * 2**20:
        raise UploadRejected(f"{path.name} is {size / 2**20:.1f} MB; the limit is {max_mb:g} MB")
    with open(path, "rb") as f:
        head = f.read(1024)
    if ext == ".pdf" or b"%PDF-" in head:
        if b"%PDF-" not in head:
            raise UploadRejected(f"{path.name} is named .pdf but is not a PDF file "
                                 "(no %PDF- header)")
        import pymupdf

        try:
            with pymupdf.open(path) as doc:
                pages = doc.page_count
        except Exception:  # damaged: let the engine produce its own precise message
            return
        if pages > max_pages:
            raise UploadRejected(f"{path.name} has {pages} pages; the limit is {max_pages}")
