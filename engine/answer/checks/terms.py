"""Key terms of a text: the exact names an answer about a manual must get right.

A key term is what a reader copies rather than paraphrases (``find_terms`` gives each with its
kind and its character span):
- ``option``: ``-placement``, ``--help``, ``-Wall`` (a dash led by no word character);
- ``command``: TeX's ``\\newrobustcmd``; a SPICE dot command ``.tran``;
- ``file``: ``fillers1.tcl``, ``~/.reportlab_settings``, ``/usr/local/bin``, ``src/main.c``, URLs;
- ``identifier``: ``snake_case``, ``camelCase`` and ``LaTeX``, letters with digits (``why3``,
  ``x86_64``), dotted names (``reportlab.lib.enums``, ``std::vector``), a name before ``(``;
- ``acronym``: capital letters alone (``CMYK``, ``PDF``);
- ``number``: ``0``, ``1.5``, ``.2``, ``1,000``, ``2.3.1`` (a list marker such as ``1.`` at a
  line's start and a block number such as ``[2]`` are not; ``10ms`` and ``-1`` are not read as
  numbers);
- ``quoted``: a single word in quotes (``'ignore'``, TeX's `` `ignore' ``);
- ``code``: every name, word and number of a code span (`` `opam install why3` ``, fenced blocks;
  comments after ``#`` left out); ``operator``: ``<<<``, ``%>%``, ``:=`` in code or standing alone.
Plain prose words are never terms, so a capitalised word at a sentence's start is not one.

Everything is compared after ``normalize``: NFKC, lower case, backslashes as spaces (a PDF's
text and a reference may or may not keep TeX's ``\\``; ``\\midrule\\pseudoprefix`` keeps its two
names apart), Unicode dashes and minus signs as ``-`` and a run of dashes as one (``--prefix``,
``–prefix`` and ``—prefix`` are the same option as typeset), curly quotes as straight ones,
whitespace collapsed. ``contains`` finds a term at token boundaries (a number also not inside a
longer number). Hand-written: no library extracts identifiers from mixed prose and code; the
regular expressions below are the whole of it.

Used by the benches (key-term recall of the quote and the answer) and by
``engine.answer.checks.check`` (an answer's terms looked up in its sources).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

KINDS = ("option", "command", "file", "identifier", "acronym", "number", "quoted", "code",
         "operator")
_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d"), "-")
_QUOTES = {**dict.fromkeys(map(ord, "\u2018\u2019\u201a\u201b\u2032\u00b4"), "'"),
           **dict.fromkeys(map(ord, "\u201c\u201d\u201e\u201f\u2033"), '"')}
_LEAD = "\"'`([{<*,;:"  # stripped from a term's start ("./x", ".lef" keep their dot)
_TAIL = "\"'`.,;:!?)]}>*"  # stripped from its end
_STOP = {"e.g", "i.e", "etc", "vs", "cf", "et al", "a.k.a"}
_EXTENSIONS = frozenset(
    "c h cc cpp hpp py pyc js ts json yaml yml toml ini cfg conf txt md rst tex sty cls bib bst "
    "dtx ins pdf ps eps png jpg jpeg gif svg html htm xml css csv tsv tcl lef def lib v sv vhd "
    "sdc spef gds oas db odb sp cir spice net raw log out dat gp plt r rd rda rds ml mli mlw why "
    "sh bash zsh csh bat exe so dll a o gz tgz zip tar bz2 xz jar java rb pl pm go rs lua m "
    "afm pfb ttf otf mk cmake opam lock patch diff".split())

# a fenced block (``` then a line break); one left open (an answer cut short) runs to the end,
# as Markdown reads it
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)
_TICK = re.compile(r"```([^`\n]+)```|`([^`\n]+)`")  # inline, single or triple backticks
_COMMENT = re.compile(r"(?m)(?:^|\s)#\s.*$")  # a comment inside code: prose, not terms
_LIST_MARK = re.compile(r"(?m)^\s*\d+[.)](?=\s)|\[\d+\]")  # "1." at a line's start, "[2]"
_B = r"(?<![\w\-\\./])"  # a term starts after no word character, dash, backslash, dot or slash
_NUM_END = r"(?!\w|\.\d|,\d{3}(?!\d))"
_NUM = r"(?<![\w\-.])(?<!\d,)(?:\d{1,3}(?:,\d{3})+|\d*\.?\d+(?:\.\d+)*)" + _NUM_END  # .2 too
# (pattern name, kind, regex, group holding the term): where two matches start at one place the
# longer wins, then the earlier in this list.
_PROSE = [
    ("url", "file", re.compile(r"https?://[^\s<>\"'`]+"), 0),
    ("root", "file", re.compile(r"(?<![\w\-])(?:~|\.{1,2})?/[\w.\-~/]*\w"), 0),  # /usr, ~/.x
    ("path", "file", re.compile(_B + r"~?[\w\-]+(?:/[\w.\-]+)+"), 0),  # src/main.c (_is_path)
    ("tex", "command", re.compile(r"\\+[A-Za-z@][A-Za-z@_:]*+(?![0-9])"), 0),  # \cs_new:Npn too
    ("option", "option", re.compile(r"(?<![\w\-/.\\])--?[A-Za-z][\w\-]*"), 0),
    ("dotted", "identifier", re.compile(_B + r"\.?[A-Za-z_][\w\-]*(?:(?:\.|::)[\w\-]+)+"), 0),
    ("dot", "command", re.compile(r"(?<![\w.])\.[a-z]\w*"), 0),  # .tran (SPICE), .lef
    ("call", "identifier", re.compile(r"(?<![\w.])[A-Za-z_]\w*(?=\((?!s\)))"), 0),  # name(
    ("snake", "identifier", re.compile(_B + r"\w*_\w*"), 0),
    ("camel", "identifier", re.compile(_B + r"[A-Za-z0-9]*[a-z][A-Z][A-Za-z0-9]*"), 0),  # LaTeX
    ("caps", "identifier", re.compile(_B + r"[A-Z]{2,}[a-z]{2,}[A-Za-z0-9]*"), 0),  # HTTPServer
    ("alnum", "identifier", re.compile(_B + r"[A-Za-z]+\d[A-Za-z0-9]*"), 0),  # why3, H2MT
    ("acronym", "acronym", re.compile(_B + r"[A-Z]{2,}(?![\w])"), 0),  # not "PDFs"
    ("number", "number", re.compile(_NUM), 0),
    ("quoted", "quoted", re.compile(r"(?<![\w])(['\"])([^\s'\"`]{1,40})\1(?!\w)"), 2),
    ("texquoted", "quoted", re.compile(r"`([^\s'`]{1,40})'(?!\w)"), 1),
    ("operator", "operator", re.compile(r"(?<!\S)[<>=!&|%^~+*:$/\-]{2,4}(?!\S)"), 0),
]
_OPERATOR = re.compile(r"[<>=!&|%^~+*:$/\-]{2,4}")
_CODE_TOKEN = re.compile(r"[<>=!&|%^~+*:$]{2,4}|[\\.~/\-]*\w[\w.:@/~\\\-]*")


@dataclass(frozen=True)
class Term:
    """One key term of a text: its words as written, its kind (``KINDS``) and its span."""

    text: str
    kind: str
    start: int
    end: int

    @property
    def key(self) -> str:
        """The term as compared (``clean``)."""
        return clean(self.text)

    def as_json(self) -> dict:
        """As the answer's JSON lists it (``Answer.as_json``'s ``unsupported``)."""
        return {"term": self.text, "kind": self.kind, "start": self.start, "end": self.end}


def normalize(text: str) -> str:
    """``text`` as terms are compared (module docstring)."""
    t = unicodedata.normalize("NFKC", text or "").translate(_DASHES).translate(_QUOTES)
    t = re.sub(r"-{2,}", "-", t.replace("\\", " ").lower())
    return " ".join(t.split())


def clean(term: str) -> str:
    """A term's comparable form: normalised, without surrounding punctuation ("" for e.g.)."""
    t = normalize(term)
    if not _OPERATOR.fullmatch(t):
        t = t.lstrip(_LEAD).rstrip(_TAIL)
    if t.endswith("()"):
        t = t[:-2]
    return "" if t in _STOP else t


