"""Induced trees for documents without headings (H2MT 4.3), on a real Debian licence text with
the real tokenizer and the real sentence encoder."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from engine.document.build import build_tree
from engine.document.builders import build_raw_tree
from engine.document.induce import FAN_OUT, INDUCED_KIND, hierarchy
from engine.document.tree import ROOT, Tree

GPL3 = Path("/usr/share/common-licenses/GPL-3")

# Questions written from reading GPL-3; the answer is the chunk holding the phrase.
QUESTIONS = [
    ("For how long must I offer the source when I ship object code inside a physical product?",
     "for at least three years"),
    ("If I stop violating the license, when is my license permanently reinstated?",
     "prior to 60 days after the cessation"),
    ("Can I charge money for each copy of the program I convey?",
     "You may charge any price or no price"),
    ("What counts as a User Product?", 'A "User Product" is either'),
    ("Is the output of running the program covered by the license?",
     "The output from running a covered work"),
    ("May I sue someone claiming the program infringes my patent?",
     "you may not initiate litigation"),
    ("Does the program come with any warranty?", "THERE IS NO WARRANTY FOR THE PROGRAM"),
    ("Can I incorporate the program into a proprietary program?",
     "does not permit incorporating your program into proprietary programs"),
]


def _words(text: str) -> Counter:
    return Counter(text.split())


@pytest.fixture(scope="module")
def gpl3() -> Path:
    if not GPL3.is_file():
        pytest.skip(f"{GPL3} missing (Debian's base-files)")
    return GPL3


@pytest.fixture(scope="module")
def encoder():
    from engine.routing.dense import load_encoder

    return load_encoder("cpu")


@pytest.fixture(scope="module")
def tok(real_tokenizer):
    return lambda t: real_tokenizer.encode(t, add_special_tokens=False), real_tokenizer.decode


@pytest.fixture(scope="module")
def gpl3_tree(gpl3, tok, encoder) -> Tree:
    return build_tree(gpl3, *tok, 256, embed=encoder.encode)


def _first_position(tree: Tree, source: str) -> dict[int, int]:
    """Each node's place in the file: the offset of its first leaf's text."""
    flat = " ".join(source.split())
    pos: dict[int, int] = {}
    for n in reversed(list(tree.preorder())):
        if tree.is_leaf(n.id):
            pos[n.id] = flat.index(" ".join(n.text.split()))
        else:
            pos[n.id] = min(pos[c.id] for c in tree.children(n.id))
    return pos


def test_licence_text_gets_an_induced_tree_of_depth_three(gpl3_tree, gpl3):
    tree = gpl3_tree
    assert build_raw_tree(gpl3).source == "text"
    assert tree.source == "induced"
    assert tree.depth >= 3
    # nothing lost, nothing duplicated: the leaves hold exactly the file's words
    leaves = tree.leaves()
    assert _words("\n".join(n.text for n in leaves)) == _words(gpl3.read_text())
    assert all(not n.title and n.text for n in leaves)
    # bounded fan-out: every parent has 2..FAN_OUT children
    for n in tree.preorder():
        if not tree.is_leaf(n.id):
            assert 2 <= len(tree.children(n.id)) <= FAN_OUT, n
    # document order inside every cluster, and among the root's children
    pos = _first_position(tree, gpl3.read_text())
    for n in tree.preorder():
        kids = [pos[c.id] for c in tree.children(n.id)]
        assert kids == sorted(kids), n.title


def test_induced_titles_are_readable(gpl3_tree):
    induced = [n for n in gpl3_tree.preorder() if n.kind == INDUCED_KIND]
    assert len(induced) >= 8
    for n in induced:
        assert n.title and len(n.title) <= 60 and n.title == n.title.strip()
        body = " ".join(" ".join(leaf.text for leaf in gpl3_tree.leaves()
                                 if leaf.id in gpl3_tree.subtree_ids(n.id)).split()).lower()
        # every word of the title is a whole word of the cluster's own text (no cut words)
        for word in re.findall(r"[^\W\d_][\w'-]+", n.title.rstrip("…").lower()):
            assert re.search(rf"\b{re.escape(word)}\b", body), (n.title, word)
    # siblings are told apart by their titles
    for n in gpl3_tree.preorder():
        titles = [c.title for c in gpl3_tree.children(n.id) if c.kind == INDUCED_KIND]
        assert len(set(titles)) == len(titles), titles


def test_same_file_same_tree(gpl3_tree, gpl3, tok, encoder):
    again = build_tree(gpl3, *tok, 256, embed=encoder.encode)
    shape = lambda t: [(n.id, n.parent, n.order, n.title, n.text, n.kind) for n in t.preorder()]
    assert shape(again) == shape(gpl3_tree)


def _answer_hits(tree, evidence, encoder, induced_selected: bool = False) -> list[bool]:
    """Per question of QUESTIONS: the fused route (k=2) over ``evidence`` selected a leaf that
    holds the answer's phrase."""
    from engine.routing import lexical
    from engine.routing.fused import RouteBy, RouteQuery, route_on_evidence
    from engine.routing.router import WalkLimits
    from engine.routing.router import RoutingTree

    rt = RoutingTree.from_tree(tree, None, 0, evidence)
    hits = []
    for question, phrase in QUESTIONS:
        route = route_on_evidence(rt, RouteQuery(tokens=lexical.tokenize(question),
                                                 dense=encoder.encode_query(question)),
                                  None, RouteBy("fused", limits=WalkLimits(k=2)))
        chosen = [tree.node(i) for i in route.selected if tree.is_leaf(i)]
        if induced_selected:
            assert any(tree.node(i).kind == INDUCED_KIND for i in route.selected)
        hits.append(any(phrase in " ".join(n.text.split()) for n in chosen))
    return hits


