"""Answers marked wrong, as a question file for the dev probe (issue 46).

    python -m bench.feedback [--db URL] [--doc ID] [--out questions.jsonl]

Reads the verdicts people gave in the Ask tab or through ``rate_answer`` (storage/feedback.py)
and writes one JSON line per answer marked wrong (👎), in the dev probe's format (bench.probe,
the app's Evaluation tab): ``id``, ``manual``, ``question``, ``key`` and ``pages``. The key fact's
regular expression and the gold page(s) are for the person to write (``key`` is left empty, which
the probe refuses until it is written); what the product answered rides along to help:
``answered`` (the answer), ``quoted_page`` (where its quote began, a page the gold is probably
not on), ``heading`` (the quote's section) and ``note`` (what the person said was wrong).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from storage import Library
from storage.feedback import Feedback, Rated


def probe_line(r: Rated, manual: str | None) -> dict:
    """One answer marked wrong as a probe question (the key and the gold pages left empty)."""
    quote = r.quote or {}
    return {"id": f"feedback-{r.query.id}", "manual": manual, "question": r.query.question,
            "key": "", "pages": [], "answered": r.query.answer, "quoted_page": quote.get("page"),
            "heading": quote.get("heading"), "note": r.note}


def export(lib: Library, doc_id: int | None = None) -> list[dict]:
    """The answers marked wrong (about ``doc_id`` only when given), oldest first; ``manual`` is
    the manual's file name without its extension (None once the manual is deleted)."""
    names = {d.id: Path(d.file_name).stem for d in lib.list_documents()}
    return [probe_line(r, names.get(r.query.doc_id))
            for r in Feedback(lib).list(doc_id, rating="down")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=None, help="library URL (default: the app's, $H2MT_DB_URL "
                                               "or the data folder's SQLite file)")
    ap.add_argument("--doc", type=int, default=None, help="one manual's id (default: all)")
    ap.add_argument("--out", type=Path, default=None, help="file to write (default: stdout)")
    args = ap.parse_args(argv)
    from engine.settings import Settings, SettingsError
    from storage import StorageError

    try:
        lib = Library(Settings.from_env(db_url=args.db).database_url)
    except (SettingsError, StorageError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        lines = [json.dumps(q, ensure_ascii=False) for q in export(lib, args.doc)]
    finally:
        lib.close()
    text = "".join(line + "\n" for line in lines)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
        print(f"{len(lines)} answers marked wrong -> {args.out} (write each key's regex and "
              "gold page before probing)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