def _is_path(word: str) -> bool:
    """A slash-joined word is a path when it has a dot, an underscore or a digit (``src/main.c``,
    ``lib_dir/x``), not two plain words (``and/or``, ``input/output``, ``TCP/IP``)."""
    return any(c in word for c in "._~") or any(c.isdigit() for c in word)


def _kind_of_dotted(word: str) -> str:
    ext = word.rsplit(".", 1)[-1].lower()
    return "file" if "::" not in word and ext in _EXTENSIONS else "identifier"


def _code_terms(text: str, scan: str, start: int, end: int) -> list[Term]:
    """Every token of a code span (``text[start:end]``; ``scan``: the text with its dashes and
    quotes made ASCII), comments left out."""
    body = _COMMENT.sub(lambda m: " " * len(m.group()), scan[start:end])
    out = []
    for m in _CODE_TOKEN.finditer(body):
        term = _trimmed(text, scan, start + m.start(), start + m.end(), "code")
        if term is not None:
            out.append(term)
    return out


def _trimmed(text: str, scan: str, s: int, e: int, kind: str) -> Term | None:
    """The term ``text[s:e]`` without surrounding punctuation, or None when nothing is left."""
    word = scan[s:e]
    if not _OPERATOR.fullmatch(word):
        lead = len(word) - len(word.lstrip(_LEAD))
        tail = len(word) - len(word.rstrip(_TAIL))
        s, e = s + lead, e - tail
    if e <= s:
        return None
    word = scan[s:e]
    key = clean(word)
    if not key or (len(key) < 2 and not key.isdigit()):
        return None
    if kind == "code":  # a code token is named by its shape where it has one
        kind = ("operator" if _OPERATOR.fullmatch(word) else "command" if word[0] == "\\"
                else "option" if re.match(r"--?[A-Za-z]", word)
                else "number" if re.fullmatch(_NUM, word) else "code")
    return Term(text[s:e], kind, s, e)


