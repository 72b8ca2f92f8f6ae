"""The practical dev probe's data and verdicts: manuals, questions, and the per-question check.

A probe question is what a new user would ask a manual, with a Python regular expression for
the key fact (``key``, matched case-insensitively on whitespace-collapsed, NFKC-normalised
text) and the physical 1-based page(s) where the manual prints it (``pages``). Format:
bench/README.md ("The practical dev probe"). The per-question evaluation (``ProbeQuestion``,
``judge`` and the rest, re-exported here) is engine/answer/evaluation.py's, which the app's Evaluation
tab calls too, so that a bench, a test or the app score answers the same way.

Manuals (bench/probe/manuals.json) are the dev manuals of ../shared/corpus and PDFs from Debian
documentation packages, fetched and unpacked as engine.training's data step does
(``fetch_packages``) under data/probe/.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from engine.answer.evaluation import (ProbeAnswer, ProbeQuestion, Verdict, fragment,  # noqa: F401
                                      holds, judge, normal)

ROOT = Path(__file__).resolve().parents[1]
PROBE_DIR = ROOT / "bench" / "probe"
MANUALS_FILE = PROBE_DIR / "manuals.json"
QUESTIONS_FILE = PROBE_DIR / "questions.jsonl"
# the shared folder beside the repository, or H2MT_SHARED_DIR (as the tests read it)
CORPUS = Path(os.environ.get("H2MT_SHARED_DIR") or ROOT.parent / "shared") / "corpus"
DATA_DIR = ROOT / "data" / "probe"  # fetched packages (debs/, root/) and unpacked PDFs (pdf/)
KINDS = ("how", "which-option", "default", "what-does", "command", "value", "file", "syntax")
# Size buckets in pages: (name, first page count past the previous bucket's last)
BUCKETS = (("under 150 pages", 150), ("150-400 pages", 401), ("over 400 pages", None))


# -- manuals -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Manual:
    manual: str  # the key the questions use
    package: str | None  # Debian documentation package; None: a file of ../shared/corpus
    version: str | None
    path: str  # path inside the package (or the corpus file name); ".gz": gzip-compressed
    pages: int
    outline: bool
    sha256: str  # of the (uncompressed) PDF

    @property
    def bucket(self) -> str:
        return size_bucket(self.pages)


def size_bucket(pages: int) -> str:
    """The size bucket of a manual of ``pages`` pages: under 150, 150-400, over 400."""
    for name, below in BUCKETS:
        if below is None or pages < below:
            return name
    raise AssertionError("unreachable: the last bucket has no bound")


def load_manuals(path: Path = MANUALS_FILE) -> dict[str, Manual]:
    return {m["manual"]: Manual(**m) for m in json.loads(path.read_text())}


def manual_pdf(m: Manual, data_dir: Path = DATA_DIR, fetch: bool = True) -> Path:
    """The manual's PDF on disk: the corpus file, or the package's file under ``data_dir``
    (fetched with engine.training.data.fetch_packages when missing and ``fetch``; a .gz is
    unpacked to data_dir/pdf/). FileNotFoundError when it is not there; ValueError when its
    sha256 is not the one recorded (another package version)."""
    if m.package is None:
        pdf = CORPUS / m.path
    else:
        packed = data_dir / "root" / m.path
        if not packed.exists() and fetch:
            from engine.training.data import fetch_packages

            fetch_packages([m.package], data_dir)
        if not packed.exists():
            raise FileNotFoundError(f"{m.manual}: {packed} missing (package {m.package})")
        pdf = packed
        if m.path.endswith(".gz"):
            pdf = data_dir / "pdf" / Path(m.path).name[:-3]
            if not pdf.exists():
                pdf.parent.mkdir(parents=True, exist_ok=True)
                pdf.write_bytes(gzip.decompress(packed.read_bytes()))
    if not pdf.exists():
        raise FileNotFoundError(f"{m.manual}: {pdf} missing")
    if hashlib.sha256(pdf.read_bytes()).hexdigest() != m.sha256:
        raise ValueError(f"{m.manual}: {pdf} is not the recorded file (sha256 differs)")
    return pdf


# -- questions -----------------------------------------------------------------------------------

def load_questions(path: Path = QUESTIONS_FILE, manuals: dict[str, Manual] | None = None
                   ) -> list[ProbeQuestion]:
    """The probe's questions; ValueError naming the line for a bad row (unknown manual or kind,
    a regex that does not compile, a repeated id)."""
    manuals = load_manuals() if manuals is None else manuals
    out, seen = [], set()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        pages = r.get("pages", [])
        q = ProbeQuestion(str(r["id"]), r["manual"], r["question"], r["key"],
                          tuple(pages if isinstance(pages, list) else [pages]), r["kind"])
        where = f"{path.name}:{n} ({q.id})"
        if q.manual not in manuals:
            raise ValueError(f"{where}: unknown manual {q.manual!r}")
        if q.kind not in KINDS:
            raise ValueError(f"{where}: kind {q.kind!r} is not one of {', '.join(KINDS)}")
        if q.id in seen:
            raise ValueError(f"{where}: id repeated")
        if not q.key.strip():  # bench.feedback leaves it for the person to write
            raise ValueError(f"{where}: the key is empty (write a regular expression for the fact)")
        try:
            q.pattern
        except re.error as e:
            raise ValueError(f"{where}: key does not compile: {e}") from None
        if any(not 1 <= p <= manuals[q.manual].pages for p in q.pages):
            raise ValueError(f"{where}: a gold page is outside 1..{manuals[q.manual].pages}")
        seen.add(q.id)
        out.append(q)
    return out


# -- matching ------------------------------------------------------------------------------------

def page_texts(pdf: Path, pages: list[int]) -> dict[int, str]:
    """Physical 1-based pages' text as the product reads PDFs (ligatures unfolded)."""
    import pymupdf

    from engine.document.builders.pdf_pages import TEXT_FLAGS

    with pymupdf.open(pdf) as doc:
        return {p: doc[p - 1].get_text("text", flags=TEXT_FLAGS, sort=True) for p in pages}


