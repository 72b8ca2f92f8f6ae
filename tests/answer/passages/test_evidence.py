"""Evidence lines on a real PDF (etoolbox's manual) with the real sentence encoder."""
from __future__ import annotations

import pymupdf
import pytest

from engine.answer.passages.evidence import THRESHOLD, Section, evidence_lines, scored_lines
from engine.answer.passages.pages import PageTexts, locate_page
from engine.answer.passages.units import split_sentences


@pytest.fixture(scope="module")
def encoder():
    from engine.routing.dense import load_encoder

    return load_encoder("cpu")


@pytest.fixture(scope="module")
def etoolbox(shared_dir, corpus_tree):
    path = shared_dir / "corpus" / "etoolbox-manual.pdf"
    tree = corpus_tree("etoolbox-manual.pdf")
    files = PageTexts()
    # the sections of chapters 3.4-3.6 (pages 13-16, patching among them): a route's worth
    sections = [Section(1, n.id, n.title, n.text, n.page_start, n.page_end)
                for n in tree.preorder() if n.text.strip() and 13 <= (n.page_start or 0) <= 16]
    return path, tree, files, sections


def _on_page(path, page: int, sentence: str) -> bool:
    from engine.answer.passages.pages import _norm

    with pymupdf.open(path) as doc:
        return _norm(sentence)[:40] in _norm(doc[page - 1].get_text())


def test_split_sentences():
    text = ("This command patches a macro. It takes five arguments!\n\nSee Section 3.2 for\n"
            "details on \\patchcmd. Short one.\nContents . . . . . . . . 12")
    assert split_sentences(text) == ["This command patches a macro.", "It takes five arguments!",
                                     "See Section 3.2 for details on \\patchcmd."]


def test_evidence_lines_carry_their_pages(encoder, etoolbox):
    path, tree, files, sections = etoolbox
    answer = ("To patch a command, use \\patchcmd. It extracts the replacement text of a "
              "command, replaces search with replace, and reassembles the command.")
    lines = evidence_lines(encoder, answer, sections, pages_of=lambda s: files.get("etoolbox", path.read_bytes))
    assert lines and all(e.score >= THRESHOLD for e in lines)
    assert lines == sorted(lines, key=lambda e: -e.score)
    assert "extracts the replacement text" in lines[0].text
    for e in lines:
        node = tree.node(e.node_id)
        assert e.page is not None and node.page_start <= e.page <= node.page_end
        assert _on_page(path, e.page, e.text)


def test_page_of_a_sentence_in_a_section_over_two_pages(etoolbox):
    """\\docsvlist runs over pages 28-29: a sentence of its second page is found there, and
    without the file the page is unknown rather than guessed."""
    path, tree, files, _ = etoolbox
    node = next(n for n in tree.preorder() if n.title == "\\docsvlist")
    assert node.page_end > node.page_start
    pages = files.get("etoolbox", path.read_bytes)
    found = {locate_page(s, node.page_start, node.page_end, pages) for s in split_sentences(node.text)}
    assert found == {node.page_start, node.page_end}
    for s in split_sentences(node.text):
        p = locate_page(s, node.page_start, node.page_end, pages)
        assert _on_page(path, p, s)
    assert locate_page(split_sentences(node.text)[0], node.page_start, node.page_end, None) is None


def test_no_evidence_line_below_the_threshold(encoder, etoolbox):
    """An answer the manual does not support gets no line at all, though some sentence is
    always the closest one."""
    _, _, files, sections = etoolbox
    answer = "The museum opens at nine in the morning and tickets cost twelve euros for adults."
    assert scored_lines(encoder, answer, sections)[0].score < THRESHOLD
    assert evidence_lines(encoder, answer, sections, pages_of=lambda s: None) == []
