"""Key terms of a text: the exact things an answer about a manual must get right.

A key term is what a reader would copy rather than paraphrase: identifiers (``snake_case``,
``camelCase``, ``why3``, ``TA_LEFT``, dotted ``reportlab.lib.enums``, ``ALLCAPS``), function
names before ``(``, command-line options (``-placement``, ``--help``), TeX commands
(``\\newrobustcmd``), file names and paths (``fillers1.tcl``, ``~/.reportlab_settings``),
numbers (list markers such as ``1.`` at a line's start are not terms), quoted single words
(``'ignore'``) and every word of a code span (`` `opam install why3` ``, fenced blocks).
Plain prose words are never terms.

Everything is compared after ``normalize``: NFKC, lower case, backslashes dropped (a PDF's text
and a reference may or may not keep TeX's ``\\``), Unicode dashes and minus signs as ``-``,
curly quotes as straight ones, whitespace collapsed. ``recall`` is the share of terms found in
a text at token boundaries. Hand-written (no library extracts identifiers from mixed
prose/code text); the regular expressions below are the whole of it.

Used by the benches (``bench.metrics``: key-term recall of the quote and the answer) and by
the engine where an answer's terms are checked against its sources.
"""
from __future__ import annotations

import re
import unicodedata

_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d"), "-")
_QUOTES = {**dict.fromkeys(map(ord, "\u2018\u2019\u201a\u201b\u2032\u00b4"), "'"),
           **dict.fromkeys(map(ord, "\u201c\u201d\u201e\u201f\u2033"), '"')}
_LEAD = "\"'`([{<*,;:"  # stripped from a term's start ("./x", ".lef" keep their dot)
_TAIL = "\"'`.,;:!?)]}>*"  # stripped from its end
_STOP = {"e.g", "i.e", "etc", "vs", "cf", "et al"}

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.S)  # a fenced block (``` then a line break)
_TICK = re.compile(r"```([^`\n]+)```|`([^`\n]+)`")  # inline, single or triple backticks
_COMMENT = re.compile(r"(?m)(?:^|\s)#.*$")  # a comment inside code: prose, not terms
_LIST_MARK = re.compile(r"(?m)^\s*\d+[.)](?=\s)")
_OPTION = re.compile(r"(?<![\w\-/.])--?[A-Za-z][\w\-]*")
_TEX = re.compile(r"\\[A-Za-z@]+")
_PATHLIKE = re.compile(r"(?<![\w\-])~?[\w\-]*\w[./][\w\-./]*\w")
_IDENT = re.compile(r"\b(?:\w*_\w*|\w*[a-z][A-Z]\w*|[A-Za-z]+\d\w*|[A-Z]{2,}\w*)\b")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")
_NUMBER = re.compile(r"(?<![\w.\-])\d+(?:\.\d+)?(?!\w|\.\d)")
_QUOTED = re.compile(r"(?<![\w])(['\"])([^\s'\"]{1,40})\1(?!\w)")


def normalize(text: str) -> str:
    """``text`` as terms are compared (module docstring)."""
    t = unicodedata.normalize("NFKC", text or "").translate(_DASHES).translate(_QUOTES)
    return " ".join(t.replace("\\", "").lower().split())


def _clean(term: str) -> str:
    t = normalize(term).lstrip(_LEAD).rstrip(_TAIL)
    return "" if t in _STOP else t


def key_terms(text: str) -> list[str]:
    """The normalised key terms of ``text``, each once, in order of first appearance."""
    text = text or ""
    found: list[tuple[int, str]] = []
    blank = lambda m: " " * len(m.group())  # noqa: E731 (keeps offsets for the order)
    for m in _FENCE.finditer(text):
        code = _COMMENT.sub(blank, m.group(1))
        found += [(m.start(1) + w.start(), w.group()) for w in re.finditer(r"\S+", code)]
    rest = _FENCE.sub(blank, text)
    for m in _TICK.finditer(rest):
        g = 1 if m.group(1) is not None else 2
        found += [(m.start(g) + w.start(), w.group()) for w in re.finditer(r"\S+", m.group(g))]
    prose = _LIST_MARK.sub(blank, _TICK.sub(blank, rest))
    for rx in (_OPTION, _TEX, _PATHLIKE, _IDENT, _NUMBER):
        found += [(m.start(), m.group()) for m in rx.finditer(prose)]
    found += [(m.start(1), m.group(1)) for m in _CALL.finditer(prose)]
    found += [(m.start(2), m.group(2)) for m in _QUOTED.finditer(prose)]
    out: dict[str, None] = {}
    for _, raw in sorted(found, key=lambda x: x[0]):
        t = _clean(raw)
        if t and (len(t) > 1 or t.isdigit()):
            out.setdefault(t)
    return list(out)


def contains(normalized_text: str, term: str) -> bool:
    """Whether the normalised ``term`` occurs in ``normalized_text`` at token boundaries."""
    return re.search(rf"(?<![\w]){re.escape(term)}(?![\w])", normalized_text) is not None


def recall(terms: list[str], text: str) -> float | None:
    """Share of ``terms`` (from ``key_terms``) found in ``text``; None when there are none."""
    if not terms:
        return None
    norm = normalize(text)
    return sum(contains(norm, t) for t in terms) / len(terms)
