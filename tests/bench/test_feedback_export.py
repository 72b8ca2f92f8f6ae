"""python -m bench.feedback: the answers marked wrong as a dev-probe question file."""
from __future__ import annotations

import json

from bench.feedback import main
from storage import Library, QueryEntry
from storage.feedback import Feedback
from tests.support.library import meta_for, sample_tree

QUOTE = {"text": "Press the green button.", "doc": 1, "node": 4, "heading": "2 › 2.1 Start",
         "page": 3, "score": 0.8}


def test_export_writes_the_answers_marked_wrong_in_the_probe_format(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'lib.sqlite3'}"
    lib = Library(url)
    doc = lib.add_document(meta_for(sample_tree()), sample_tree())
    wrong = lib.log_query(QueryEntry("How do I start the pump?", "text", "Turn the key.",
                                     doc_id=doc, quote=QUOTE))
    right = lib.log_query(QueryEntry("How do I stop it?", "text", "Press red.", doc_id=doc))
    Feedback(lib).rate(wrong, "down", "it is the green button")
    Feedback(lib).rate(right, "up")
    lib.close()
    out = tmp_path / "wrong.jsonl"
    assert main(["--db", url, "--out", str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines == [{"id": f"feedback-{wrong}", "manual": "manual",
                      "question": "How do I start the pump?", "key": "", "pages": [],
                      "answered": "Turn the key.", "quoted_page": 3, "heading": "2 › 2.1 Start",
                      "note": "it is the green button"}]
    assert "1 answers marked wrong" in capsys.readouterr().err
    assert main(["--db", url, "--doc", str(doc + 1)]) == 0
    assert capsys.readouterr().out == ""