def test_routing_finds_the_answer_chunk(gpl3_tree, encoder):
    from engine.routing.evidence import compute_evidence

    hits = _answer_hits(gpl3_tree, compute_evidence(gpl3_tree, encoder), encoder,
                        induced_selected=True)
    assert sum(hits) >= len(QUESTIONS) - 1, list(zip([q for q, _ in QUESTIONS], hits))


def test_ingest_stores_and_reports_the_induced_tree(gpl3, tiny_backbone, tiny_parts, tmp_path):
    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage import Library

    settings = Settings().with_(db_url=f"sqlite:///{tmp_path / 'lib.sqlite3'}")
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    result = ingest_file(gpl3, rt, memories=False).as_json()
    assert result["source"] == "induced" and result["depth"] >= 3
    stored = rt.library.get_tree(result["doc_id"])
    assert stored.source == "induced"
    assert sum(n.kind == INDUCED_KIND for n in stored.preorder()) >= 8
    listed = {d.id: d.tree_source for d in rt.library.list_documents()}
    assert listed[result["doc_id"]] == "induced"



def test_ingest_encodes_each_chunk_once(gpl3, tiny_backbone, tiny_parts, encoder, tmp_path,
                                        monkeypatch):
    """Phase one of an induced text: the real encoder sees each text once (the chunks while the
    tree is induced; their vectors are the leaves' dense evidence), and the stored leaf vectors
    are those of the chunk texts."""
    import numpy as np

    from engine.ingest import evidence_encoder, ingest_file
    from engine.routing.evidence import evidence_fingerprint
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage import Library

    seen: list[str] = []
    real_batch = encoder._encode_batch

    def counted(texts, *precision):  # the real encoder's batch call, counted
        seen.extend(texts)
        return real_batch(texts, *precision)

    monkeypatch.setattr(encoder, "_encode_batch", counted)
    settings = Settings().with_(db_url=f"sqlite:///{tmp_path / 'lib.sqlite3'}")
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    rt._encoder = encoder
    doc = ingest_file(gpl3, rt, memories=False)
    tree = rt.library.get_tree(doc.doc_id)
    assert tree.source == "induced"
    leaves = [n for n in tree.leaves() if n.text.strip()]
    counts = Counter(seen)
    assert max(counts.values()) == 1, counts.most_common(3)
    assert all(counts[n.text] == 1 for n in leaves)
    # besides the chunks, only the induced parents' evidence (their guessed heading paths)
    assert len(seen) == len(leaves) + sum(n.kind == INDUCED_KIND for n in tree.preorder())
    ev = rt.library.get_evidence(doc.doc_id, evidence_fingerprint(evidence_encoder(rt)))
    monkeypatch.undo()
    alone = evidence_encoder(rt).encode([n.text for n in leaves])  # in the evidence's precision
    np.testing.assert_allclose(ev.dense[[n.id for n in leaves]], alone, atol=1e-4)


