"""The lexical channel: identifier-aware tokens, title-boosted evidence, BM25 through bm25s."""
from __future__ import annotations

import random

import bm25s
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.routing import lexical
from engine.routing.lexical import (STOP_WORDS, LexicalIndex, evidence_tokens, tokenize)

# -- tokens --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, tokens", [
    ("\\pretocmd", ["\\pretocmd", "pretocmd", "preto", "cmd", "command"]),  # its words too
    ("set_wire_rc", ["set_wire_rc", "set", "wire", "rc"]),
    ("--prefix", ["--prefix", "prefix"]),
    ("CONFIG_FOO", ["config_foo", "config", "foo"]),
    ("foo.bar()", ["foo.bar", "foo", "bar"]),
    ("-Wall", ["-wall", "wall"]),
    ("x86_64", ["x86_64", "x86", "64"]),
    ("camelCaseName", ["camelcasename", "camel", "case", "name"]),
    ("HTTPServer", ["httpserver", "http", "server"]),
    ("std::vector", ["std::vector", "std", "vector"]),
    ("\\protected@xappto", ["\\protected@xappto", "protect", "xappto"]),
    ("e-TeX", ["e-tex", "e", "tex", "te", "x"]),
    ("What does fault code E1 mean?", ["fault", "code", "e1", "mean"]),
    ("__init__ and _ or ___", ["__init__", "init", "initi"]),  # init: initialize
    (".option reltol=1e-4", [".option", "option", "reltol", "1e-4", "1e", "4"]),
    ("Wait... .tran 1ns", ["wait", ".tran", "tran", "1ns"]),
])
def test_identifiers_kept_whole_and_split(text, tokens):
    assert tokenize(text) == tokens


def test_identifier_wholes_are_not_stemmed_but_parts_are():
    assert tokenize("\\patches") == ["\\patches", "patch"]
    assert tokenize("--running") == ["--running", "run"]
    assert tokenize("apply_patches") == ["apply_patches", "appli", "patch"]


def test_identifiers_in_running_text():
    toks = tokenize("Use \\pretocmd{\\foo} or set_wire_rc -layer metal1 with --prefix=/usr.")
    for t in ("\\pretocmd", "pretocmd", "\\foo", "set_wire_rc", "wire", "-layer", "layer",
              "metal1", "--prefix", "prefix", "usr"):
        assert t in toks, t


def test_stemming_joins_word_forms():
    assert tokenize("patching") == tokenize("patches") == tokenize("patch") == ["patch"]
    assert tokenize("Patching Patches PATCH") == ["patch", "patch", "patch"]
    assert tokenize("commands command") == ["command", "command"]


def test_stop_words_removed_numbers_kept():
    assert tokenize("How do I patch a command?") == ["patch", "command"]
    assert tokenize("The 715 pages of the manual") == ["715", "page", "manual"]
    assert tokenize("the of and is are") == []
    assert {"how", "what", "the", "a", "is"} <= STOP_WORDS
    assert "r" not in STOP_WORDS and tokenize("The R environment") == ["r", "environ"]


def test_real_page_tokens(shared_dir):
    import pymupdf

    # physical page 13: section 3.4 Patching
    text = pymupdf.open(shared_dir / "corpus" / "etoolbox-manual.pdf")[12].get_text()
    toks = tokenize(text)
    assert "\\patchcmd" in toks and "patchcmd" in toks and "patch" in toks
    assert not set(toks) & STOP_WORDS
    assert all(t and t == t.lower() and not any(c.isspace() for c in t) for t in toks)


_PIECES = list("abcXYZ_019.-:@\\ \n\t,;()éß") + ["the", "How", "patching", "--", "camelCase"]
_TEXT = st.one_of(st.text(max_size=40),
                  st.lists(st.sampled_from(_PIECES), max_size=25).map("".join))


