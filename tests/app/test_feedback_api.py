"""Feedback through the app's API (app/views/feedback.py): a thumbs down on a real answer is stored
with its logged question, quote and check, and the Library tab's list of answers marked wrong
shows it."""
from __future__ import annotations

import json

import pytest

from app.views.feedback import WRONG_COLUMNS

pytestmark = pytest.mark.real_model

QUESTION = "How do I loop over a comma-separated list?"


def test_thumbs_down_through_the_api_is_stored_and_listed(explorer_server):
    from gradio_client import Client

    from app.shared.examples import EXAMPLE_FILE
    from engine.ingest import ingest_file
    from storage.feedback import Feedback

    url, rt = explorer_server
    doc_id = ingest_file(EXAMPLE_FILE, rt, memories=False).doc_id
    client = Client(url, verbose=False)
    asked = json.loads(client.predict(str(doc_id), QUESTION, "quote", api_name="/ask_manual"))
    assert asked["quote"] and asked["quote"]["page"] >= 1, asked
    rated = json.loads(client.predict(asked["query_id"], "down", "quotes the wrong loop macro",
                                      api_name="/rate_answer"))
    assert rated == {"query_id": asked["query_id"], "question": QUESTION, "rating": "down",
                     "note": "quotes the wrong loop macro"}

    stored = Feedback(rt.library).get(asked["query_id"])
    assert stored.rating == "down" and stored.note == "quotes the wrong loop macro"
    assert stored.query.question == QUESTION and stored.query.doc_id == doc_id
    assert stored.query.answer == asked["answer"]
    assert stored.quote == asked["quote"]  # the quote as logged, page included
    assert any(r["status"] == "selected" for r in stored.query.route)

    table = client.predict(str(doc_id), api_name="/wrong_answers")
    rows = table["data"]
    row = next(r for r in rows if r[0] == asked["query_id"])
    assert row[WRONG_COLUMNS.index("question")] == QUESTION
    assert row[WRONG_COLUMNS.index("quote page")] == f"p. {asked['quote']['page']}"
    assert row[WRONG_COLUMNS.index("note")] == "quotes the wrong loop macro"

    # a thumbs up takes it off the list; a wrong id is one line
    client.predict(asked["query_id"], "up", "", api_name="/rate_answer")
    rows = client.predict(str(doc_id), api_name="/wrong_answers")["data"]
    assert all(r[0] != asked["query_id"] for r in rows)
    with pytest.raises(Exception, match="no logged question with id 987654"):
        client.predict(987654, "down", "", api_name="/rate_answer")
