"""Feedback on answers (storage/feedback.py): a verdict stored with its logged question, its quote
and check; one per question; a library made before these tables opens and gets them."""
from __future__ import annotations

import pytest
from sqlalchemy import text

from storage import Library, QueryEntry
from storage.feedback import Feedback, QueryNotFound
from tests.support.library import PG_URL, library, meta_for, sample_tree  # noqa: F401

QUOTE = {"text": "Press the green button.", "doc": None, "node": 4, "heading": "2 › 2.1 Start",
         "page": 3, "score": 0.8}
CHECK = {"unsupported": [{"term": "--force", "kind": "option", "start": 0, "end": 7}],
         "denies_coverage": False, "number_conflict": None, "flagged": True, "line": "x"}


def _logged(lib: Library, doc_id: int | None, question: str, **parts) -> int:
    return lib.log_query(QueryEntry(question, "text", "Use --force.", doc_id=doc_id,
                                    settings={"mode": "text"},
                                    route=[{"id": 0, "status": "root"}],
                                    metrics={"ttft_ms": 1.0}, **parts))


def test_a_thumbs_down_is_stored_with_its_question_quote_and_check(library):  # noqa: F811
    doc = library.add_document(meta_for(sample_tree()), sample_tree())
    other = library.add_document(meta_for(sample_tree("Other"), "b" * 64), sample_tree("Other"))
    q1 = _logged(library, doc, "How do I start the pump?", quote=QUOTE, check=CHECK)
    q2 = _logged(library, doc, "How do I stop it?")  # logged without quote and check
    q3 = _logged(library, other, "Elsewhere?", quote=QUOTE)
    fb = Feedback(library)
    assert fb.get(q1) is None
    rated = fb.rate(q1, "down", "  names an option\nthe manual lacks ")
    assert rated.rating == "down" and rated.note == "names an option the manual lacks"
    assert rated.query.question == "How do I start the pump?"
    assert rated.query.route == [{"id": 0, "status": "root"}]
    assert rated.quote == QUOTE and rated.check == CHECK
    fb.rate(q2, "up")
    fb.rate(q3, "down")
    assert [r.query.id for r in fb.list(doc)] == [q1, q2]
    assert [r.query.id for r in fb.list(doc, rating="down")] == [q1]
    assert fb.get(q2).quote is None and fb.get(q2).check is None
    # a later verdict replaces the earlier one
    fb.rate(q1, "up")
    assert fb.list(doc, rating="down") == [] and fb.get(q1).note == ""


def test_a_verdict_on_no_logged_question_or_of_another_kind_is_one_line(library):  # noqa: F811
    fb = Feedback(library)
    with pytest.raises(QueryNotFound, match="no logged question with id 999"):
        fb.rate(999, "down")
    q = _logged(library, None, "Q?")
    with pytest.raises(ValueError, match="rating 'meh' is not one of up, down"):
        fb.rate(q, "meh")
    assert fb.get(q) is None


def test_a_library_from_before_feedback_opens_and_gets_its_tables(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    lib = Library(url)
    q = _logged(lib, None, "Asked long ago?")
    with lib.engine.begin() as conn:  # the library as an older version left it
        conn.execute(text("DROP TABLE feedback"))
        conn.execute(text("DROP TABLE query_answers"))
    lib.close()
    lib = Library(url)
    try:
        assert lib.get_query(q).question == "Asked long ago?"
        rated = Feedback(lib).rate(q, "down", "wrong")
        assert rated.quote is None and rated.query.id == q
    finally:
        lib.close()
