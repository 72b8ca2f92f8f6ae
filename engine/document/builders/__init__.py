"""Raw tree builders (H2MT 3.1, before token-limit splitting), one per input kind.

``build_raw_tree`` picks the builder by content first, then by extension:
- a ``%PDF-`` header: the outline builder when the PDF has one that is not junk, else font
  statistics, else one node per page (``pdf_chain``: a failing builder hands over to the next);
- any other format by its extension, from the ``FORMATS`` table (Markdown, HTML, plain text and
  extension-less text: the markup builders; ``.json``: the ORD-QA documentation format). A new
  format is one builder module and one row of that table.
Every problem a user can cause (empty, unreadable, unsupported, no text layer) is a DocumentError.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from engine.document.ocr import ocr_pages

from engine.document.tree import DocumentError, Tree

PDF_MAGIC = b"%PDF-"


@dataclass(frozen=True)
class Format:
    """A text document format: its name, its media type (how its stored file is served) and
    its builder, ``build(text, title, file_name) -> Tree`` (imported when first used)."""

    name: str
    media_type: str
    build: Callable[[str, str, str], Tree]


def _markdown(text: str, title: str, _name: str) -> Tree:
    from engine.document.builders.markup import build_markdown_tree
    return build_markdown_tree(text, title)


def _html(text: str, title: str, _name: str) -> Tree:
    from engine.document.builders.markup import build_html_tree
    return build_html_tree(text, title)


def _plain(text: str, title: str, _name: str) -> Tree:
    from engine.document.builders.markup import build_text_tree
    return build_text_tree(text, title)


def _ordqa(text: str, title: str, name: str) -> Tree:
    from engine.document.builders.ordqa import build_ordqa_tree
    return build_ordqa_tree(text, title, name)


_MARKDOWN = Format("Markdown", "text/markdown", _markdown)
_HTML = Format("HTML", "text/html", _html)
_TEXT = Format("plain text", "text/plain", _plain)
# Every text format by extension (lower case, with its dot; "" = a file without one): the one
# table that uploads, ingest, the command line and training read. PDF is told by its header.
FORMATS: dict[str, Format] = {
    ".md": _MARKDOWN, ".markdown": _MARKDOWN, ".html": _HTML, ".htm": _HTML, ".txt": _TEXT,
    "": _TEXT, ".json": Format("ORD-QA documentation JSON", "application/json", _ordqa),
}
PDF_MEDIA_TYPE = "application/pdf"
# Every extension a user may upload (extension-less text files are accepted too).
FILE_EXTENSIONS = (".pdf", *(ext for ext in FORMATS if ext))
SUPPORTED = ", ".join(FILE_EXTENSIONS)


def media_type(path: Path, data: bytes) -> str:
    """The media type a stored file is served with: a PDF by its header, else its format's."""
    if PDF_MAGIC in data[:1024]:
        return PDF_MEDIA_TYPE
    found = FORMATS.get(Path(path).suffix.lower())
    return found.media_type if found is not None else "application/octet-stream"


def _with_text(tree: Tree, name: str) -> Tree:
    """The tree, if some node has body text: a file of headings, scripts or styles alone is
    nothing to read (it would go in as empty sections and answer nothing)."""
    if not any(n.text.strip() for n in tree.preorder()):
        raise DocumentError(f"{name} has no text to read (only headings or markup)")
    return tree