@settings(max_examples=300, deadline=None)
@given(_TEXT, _TEXT)
def test_tokenize_properties(a, b):
    toks = tokenize(a)
    # never an empty string, never whitespace, always lower case, never a stop word
    assert all(t and t == t.lower() and not any(c.isspace() for c in t) for t in toks)
    assert not set(toks) & STOP_WORDS
    # tokens never span whitespace: tokenising two texts joined by a space is concatenation
    assert tokenize(a + " " + b) == toks + tokenize(b)
    # and whitespace layout does not matter
    assert tokenize(" ".join(a.split())) == toks


def test_tokenizing_the_largest_manual(corpus_tree):
    """All evidence texts (heading path + body) of the 715-page ngspice manual, cold cache
    (its speed is a bench figure: bench.ingest / bench.scale, not a timed test)."""
    tree = corpus_tree("ngspice-manual.pdf")
    items = []
    for n in tree.preorder():
        path = [p.title for p in tree.path(n.id)[1:] if p.title]
        items.append((path, n.text))
    assert sum(len(t) for _, t in items) > 1_000_000
    lexical._analyse.cache_clear()
    rows = [evidence_tokens(path, text) for path, text in items]
    assert sum(map(len, rows)) > 150_000
    assert all(t and " " not in t for row in rows for t in row)


# -- evidence ------------------------------------------------------------------------------------


def test_evidence_tokens_heading_path_and_title_boost():
    path = ["Author Commands", "Patching", "\\patchcmd"]
    body = "Extracts the replacement text of a command and replaces search with replace."
    toks = evidence_tokens(path, body)
    assert toks[:3] == ["author", "command", "patch"]  # ancestors' titles come first, once
    assert toks.count("\\patchcmd") == 2 and toks.count("patchcmd") == 2  # the boost
    assert toks.count("author") == 1
    assert toks[-3:] == tokenize(body)[-3:]
    assert evidence_tokens(path, body, title_boost=1).count("\\patchcmd") == 1
    assert evidence_tokens(path, body, title_boost=3).count("\\patchcmd") == 3
    assert evidence_tokens(path, body, title_boost=0).count("\\patchcmd") == 0
    assert evidence_tokens([], body) == tokenize(body)
    assert evidence_tokens(["Only title"], "") == tokenize("Only title") * 2
    with pytest.raises(ValueError):
        evidence_tokens(path, body, title_boost=-1)


# -- the index -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def etoolbox(corpus_tree):
    """The etoolbox manual's nodes and their evidence tokens (row = node id)."""
    from engine.document.hygiene import mark_evidence_hygiene

    tree = mark_evidence_hygiene(corpus_tree("etoolbox-manual.pdf"))
    rows = []
    for i in range(len(tree)):
        node = tree.node(i)
        if i == 0 or node.kind in ("toc", "index"):
            rows.append([])  # no evidence, as routing.evidence does
        else:
            path = [p.title for p in tree.path(i)[1:] if p.title]
            rows.append(evidence_tokens(path, node.text))
    return tree, rows, LexicalIndex(rows)


def _top(tree, index, question, k=5):
    s = index.scores(tokenize(question))
    order = np.argsort(-s, kind="stable")[:k]
    return [tree.node(int(i)).title for i in order if s[i] > 0]


@pytest.mark.parametrize("question, title, k", [
    ("\\pretocmd", "\\pretocmd", 1),
    ("What does \\ifdefstring do?", "\\ifdefstring", 1),
    ("csdef", "\\csdef", 1),
    ("\\AtEndPreamble", "\\AtEndPreamble", 1),
    ("How do I add code at the end of the preamble?", "\\AtEndPreamble", 2),
    ("How can I make a command robust?", "\\providerobustcmd", 1),
    ("list processing loop over a comma separated list", "\\docsvlist", 1),
    ("How do I patch a command?", "\\patchcmd", 5),
])
def test_index_ranks_the_right_node(etoolbox, question, title, k):
    tree, _, index = etoolbox
    assert title in _top(tree, index, question, k)