def key_on_pages(q: ProbeQuestion, pdf: Path) -> dict[int, bool]:
    """Gold page -> whether the key's regex matches that page's text (the question file's own
    check: every gold page should say True)."""
    return {p: holds(q, text) for p, text in page_texts(pdf, list(q.pages)).items()}


@dataclass
class StoredManual:
    """A probe manual as the library stores it: its questions, its tree, the walk stood in for
    by its best ``n_sections`` sections (``ranked``: the same with each section's BM25 score),
    the page lookup the quote reads, and its document id in the library."""

    key: str
    manual: Manual
    questions: list
    tree: object
    walk: object
    page_of: object
    ranked: object
    doc_id: int


def stored_manuals(db: str, manuals: list[str] | None, n_sections: int):
    """Each probe manual (``manuals``, default every one with questions) stored in the library
    at ``db``, as a ``StoredManual``; one missing from the library is named and skipped."""
    import pymupdf

    from bench.quote_time import ranked_sections
    from engine.answer.passages.pages import _norm, locate_page
    from storage.library import Library

    lib = Library(db)
    all_manuals = load_manuals()
    questions = load_questions(manuals=all_manuals)
    for key in manuals or list(dict.fromkeys(q.manual for q in questions)):
        mine = [q for q in questions if q.manual == key]
        m = all_manuals[key]
        doc = lib.find_by_sha256(m.sha256)
        if not mine or doc is None:
            print(f"{key}: not in the library", flush=True)
            continue
        tree = lib.get_tree(doc)
        with pymupdf.open(manual_pdf(m, fetch=False)) as pdf:
            pages = [_norm(p.get_text()) for p in pdf]

        def page_of(s, pages=pages):
            return locate_page(s.text, s.page_start, s.page_end, pages)

        ranked = ranked_sections(tree, n_sections)

        def walk(question: str, ranked=ranked) -> list:
            return [s for s, _ in ranked(question)]

        yield StoredManual(key, m, mine, tree, walk, page_of, ranked, doc)