def build_raw_tree(path: Path, ocr_languages: str = "eng",
                   progress: Callable[[int, int], None] | None = None) -> Tree:
    """The document's tree before token-limit splitting. A PDF's scanned pages are read by OCR
    in ``ocr_languages`` (``engine.document.ocr``), with ``progress(done, total)`` per page."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DocumentError(f"{path.name}: file not found") from None
    except IsADirectoryError:
        raise DocumentError(f"{path.name} is a folder, not a document") from None
    except OSError as exc:
        raise DocumentError(f"{path.name} cannot be read: {exc.strerror or exc}") from None
    if not data.strip():
        raise DocumentError(f"{path.name} is empty")

    ext = path.suffix.lower()
    # A PDF is recognised by its header (some writers put a few bytes before it).
    if PDF_MAGIC in data[:1024]:
        return _with_text(_build_pdf(path, data, ocr_languages, progress), path.name)
    if ext == ".pdf":
        raise DocumentError(f"{path.name} is named .pdf but is not a PDF file")

    found = FORMATS.get(ext)
    if found is not None:
        return _with_text(found.build(_decode_text(path, data), path.stem, path.name), path.name)
    raise DocumentError(f"{path.name}: unsupported file type {ext!r} (supported: {SUPPORTED})")


def _decode_text(path: Path, data: bytes) -> str:
    """UTF-16/32 with their byte-order mark, UTF-8 (with or without BOM), else Windows-1252
    (Latin-1 where 1252 leaves a byte undefined), when the result still looks like text."""
    import codecs

    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                       (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):  # UTF-32-LE's mark starts with UTF-16-LE's: checked first
            try:
                return _text_or_junk(path, data.decode(codec))
            except UnicodeDecodeError:
                raise DocumentError(f"{path.name} is a damaged {codec.upper()} text "
                                    "(its byte-order mark says so, its bytes do not)") from None
    if b"\x00" in data[:8192]:
        raise DocumentError(f"{path.name} is a binary file, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            text = data.decode("cp1252")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
    return _text_or_junk(path, text)


def _text_or_junk(path: Path, text: str) -> str:
    sample = text[:8192]
    # Control characters other than tab/newline/CR/form feed mean binary junk.
    junk = sum(1 for c in sample if (ord(c) < 32 and c not in "\t\n\r\f") or 0x7f <= ord(c) < 0xa0)
    if junk > max(2, len(sample) // 100):
        raise DocumentError(f"{path.name} is a binary file, not text")
    return text


def _build_pdf(path: Path, data: bytes, ocr_languages: str,
               progress: Callable[[int, int], None] | None) -> Tree:
    import pymupdf

    damaged = (f"{path.name} is a damaged PDF (truncated or corrupt); export or download it "
               "again")
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # MuPDF raises several types for damaged files
        raise DocumentError(f"{damaged} ({exc})") from None
    with doc:
        if doc.needs_pass:
            raise DocumentError(f"{path.name} is password-protected; remove the password first")
        # MuPDF silently rebuilds a broken cross-reference table: what it recovers from a cut or
        # overwritten file is an arbitrary part of the manual, so it is refused, not indexed.
        if doc.is_repaired or doc.page_count == 0:
            raise DocumentError(damaged)
        mupdf_errors = (RuntimeError, pymupdf.FileDataError,
                        getattr(pymupdf.mupdf, "FzErrorBase", RuntimeError))
        try:
            scanned = ocr_pages(doc, ocr_languages, progress)
            tree = _build_pdf_tree(doc, path, scanned.pages)
        except mupdf_errors as exc:  # damage MuPDF only notices while reading pages or outline
            raise DocumentError(f"{damaged} ({type(exc).__name__}: {exc})") from None
        if doc.is_repaired:  # broken objects met (and patched over) while reading the pages
            raise DocumentError(damaged)
        if scanned.pages:
            tree = replace(tree, ocr_pages=scanned.pages, text_layer_pdf=doc.tobytes())
        return tree


def _build_pdf_tree(doc, path: Path, scanned: frozenset[int] = frozenset()) -> Tree:
    from engine.document.builders.pdf_pages import title_page_title

    # The PDF's own title, else the one printed on its title page, else the file's name.
    title = ((doc.metadata or {}).get("title", "").strip() or title_page_title(doc)
             or path.stem)
    from engine.document.builders.pdf_chain import build_pdf_tree
    # OCR'd text has no typography: a mostly scanned PDF skips the fonts builder
    tree = build_pdf_tree(doc, path, title, fonts=len(scanned) * 2 <= doc.page_count)
    return replace(tree, page_labels=page_labels(doc))


def page_labels(doc) -> tuple[str, ...]:
    """Every page's printed label (``Page.get_label``; "" where none), or () when the PDF
    defines no labels at all, so that pages are shown by their physical number."""
    if not doc.get_page_labels():
        return ()
    return tuple(page.get_label() or "" for page in doc)
