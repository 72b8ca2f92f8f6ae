"""Titles of induced nodes (H2MT 4.3 clusters have no heading): a reader must see what is inside.

A cluster's title is its most distinctive words among its siblings: TF-IDF (scikit-learn, English
stop words removed, words and two-word phrases, sublinear term frequency) fitted on the
siblings' texts, so words every sibling uses weigh least. The best three terms are kept, a term
is skipped when its words (by their first five letters) are already in the title or in an
ancestor's title, and the result is cut at a word boundary; each term is shown as the text
writes it most often ("GPL"). When no term survives (numbers, one-word texts), the title is the
text's first sentence, cut the same way (so too when a sibling already has the same title); it
is never empty.
"""
from __future__ import annotations

import re
from collections import Counter

from engine.document.chunking import sentences

TERMS = 3
MAX_CHARS = 60
# Words of at least three characters that start with a letter ("covered", "sub-license").
_TOKEN = r"(?u)\b[^\W\d_][\w'-]{2,}\b"


def cut_at_word(text: str, max_chars: int = MAX_CHARS) -> str:
    """One line of at most ``max_chars``, cut at a word boundary (with an ellipsis)."""
    t = " ".join(text.split())
    if len(t) <= max_chars:
        return t
    head = t[: max_chars - 1]
    if " " in head:
        head = head[: head.rindex(" ")]
    return head.rstrip(" ,;:-") + "…"


def first_sentence(text: str, max_chars: int = MAX_CHARS) -> str:
    first = next(iter(sentences(" ".join(text.split()))), "")
    return cut_at_word(first, max_chars)


def _words(term: str) -> set[str]:
    """A term's words, cut to their first five letters ("conveying" ~ "convey")."""
    return {w[:5] for w in term.split()}


def sibling_titles(texts: list[str], ancestor_words: list[set[str]] | None = None,
                   wanted: list[bool] | None = None, terms: int = TERMS,
                   max_chars: int = MAX_CHARS) -> list[str]:
    """One title per sibling text: its most distinctive terms among the siblings, else its
    first sentence; ``ancestor_words[i]`` are words the i-th title should not repeat. Siblings
    not ``wanted`` (chunks, which keep no title) count for the weights and get ""."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    ancestor_words = ancestor_words or [set() for _ in texts]
    picked: list[list[str]] = [[] for _ in texts]
    vec = TfidfVectorizer(stop_words="english", ngram_range=(1, 2), sublinear_tf=True,
                          token_pattern=_TOKEN, lowercase=True)
    try:
        weights = vec.fit_transform(texts)
    except ValueError:  # no usable words in any sibling
        weights = None
    if weights is not None:
        vocab = vec.get_feature_names_out()
        for i in range(len(texts)):
            if wanted is not None and not wanted[i]:
                continue
            row = weights.getrow(i)
            # highest weight first; ties alphabetical, so the title does not depend on hashing
            ranked = sorted(zip(row.data, vocab[row.indices]), key=lambda x: (-x[0], x[1]))
            seen = set(ancestor_words[i])
            for _, term in ranked:
                words = _words(term)
                if words <= seen:
                    continue
                # a phrase replaces the single words it contains ("object" -> "object code")
                picked[i] = [t for t in picked[i] if not _words(t) <= words]
                picked[i].append(term)
                seen |= words
                if len(picked[i]) == terms:
                    break
    out: list[str] = []
    used: set[str] = set()
    for i, text in enumerate(texts):
        if wanted is not None and not wanted[i]:
            out.append("")
            continue
        shown = [surface_form(t, text) for t in picked[i]]
        title = cut_at_word(", ".join(shown), max_chars) if shown else ""
        if not title or title.lower() in used:  # siblings must be told apart
            title = first_sentence(text, max_chars)
        title = title[:1].upper() + title[1:] if title else f"Part {i + 1}"
        if title.lower() in used:
            title = f"{title} ({i + 1})"
        used.add(title.lower())
        out.append(title)
    return out


def surface_form(term: str, text: str) -> str:
    """The term as the text writes it most often ("gpl" -> "GPL", "patent" -> "patent"); capitals
    only for short all-capital words (acronyms), not for shouted legal text."""
    pattern = r"\b" + r"\s+".join(map(re.escape, term.split())) + r"\b"
    forms = Counter(" ".join(m.split()) for m in re.findall(pattern, text, re.IGNORECASE))
    quiet = [(n, f) for f, n in forms.items() if not f.isupper()]
    if quiet:
        return max(quiet)[1]
    if forms and len(term) <= 5:
        return forms.most_common(1)[0][0]
    return term


def title_words(title: str) -> set[str]:
    """A title's words as ``_words`` keys them (what its descendants' titles should not repeat)."""
    return _words(" ".join(re.findall(r"[^\W\d_][\w'-]+", title.lower())))
