"""A checked answer as the Ask tab shows it (``engine.answer.checks.check``): the answer's unsupported
terms highlighted (``<mark>``), and a flagged or degenerate answer folded under the line that says
why (``<details>``, opened by a click), so the quote above stays the first thing read.

The answer is the model's Markdown; a mark outside code is an inline HTML element around the
term (its characters as entities, so Markdown reads nothing into them); a code span or a fenced
block holding a marked term becomes the same code as HTML (``<code>``, ``<pre><code>``), since
Markdown shows a ``<mark>`` inside backticks as text.
"""
from __future__ import annotations

import html

from app.shared.lines import FOLDED_READING
from engine.answer.checks.terms import code_spans

_ENTITIES = {ord(c): f"&#{ord(c)};" for c in "\\`*_[]<>&#|~"}


def _entities(text: str) -> str:
    """``text`` with every character Markdown or HTML could read as markup as an entity."""
    return text.translate(_ENTITIES)


def _marked_code(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> str:
    """HTML of ``text[start:end]`` with ``spans`` (inside it) in ``<mark>``."""
    out, at = [], start
    for s, e in spans:
        out += [html.escape(text[at:s]), f"<mark>{html.escape(text[s:e])}</mark>"]
        at = e
    out.append(html.escape(text[at:end]))
    return "".join(out)


def marked_answer(text: str, spans: list[tuple[int, int]]) -> str:
    """The answer's Markdown with the character ``spans`` of ``text`` highlighted (module
    docstring); spans must not overlap."""
    spans = sorted(spans)
    if not spans:
        return text
    out, at = [], 0
    codes = [c for c in code_spans(text)
             if any(c.body_start <= s and e <= c.body_end for s, e in spans)]
    for c in codes:  # code holding a marked term, as HTML
        before = [(s, e) for s, e in spans if at <= s and e <= c.start]
        out.append(_marked_prose(text, at, c.start, before))
        inside = [(s, e) for s, e in spans if c.body_start <= s and e <= c.body_end]
        body = _marked_code(text, c.body_start, c.body_end, inside)
        out.append(f"\n<pre><code>{body}</code></pre>\n" if c.block else f"<code>{body}</code>")
        at = c.end
    out.append(_marked_prose(text, at, len(text), [(s, e) for s, e in spans if s >= at]))
    return "".join(out)


def _marked_prose(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> str:
    out, at = [], start
    for s, e in spans:
        out += [text[at:s], f"<mark>{_entities(text[s:e])}</mark>"]
        at = e
    out.append(text[at:end])
    return "".join(out)


def folded(line: str, body: str) -> str:
    """``body`` (Markdown) folded under ``line``: a click on the line opens it."""
    return (f'<p class="fold-label">{html.escape(FOLDED_READING)}</p>\n'
            f'<details class="answer-fold"><summary>{html.escape(line)}</summary>\n\n{body}\n\n'
            "</details>")


def answer_markdown(text: str, unsupported: list[dict], fold_line: str | None = None) -> str:
    """The answer as shown: ``text`` with its ``unsupported`` terms (the Answer's JSON list:
    term, kind, start, end) highlighted, folded under ``fold_line`` when one is given (the
    check's line)."""
    spans = [(u["start"], u["end"]) for u in unsupported]
    body = marked_answer(text, spans)
    return folded(fold_line, body) if fold_line else body