def find_terms(text: str) -> list[Term]:
    """The key terms of ``text`` in order, spans never overlapping (module docstring)."""
    text = text or ""
    scan = text.translate(_DASHES).translate(_QUOTES)  # same length: spans stay the text's
    found: list[Term] = []
    masked = list(scan)

    def mask(s: int, e: int) -> None:
        masked[s:e] = " " * (e - s)

    for m in _FENCE.finditer(scan):
        found += _code_terms(text, scan, m.start(1), m.end(1))
        mask(m.start(), m.end())
    for m in _TICK.finditer("".join(masked)):
        g = 1 if m.group(1) is not None else 2
        found += _code_terms(text, scan, m.start(g), m.end(g))
        mask(m.start(), m.end())
    prose = _LIST_MARK.sub(lambda m: " " * len(m.group()), "".join(masked))
    candidates = []
    for rank, (name, kind, rx, g) in enumerate(_PROSE):
        for m in rx.finditer(prose):
            word = m.group(g)
            if name == "path" and not _is_path(word):
                continue
            if name == "operator" and not re.search(r"[<>=!&|%^~]", word):
                continue  # "--" as a dash, "**" as emphasis
            here = kind
            if name == "dotted":
                if all(len(p) <= 1 for p in re.split(r"\.|::", word.strip("."))):
                    continue  # e.g, i.e
                here = _kind_of_dotted(word.rstrip(_TAIL))
            elif name == "dot" and word[1:].lower() in _EXTENSIONS:
                here = "file"
            candidates.append((m.start(g), m.start(g) - m.end(g), rank, m.end(g), here))
    end = -1
    for s, _, _, e, kind in sorted(candidates):
        if s >= end:
            term = _trimmed(text, scan, s, e, kind)
            if term is not None:
                found.append(term)
                end = e
    return sorted(found, key=lambda t: t.start)


@dataclass(frozen=True)
class CodeSpan:
    """Code in a text: the whole span with its backticks, its body, and whether it is a fenced
    block."""

    start: int
    end: int
    body_start: int
    body_end: int
    block: bool


def code_spans(text: str) -> list[CodeSpan]:
    """The code of ``text`` in order: fenced blocks and inline backticks."""
    scan = text or ""
    spans = [CodeSpan(m.start(), m.end(), m.start(1), m.end(1), True)
             for m in _FENCE.finditer(scan)]
    rest = _FENCE.sub(lambda m: " " * len(m.group()), scan)
    for m in _TICK.finditer(rest):
        g = 1 if m.group(1) is not None else 2
        spans.append(CodeSpan(m.start(), m.end(), m.start(g), m.end(g), False))
    return sorted(spans, key=lambda c: c.start)


def key_terms(text: str) -> list[str]:
    """The normalised key terms of ``text``, each once, in order of first appearance."""
    return list(dict.fromkeys(t.key for t in find_terms(text)))


_OPCHARS = r"<>=!&|%^~+*:$"


def contains(normalized_text: str, term: str) -> bool:
    """Whether the normalised ``term`` occurs in ``normalized_text`` at token boundaries (a
    number also not inside a longer number: ``1`` is not in ``1.5``)."""
    if not term:
        return False
    if _OPERATOR.fullmatch(term):
        rx = rf"(?<![{_OPCHARS}]){re.escape(term)}(?![{_OPCHARS}])"
    elif re.fullmatch(r"[\d.,]+", term):
        rx = rf"(?<![\w.])(?<!\d,){re.escape(term)}{_NUM_END}"
    else:
        before = r"(?<![\w])" if re.match(r"[\w\-.]", term) else ""
        after = r"(?![\w])" if re.search(r"\w$", term) else ""
        rx = before + re.escape(term) + after
    return re.search(rx, normalized_text) is not None


def recall(terms: list[str], text: str) -> float | None:
    """Share of ``terms`` (from ``key_terms``) found in ``text``; None when there are none."""
    if not terms:
        return None
    norm = normalize(text)
    return sum(contains(norm, t) for t in terms) / len(terms)