def test_routing_finds_the_answer_chunk_on_shared_vectors(gpl3_tree, encoder):
    """The same questions as above, on the evidence ingest stores for an induced tree (leaf
    vectors = chunk vectors, without the guessed heading path)."""
    from engine.ingest import SharedVectors
    from engine.routing.evidence import compute_evidence

    ev = compute_evidence(gpl3_tree, SharedVectors(encoder).for_evidence(gpl3_tree))
    hits = _answer_hits(gpl3_tree, ev, encoder)
    assert sum(hits) >= len(QUESTIONS) - 1, list(zip([q for q, _ in QUESTIONS], hits))


# -- the same fallback for Markdown, HTML and PDF without any heading (LSA vectors: fast) ------

def _paragraphs(path: Path) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", path.read_text()) if p.strip()]


def test_markdown_and_html_without_headings_are_induced(gpl3, tok, tmp_path):
    paras = _paragraphs(gpl3)
    md = tmp_path / "licence.md"
    md.write_text("\n\n".join(paras))
    html = tmp_path / "licence.html"
    html.write_text("<html><body>" + "".join(f"<p>{p.replace('<', '&lt;')}</p>" for p in paras)
                    + "</body></html>")
    for path in (md, html):
        tree = build_tree(path, *tok, 256)
        assert tree.source == "induced" and tree.depth >= 3, path.name
    # one heading is structure enough: the builder's tree is kept
    md.write_text("# GNU GPL\n\n" + "\n\n".join(paras))
    assert build_tree(md, *tok, 256).source == "markdown"


def test_pdf_without_outline_or_font_levels_is_induced_with_pages(gpl3, tok, tmp_path):
    import pymupdf

    lines = gpl3.read_text().splitlines()
    pdf = tmp_path / "licence.pdf"
    with pymupdf.open() as doc:
        for start in range(0, len(lines), 60):  # one body font, no bookmarks
            page = doc.new_page()
            page.insert_text((50, 60), "\n".join(lines[start:start + 60]), fontsize=9)
        doc.save(pdf)
        pages = doc.page_count
    raw = build_raw_tree(pdf)
    assert raw.source == "fonts" and all(n.kind == "paragraph" for n in raw.children(ROOT))
    tree = build_tree(pdf, *tok, 256)
    assert tree.source == "induced" and tree.depth >= 3 and tree.pages == pages
    for n in tree.preorder():
        if n.id != ROOT:
            assert 1 <= n.page_start <= n.page_end <= pages, n
    top = tree.children(ROOT)
    assert min(n.page_start for n in top) == 1 and max(n.page_end for n in top) == pages


def test_short_flat_text_stays_flat(tok, tmp_path):
    path = tmp_path / "note.txt"
    path.write_text("Water the plants on Mondays.\n\nFeed the cat twice a day.\n")
    tree = build_tree(path, *tok, 256)
    assert tree.source == "text" and tree.depth == 1


def test_hierarchy_bounds_fan_out_and_compresses():
    import numpy as np

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(5, 32))
    x = np.concatenate([c + 0.05 * rng.normal(size=(40, 32)) for c in centres])
    top, children = hierarchy(x, fan_out=6, seed=0)
    assert 2 <= len(top) <= 6
    assert all(2 <= len(k) <= 6 for k in children.values())
    leaves = []

    def walk(i):
        if i in children:
            for c in children[i]:
                walk(c)
        else:
            leaves.append(i)
    for t in top:
        walk(t)
    assert sorted(leaves) == list(range(len(x)))
