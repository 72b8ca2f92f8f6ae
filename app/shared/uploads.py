"""Server-side checks of an uploaded file before the engine sees it.

The limits are the engine's (``Settings``: ``max_upload_mb``, ``max_pages``; env H2MT_*), checked
by the same code the engine runs (``engine.ingest.preflight``), so the CLI and the app refuse the
same files with the same words. These checks run first so a user gets a clear message without
waiting for a parse; the builders reject what is only visible while parsing (damaged, encrypted
or scanned PDFs, binary junk) with a DocumentError.
"""
from __future__ import annotations

import re
from pathlib import Path

from engine.document.builders import FILE_EXTENSIONS, PDF_MAGIC
from engine.ingest import preflight
from engine.settings import Settings
from engine.document.tree import DocumentError

ALLOWED_EXTS = FILE_EXTENSIONS
MAX_NAME_CHARS = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class UploadRejected(ValueError):
    """The file breaks one of the app's rules or limits (message shown as is)."""


def check_name(name: str) -> None:
    """A plain file name: no folders, no ``..``, no control characters, not absurdly long."""
    shown = _CONTROL.sub("?", name)[:80]
    if not name.strip():
        raise UploadRejected("the file has no name")
    if "/" in name or "\\" in name:
        raise UploadRejected(f"{shown!r}: file names must not contain path separators")
    if name.startswith("..") or name in (".", ".."):
        raise UploadRejected(f"{shown!r}: file names must not start with '..'")
    if _CONTROL.search(name):
        raise UploadRejected(f"{shown!r}: file names must not contain control characters")
    if len(name) > MAX_NAME_CHARS:
        raise UploadRejected(f"{shown}…: the file name is longer than {MAX_NAME_CHARS} characters")


def check_upload(path: str | Path, settings: Settings | None = None, *,
                 name: str | None = None) -> None:
    """Raise UploadRejected unless ``path`` may go to the engine. ``name``: the name the user
    gave the file (default: the stored file's own name)."""
    settings = settings or Settings.from_env()
    path = Path(path)
    name = path.name if name is None else name
    check_name(name)
    ext = Path(name).suffix.lower()
    if ext not in ALLOWED_EXTS:
        raise UploadRejected(f"{name}: unsupported file type {ext or '(none)'!r} "
                             f"(supported: {', '.join(ALLOWED_EXTS)})")
    try:
        preflight(path, settings)  # exists, not empty, size and page limits
    except DocumentError as e:
        raise UploadRejected(str(e).replace(path.name, name, 1)) from None
    if ext == ".pdf":
        with open(path, "rb") as f:
            head = f.read(1024)
        if PDF_MAGIC not in head:
            raise UploadRejected(f"{name} is named .pdf but is not a PDF file (no %PDF- header)")