def test_index_scores_shape_and_zeros(etoolbox):
    tree, rows, index = etoolbox
    s = index.scores(tokenize("\\patchcmd"))
    assert s.shape == (len(tree),) and s.dtype == np.float32 and len(index) == len(tree)
    empty = [i for i, r in enumerate(rows) if not r]
    assert 0 in empty and len(empty) >= 2  # the root and the marked front matter
    assert (s[empty] == 0).all()
    sharing = np.array([bool(set(tokenize("\\patchcmd")) & set(r)) for r in rows])
    assert (s[sharing] > 0).all() and (s[~sharing] == 0).all()
    assert not index.scores([]).any() and index.scores([]).shape == (len(tree),)
    assert not index.scores(["no-such-term", "zzzz"]).any()
    # unknown terms are ignored, repeated ones count once
    base = index.scores(["patch"])
    np.testing.assert_array_equal(index.scores(["patch", "no-such-term", "patch"]), base)


def test_index_matches_stock_bm25s(etoolbox):
    """Our vectorised build gives the scores of bm25s' own index build."""
    _, rows, index = etoolbox
    kept = [i for i, r in enumerate(rows) if r]
    stock = bm25s.BM25(k1=lexical.K1, b=lexical.B, method=lexical.METHOD)
    stock.index([rows[i] for i in kept], show_progress=False)
    for q in ("How do I patch a command?", "\\ifdefstring", "boolean flags toggle",
              "test if a macro is empty"):
        toks = list(dict.fromkeys(tokenize(q)))
        want = np.zeros(len(rows), np.float32)
        want[kept] = stock.get_scores(toks)
        np.testing.assert_allclose(index.scores(toks), want, rtol=1e-5, atol=1e-6)


def test_index_edge_cases():
    assert not LexicalIndex([]).scores(["a"]).any() and LexicalIndex([]).scores(["a"]).shape == (0,)
    all_empty = LexicalIndex([[], [], []])
    np.testing.assert_array_equal(all_empty.scores(["x"]), np.zeros(3, np.float32))
    idx = LexicalIndex([[], ["alpha", "beta"], [], ["beta", "beta", "gamma"]])
    s = idx.scores(["beta"])
    assert s[0] == 0 and s[2] == 0 and s[1] > 0 and s[3] > 0
    assert idx.scores(["gamma"]).argmax() == 3 and idx.scores(["alpha"]).argmax() == 1


_ROWS = st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=8), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(_ROWS, st.lists(st.sampled_from("abcdefghxyz"), max_size=5))
def test_index_scores_positive_exactly_on_shared_terms(rows, query):
    s = LexicalIndex(rows).scores(query)
    assert s.shape == (len(rows),) and s.dtype == np.float32 and np.isfinite(s).all()
    shares = np.array([bool(set(r) & set(query)) for r in rows])
    assert (s[shares] > 0).all() and (s[~shares] == 0).all()


def test_index_at_100k_rows(shared_dir):
    """100,000 rows of 40-80 real tokens (runs of the ngspice manual's token stream)."""
    import pymupdf

    pool = [t for page in pymupdf.open(shared_dir / "corpus" / "ngspice-manual.pdf")
            for t in tokenize(page.get_text())]
    rng = random.Random(0)
    rows = []
    for _ in range(100_000):
        start = rng.randrange(len(pool) - 80)
        rows.append(pool[start:start + rng.randint(40, 80)])
    rows[5] = []
    index = LexicalIndex(rows)
    queries = [tokenize(q) for q in ("How do I set the transient analysis step?",
                                     "model parameters of the MOSFET device",
                                     "the value of a voltage source", ".option reltol")]
    for q in queries:
        s = index.scores(q)
        assert s.shape == (100_000,) and s[5] == 0 and (s > 0).any()
