"""The short answer: the manual's own term for a question that asks for a name, verbatim, with
the passage line that holds it and its page.

Most questions people put to a manual ask for a name (which command, key, option, function,
file or setting) and the manual prints it, usually at the head of the entry that answers
(``engine.answer.passages.units``: a signature line). The candidates are the terms the shown
passages hold (``terms``: identifiers by their form, and the head of a signature or command
line); each is described by a few plain features (``features``: where it stands, its form,
the question's words in it and in its line) and scored by a logistic model fitted on the dev
probe's manuals with one manual left out at a time (``bench.short_answer_fit``, the card in
``assets/SHORT_ANSWER_CARD.md``). The best term is given only when its score reaches the
fitted threshold; a term is never one the passages do not hold, and a why question or one
whose passages hold no term gets none.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.answer.logistic import Logistic
from engine.answer.question import Question
from engine.answer.passages.quote import Quote
from engine.answer.passages.units import is_code_line, is_command_line, signature_lines
from engine.routing import lexical
from engine.routing.identifiers import as_words
from engine.settings import SHIPPED_SHORT_ANSWER

ASSET = SHIPPED_SHORT_ANSWER

# A term by its form. No library reads identifiers out of a manual's prose (a tokenizer splits
# them, a NER model knows no \patchcmd), so the forms are written here: each pattern's group 1
# is the term.
FORMS: dict[str, re.Pattern] = {
    "latex": re.compile(r"(\\[A-Za-z@]+\*?)"),
    "option": re.compile(r"(?<![\w/.-])(--?[A-Za-z][\w-]*)"),
    "dotted": re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w(])"),
    "call": re.compile(r"(?<![\w.\\])([A-Za-z_][\w.]*)\("),
    "snake": re.compile(r"(?<![\w-])([A-Za-z]\w*_\w+)"),
    "camel": re.compile(r"(?<![\w\\])([a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*)"),
    # a path, or a dot file (".gmsh-options"; ".gz", ".tlb": a file name's extension is no term)
    "path": re.compile(r"(?<![\w])((?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)*|\.[a-z][\w-]{3,})"),
    "bracket": re.compile(r"[\[{<]([A-Za-z][\w-]*)[\]}>]"),
    "allcaps": re.compile(r"(?<![\w\\-])([A-Z][A-Z0-9]{2,})(?![\w-])"),
    "hyphenated": re.compile(r"(?<![\w-])([a-z][a-z0-9]*(?:-[a-z0-9]+){2,})(?![\w-])"),
    "key": re.compile(r"(?<!\w)((?:Ctrl|Control|Alt|Shift|Cmd|Meta|Super)(?:\+\w+)+)"),
    # a command in quotes ("systemctl daemon-reload"): a lower-case word, then at most 5 more
    "quoted": re.compile(r"[“”\"‘]([a-z][\w.-]*(?: [\w./=:-]+){0,5})[”“\"’]"),
    # an entry labelled by its name after a number or bullet: "3.4.16 histfile. Name of ..."
    "label": re.compile(r"^(?:[\d.]+\s+|[•*▷-]\s*)([^\s.]+)\.\s+[A-Z]"),
}
# a signature's or command line's head, after a prompt ("$ ", "gap> ", ">>> ") or an opening quote
_C_TYPES = r"(?:(?:const|unsigned|signed|static|extern|struct|void|int|long|short|char|double|" \
    r"float|bool)\b\s*\**\s*)*"  # a C prototype's types before its name
HEAD = re.compile(r"^\s*[▷•]?\s*(?:[\w.:-]*[$%>#]+\s+)?" + _C_TYPES
                  + r"[\"'“”‘’`]?([^\s\[{(<⟨=:,;\"'“”‘’`]+)")
WHY = re.compile(r"^\s*why\b", re.I)


@dataclass
class ShortAnswer:
    """The term shown before everything else, with the passage line that holds it."""

    term: str
    text: str  # the line of the passage that holds the term, verbatim
    page: int | None
    page_label: str | None
    score: float  # P(the term answers), the fitted model's

    def as_json(self) -> dict:
        return {"term": self.term, "text": self.text, "page": self.page,
                "page_label": self.page_label, "score": round(self.score, 4)}


@dataclass
class Term:
    """A candidate term: where it stands in the passages and what it looks like."""

    term: str
    form: str  # a key of FORMS, or "head" (a signature's or command line's head)
    line: str
    line_index: int
    passage: int  # 0: the quote
    place: int  # its order among its passage's terms
    quote: Quote


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _term_like(t: str, form: str) -> bool:
    """A head that is a capitalised word ("Set", "Return": a sentence's first word) or ends in a
    bracket or prompt sign is no term (a C prototype's types are skipped by ``HEAD``)."""
    if form != "head":
        return True
    if t[-1] in ")]}>" or (t[:1].isupper() and t.isalpha() and not any(
            c.isupper() for c in t[1:])):
        return False
    return True


def terms(passages: list[Quote]) -> list[Term]:
    """Every term the passages hold, each once (its first place), in reading order."""
    out: dict[str, Term] = {}
    for p, q in enumerate(passages):
        place = 0
        lines = _lines(q.text)
        for i, line in enumerate(lines):
            found: list[tuple[int, str, str]] = []
            head = HEAD.match(line)
            if head and (signature_lines(lines[i:i + 4]) or (is_command_line(line)
                                                            and is_code_line(line))):
                found.append((head.start(1), head.group(1).rstrip(".,;:"), "head"))
            for form, rx in FORMS.items():
                found += [(m.start(1), m.group(1).rstrip(".,;:"), form) for m in rx.finditer(line)]
            for _, t, form in sorted(found, key=lambda f: f[0]):
                if (len(t) < 2 or t in out or not re.search(r"[A-Za-z]", t)
                        or not _term_like(t, form)):
                    continue
                out[t] = Term(t, form, line, i, p, place, q)
                place += 1
    return list(out.values())


FEATURES = ("quote", "passage", "first_line", "place", "code_line", "term_in_question",
            "term_words_asked", "line_words_asked", "passages_holding", "in_heading",
            "occurrences", "line_meaning", "term_meaning",
            *(f"form_{f}" for f in ("head", *FORMS)),
            *(f"asks_{t}" for t in ("syntax", "option", "howto", "definition", "none")))


def features(question: Question, cands: list[Term], passages: list[Quote],
             encoder) -> np.ndarray:
    """One row of ``FEATURES`` per candidate; ``encoder`` (the sentence encoder,
    ``engine.routing.dense``) gives the cosine of the question to the term's line and to the
    term read as words."""
    q = question
    asked, qtype = set(q.tokens), (q.kind or "none").lower()
    line_cos, term_cos = np.zeros(len(cands)), np.zeros(len(cands))
    if cands:
        lines = list(dict.fromkeys(c.line for c in cands))
        words = list(dict.fromkeys(as_words(c.term) for c in cands))
        vecs = encoder.encode(lines + words)
        qv = q.dense if q.dense is not None else encoder.encode_query(q.text)
        sims = dict(zip(lines + words, (vecs @ qv).tolist()))
        line_cos = np.array([sims[c.line] for c in cands])
        term_cos = np.array([sims[as_words(c.term)] for c in cands])
    rows = []
    for c, lc, tc in zip(cands, line_cos, term_cos):
        words = set(lexical.tokenize(as_words(c.term)))
        line_words = set(lexical.tokenize(c.line))
        row = {
            "quote": float(c.passage == 0), "passage": float(c.passage),
            "first_line": float(c.line_index == 0), "place": min(c.place, 10) / 10,
            "code_line": float(is_code_line(c.line)),
            "term_in_question": float(c.term.lower() in q.text.lower()),
            "term_words_asked": len(words & asked) / max(1, len(words)),
            "line_words_asked": len(line_words & asked) / max(1, len(asked)),
            "passages_holding": sum(c.term in p.text for p in passages) / max(1, len(passages)),
            "in_heading": float(c.term.lower() in (c.quote.heading or "").lower()),
            "occurrences": min(sum(p.text.count(c.term) for p in passages), 5) / 5,
            "line_meaning": float(lc), "term_meaning": float(tc),
        }
        row.update({f"form_{f}": float(c.form == f) for f in ("head", *FORMS)})
        row.update({f"asks_{t}": float(qtype == t)
                    for t in ("syntax", "option", "howto", "definition", "none")})
        rows.append([row[n] for n in FEATURES])
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))


@dataclass(frozen=True)
class TermScorer(Logistic):
    """The fitted term scorer over ``FEATURES``; its threshold is the least probability a short
    answer needs."""

    @classmethod
    def load(cls, path: Path = ASSET) -> "TermScorer | None":
        """The shipped model; None when its file is not there (no short answer is given)."""
        if not Path(path).exists():
            return None
        return cls.load_checked(path, FEATURES)


def short_answer(question: Question, passages: list[Quote], scorer: TermScorer | None,
                 encoder) -> ShortAnswer | None:
    """The best term of the passages when the scorer is confident of it, else None."""
    q = question
    if scorer is None or not passages or WHY.match(q.text):
        return None
    cands = terms(passages)
    if not cands:
        return None
    p = scorer.probabilities(features(q, cands, passages, encoder))
    best = int(np.argmax(p))
    if p[best] < scorer.threshold:
        return None
    c = cands[best]
    return ShortAnswer(c.term, c.line, c.quote.page, c.quote.page_label, float(p[best]))
