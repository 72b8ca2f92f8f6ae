"""Evidence hygiene: find tables of contents and back-of-book indexes and mark their nodes.

A printed table of contents or index repeats every title and term of a manual next to page
numbers; left in the routing evidence it wins every word match, and in an answer's context it
cites nothing useful. ``mark_evidence_hygiene`` gives such nodes ``kind`` "toc" or "index";
routing (``routing.evidence``) and answering (``answer.modes``) leave those kinds out.

Detection (``page_kind``) is line-based and reads both shapes of PDF text met in practice: a tree
node's body, where an entry's parts share one line ("1.1 The R environment . . . 3"), and a raw
``page.get_text()``, where they come on separate lines ("1.1" / "The R environment" / ". . ." /
"3"). Fragments that are only a section number, a dot leader or a page number are first joined
back onto their entry. A logical line of at most ``MAX_ENTRY_CHARS`` characters is then:

- a *leader* entry: at least three leader dots, then a page number ("Title ..... 12");
- a *titled* entry: a title with a run of three letters, whose last word has two or more
  characters and does not end in a digit or operator, then a page number ("Canvas size 32");
- an *index* entry: a term, then a comma and page numbers, or two or more comma-separated page
  numbers ("\\patchcmd, 12, 15", "foo 12, 34"; ranges such as "65–67" allowed); a short line
  (at most 5 words) directly followed by an index entry is its head term and counts as one too.

A page number is 1 to 1999 or lower-case roman: 0 is not one (table rows end in 0), nor is a year
("May 1, 2002" is no index entry), nor a section number such as "3.3.1" (a revision history
that points at sections with dot leaders stays).
A table of contents runs forward, an index is alphabetical: leader and titled entries are
contents only when their page numbers are at least ``MONOTONE_MIN`` forward-running
(``_monotone``); otherwise leader entries count as index entries (R's indexes are set with dot
leaders) and titled ones for nothing (they look like a table). Lines without two consecutive
letters or digits (index letter heads "A", "! >") are not counted. The verdict: "toc" / "index"
when the entries of that kind are at least ``MIN_FRACTION`` of the counted lines and at least
``MIN_LINES`` in number. Over every page and raw-tree node of the nine corpus manuals, the
highest entry share of a text not flagged is 0.33 (three-line texts) and 0.25 for larger ones
(ngspice's parameter tables); the lowest of a real contents or index page is 0.54 (etoolbox's
page 1: title block, contents and the first section on one page).
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import replace
from typing import Callable, Iterator

from engine.document.matter import matter_kind
from engine.document.tree import ROOT, Node, Tree

MIN_FRACTION = 0.5  # entries of the winning kind / counted lines
MIN_LINES = 3  # and at least this many of them
MONOTONE_MIN = 0.75  # forward-running share of page numbers for a table of contents
MAX_ENTRY_CHARS = 400  # longer logical lines are prose, never entries (and keep regexes linear)
INDEX_HEAD_WORDS = 5

_PAGE = r"(?:[1-9]\d{0,2}|1\d{3}|[ivxlc]{1,7})"
_PAGE_RANGE = rf"{_PAGE}(?:\s*[–—-]\s*{_PAGE})?"
# Fragments of a split entry: a bare section/page number, or a bare dot leader (+ page).
_BARE_NUMBER = re.compile(r"\d{1,4}(?:\.\d{1,3})*|[A-Z](?:\.\d{1,3})*|[IVXLC]{1,7}|[ivxlc]{1,7}")
_BARE_LEADER = re.compile(rf"(?:[.·…]\s*){{3,}}{_PAGE}?")
_TAIL_PAGE = re.compile(rf"[\s.·…]{_PAGE}$")  # applied to the last 9 characters only
_LEADER = re.compile(rf"(?:[.·…]\s*){{3,}}({_PAGE})(?:\s|$)")
_PAGE_ONLY = re.compile(_PAGE)
_TITLE_WORD = re.compile(r"[A-Za-z]{3}")
_NOT_TITLE_END = frozenset("0123456789.,;:([=+*/–—-")
_INDEX = re.compile(rf"[^\d\s].*?(?:,\s*{_PAGE_RANGE}(?:\s*,\s*{_PAGE_RANGE})*"
                    rf"|\s{_PAGE_RANGE}(?:\s*,\s*{_PAGE_RANGE})+)")
_COUNTED = re.compile(r"[^\W_]{2}")
_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}

# Titles of whole contents / index sections, optionally numbered ("Appendix D Function and
# variable index", "VI Index", "Table of contents").
_NUMBERING = (r"(?:(?:appendix|chapter|part|section)\s+)?"
              r"(?:[0-9]+(?:\.[0-9]+)*|[a-z]|[ivxlc]+)?[.:)]?\s*")
_TOC_TITLE = re.compile(rf"{_NUMBERING}(?:table\s+of\s+)?contents", re.IGNORECASE)
_INDEX_TITLE = re.compile(rf"{_NUMBERING}(?:(?:[\w-]+\s+){{0,4}}index(?:es)?|index\s+of\s+.+)",
                          re.IGNORECASE)


def page_kind(text: str) -> str | None:
    """"toc", "index" or None for a page or node body (rules and thresholds: module docstring)."""
    return _verdict(*entry_counts(text))


def _verdict(toc: int, index: int, counted: int) -> str | None:
    need = max(MIN_LINES, MIN_FRACTION * counted)
    if toc >= need and toc >= index:
        return "toc"
    if index >= need:
        return "index"
    return None


def entry_counts(text: str) -> tuple[int, int, int]:
    """(contents entries, index entries, counted lines) of a text, as ``page_kind`` weighs them."""
    lines = [ln for ln in _logical_lines(text or "") if _COUNTED.search(ln)]
    leader_pages: list[int] = []
    toc_pages: list[int] = []
    is_index = [False] * len(lines)
    for i, ln in enumerate(lines):
        if len(ln) > MAX_ENTRY_CHARS:
            continue
        # cheap character tests first: most lines of a manual are prose
        if (ln.count(".") + ln.count("·") + 3 * ln.count("…") >= 3
                and (m := _LEADER.search(ln))):
            leader_pages.append(_page_value(m.group(1)))
            toc_pages.append(leader_pages[-1])
        elif "," in ln and _INDEX.fullmatch(ln):
            is_index[i] = True
        elif (page := _titled_page(ln)) is not None:
            toc_pages.append(page)
    heads = sum(1 for i in range(len(lines) - 1)
                if is_index[i + 1] and not is_index[i] and _is_index_head(lines[i]))
    index = sum(is_index) + heads
    if _monotone(toc_pages) >= MONOTONE_MIN:
        return len(toc_pages), index, len(lines)
    return 0, index + len(leader_pages), len(lines)


def title_kind(title: str) -> str | None:
    """"toc" for a contents heading, "index" for an index heading, else None."""
    t = " ".join((title or "").split())
    if _TOC_TITLE.fullmatch(t):
        return "toc"
    if _INDEX_TITLE.fullmatch(t):
        return "index"
    return None


def mark_evidence_hygiene(tree: Tree) -> Tree:
    """A copy of ``tree`` whose table-of-contents and index nodes have kind "toc" / "index",
    and whose other front and back matter (``engine.document.matter``: title pages, command
    summaries, glossaries) has kind "titlepage" / "listing".

    Three rules, in document order:
    - a node titled as a contents or index section (``title_kind``) whose subtree's body texts
      together are one (``page_kind``) is marked with all its descendants, with the kind its
      title names (R's indexes are set with dot leaders, like a contents page);
    - any other node is marked when its own body text is one;
    - an untitled piece of a split body (too short to judge alone, e.g. one contents line) is
      marked when the entry counts of it and its untitled neighbour pieces together make one,
      and at least ``MIN_FRACTION`` of its own lines are entries of that kind.
    Ids, order, titles, texts and pages are unchanged; the root keeps kind "root". The input
    tree is not modified. Works on raw and on token-split trees.
    """
    counts: dict[int, tuple[int, int, int]] = {}

    def counts_of(node: Node) -> tuple[int, int, int]:
        if node.id not in counts:
            counts[node.id] = entry_counts(node.text)
        return counts[node.id]

    kinds: dict[int, str] = {}
    for node in tree.preorder():
        if node.id == ROOT or node.id in kinds:
            continue
        by_title = title_kind(node.title)
        if by_title is not None:
            sub = list(_subtree(tree, node.id))
            if page_kind("\n".join(n.text for n in sub if n.text)) is not None:
                kinds.update((n.id, by_title) for n in sub)
                continue
        own = counts_of(node)
        found = _verdict(*own)
        if found is None and not node.title and node.text and node.parent is not None:
            found = _kind_in_context(tree, node, own, counts_of)
        if found is not None:
            kinds[node.id] = by_title or found
        elif (shaped := matter_kind(node.text, node.page_start, tree.pages,
                                            node.title)) is not None:
            kinds[node.id] = shaped  # title page, command summary, glossary (matter.py)
    graph = tree.graph.copy()
    for nid, kind in kinds.items():
        graph.nodes[nid]["node"] = replace(tree.node(nid), kind=kind)
    return Tree(graph, tree.source, tree.title, tree.pages)


# -- helpers -------------------------------------------------------------------------------------

def _subtree(tree: Tree, node_id: int) -> Iterator[Node]:
    stack = [node_id]
    while stack:
        nid = stack.pop()
        yield tree.node(nid)
        stack.extend(c.id for c in reversed(tree.children(nid)))


def _kind_in_context(tree: Tree, node: Node, own: tuple[int, int, int],
                     counts_of: Callable[[Node], tuple[int, int, int]]) -> str | None:
    """The kind of a short untitled piece judged with its untitled neighbour pieces: their entry
    counts together give the verdict, and the piece's own lines must agree with it."""
    toc, index, counted = own
    if not counted or max(toc, index) < MIN_FRACTION * counted:
        return None  # cheap exit: the piece itself is mostly not entries
    siblings = tree.children(node.parent)
    window = [s for s in siblings[max(0, node.order - 1): node.order + 2]
              if not s.title and s.text]
    kind = _verdict(*(sum(c) for c in zip(*(counts_of(s) for s in window))))
    if kind is None:
        return None
    return kind if (toc if kind == "toc" else index) >= MIN_FRACTION * counted else None


def _logical_lines(text: str) -> list[str]:
    """Non-empty lines, whitespace-normalised, split entry fragments joined back."""
    out: list[str] = []
    has_words = False  # the entry being built has its title already
    closed = True  # the entry being built ended with its page number
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line:
            continue
        if out and _BARE_LEADER.fullmatch(line):
            out[-1] += " " + line
            closed = _ends_with_page(line)
        elif _BARE_NUMBER.fullmatch(line):
            if out and has_words and not closed:
                out[-1] += " " + line  # the entry's page number
                closed = True
            else:
                out.append(line)  # a section number; its title follows
                has_words, closed = False, False
        elif out and not has_words and not closed:
            out[-1] += " " + line  # the title after a bare section number
            has_words = True
            closed = _ends_entry(line)
        else:
            out.append(line)
            has_words, closed = True, _ends_entry(line)
    return out


def _ends_with_page(line: str) -> bool:
    return _TAIL_PAGE.search((" " + line)[-9:]) is not None


def _ends_entry(line: str) -> bool:
    return " " in line and _ends_with_page(line)


def _titled_page(line: str) -> int | None:
    """The page number of a titled entry ("Canvas size 32"), else None."""
    words = line.rsplit(None, 2)
    if len(words) < 2 or not _PAGE_ONLY.fullmatch(words[-1]):
        return None
    last = words[-2]
    if len(last) < 2 or last[-1] in _NOT_TITLE_END or not _TITLE_WORD.search(line):
        return None
    return _page_value(words[-1])


def _is_index_head(line: str) -> bool:
    return len(line.split()) <= INDEX_HEAD_WORDS and not line.endswith((".", ":", ";"))


def _page_value(page: str) -> int:
    """Arabic page numbers as they are; roman ones (front matter) before every arabic one."""
    if page.isdigit():
        return int(page)
    total, prev = 0, 0
    for ch in reversed(page.lower()):
        v = _ROMAN[ch]
        total = total - v if v < prev else total + v
        prev = max(prev, v)
    return total - 10_000


def _monotone(pages: list[int]) -> float:
    """How forward-running page numbers are: the larger of the share of non-decreasing
    consecutive pairs (a contents set in columns restarts once per column) and the share of
    the numbers in their longest non-decreasing subsequence (a stray "Page 5" footer costs one
    entry). Contents pages score near 1, alphabetical indexes near 0.5 or below."""
    if len(pages) < 2:
        return 1.0
    pairs = sum(b >= a for a, b in zip(pages, pages[1:])) / (len(pages) - 1)
    tails: list[int] = []  # tails[k]: least last value of a non-decreasing run of length k + 1
    for p in pages:
        k = bisect_right(tails, p)
        if k == len(tails):
            tails.append(p)
        else:
            tails[k] = p
    return max(pairs, len(tails) / len(pages))
