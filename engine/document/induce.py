"""A GMM-induced hierarchy for documents without structure (H2MT 4.3).

Plain text, Markdown or HTML without headings, and PDFs with neither outline nor font levels
come out of their builders as a flat list of paragraphs: nothing for the router to prune. H2MT
4.3 induces a tree for such input, bottom-up as RAPTOR does: chunk the text, embed the chunks,
fit a Gaussian mixture over the vectors, make one parent per cluster whose vector aggregates its
children's, and repeat on the parents until the top level is small or stops compressing.

Choices the paper leaves open:
- Chunks: paragraph-sized, at sentence boundaries, about ``CHUNK_TOKENS`` backbone tokens
  (``chunking.py``). Vectors: the injected ``embed`` (ingest passes the dense channel's
  sentence encoder); without one, an LSA embedding (TF-IDF then truncated SVD), so every
  caller of ``build_tree`` gets a tree. A parent's vector is the normalised mean of its
  children's (the paper aggregates memories the same way before its writer runs).
- Each level: PCA to at most ``PCA_DIMS`` dimensions (RAPTOR reduces with UMAP; PCA is
  deterministic and in scikit-learn), then ``GaussianMixture`` (diagonal covariances, hard
  assignment) for up to ``BIC_CANDIDATES`` component counts between ceil(n / FAN_OUT) and
  min(n / 2, 2 ceil(n / FAN_OUT)); the lowest BIC wins. The lower bound keeps the fan-out
  bounded; a cluster still larger than ``FAN_OUT`` is clustered again on its own, and one the
  mixture cannot split is cut in document order. A single-member cluster makes no parent: its
  member moves up a level as it is.
- Stop when the level has at most ``FAN_OUT`` nodes (they become the root's children). A level
  that keeps more than ``MIN_COMPRESSION`` of its nodes, or any level past ``MAX_LEVELS``, is
  grouped in document order instead, so every parent has 2..FAN_OUT children.
- Document order everywhere: members of a cluster in the order of their first chunk, siblings
  ordered the same way. Titles: ``titles.py``. Fixed seed: the same file gives the same tree.
- Fewer than ``FAN_OUT + 1`` chunks: the document stays flat (a handful needs no hierarchy).
"""
from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np

from engine.document.chunking import Chunk, Unit, chunk_units
from engine.document.titles import sibling_titles, title_words
from engine.document.tree import ROOT, DocumentError, Tree, TreeAssembler

SEED = 0
FAN_OUT = 8
CHUNK_TOKENS = 128
PCA_DIMS = 10
BIC_CANDIDATES = 4
MIN_COMPRESSION = 0.75
MAX_LEVELS = 8
LSA_DIMS = 64
INDUCED_KIND = "cluster"  # Node.kind of an induced parent

# texts -> float32 [len(texts), dim] rows (the sentence encoder's ``encode`` fits).
Embed = Callable[[list[str]], np.ndarray]


def is_unstructured(tree: Tree) -> bool:
    """True when the builder found no heading at all: no node below the root is a section."""
    return not any(n.kind == "section" for n in tree.preorder() if n.id != ROOT)


def induce_tree(raw: Tree, count_tokens: Callable[[str], int], embed: Embed | None = None, *,
                chunk_tokens: int = CHUNK_TOKENS, fan_out: int = FAN_OUT,
                seed: int = SEED, check: Callable[[str], None] | None = None,
                max_chunks: int | None = None, name: str = "the document") -> Tree:
    """The induced tree (source ``induced``) of a flat raw tree; ``raw`` itself when it has
    too few chunks to need one. ``check(stage)`` is called between steps (an ingest's deadline,
    engine/document/deadline.py); more than ``max_chunks`` chunks is a DocumentError as soon as
    chunking finds them (before any vector is computed)."""
    if fan_out < 2:
        raise ValueError("fan_out must be at least 2")
    check = check or (lambda stage: None)
    units = [Unit(n.text, n.page_start, n.page_end) for n in raw.preorder() if n.text.strip()]
    chunks = chunk_units(units, count_tokens, chunk_tokens, max_chunks)
    if max_chunks is not None and len(chunks) > max_chunks:
        raise DocumentError(f"{name} has no headings and makes more than {max_chunks} chunks of "
                            f"text; the limit is {max_chunks} nodes (split the document, or "
                            "raise H2MT_MAX_NODES)")
    if len(chunks) <= fan_out:
        return raw
    check("encoding")
    texts = [c.text for c in chunks]
    vectors = np.asarray((embed or lsa_embed)(texts), dtype=np.float32)
    top, children = hierarchy(vectors, fan_out, seed, check)
    return _assemble(raw, chunks, top, children)


# -- clustering ----------------------------------------------------------------------------------

def hierarchy(vectors: np.ndarray, fan_out: int = FAN_OUT, seed: int = SEED,
              check: Callable[[str], None] | None = None
              ) -> tuple[list[int], dict[int, list[int]]]:
    """Bottom-up clustering of row vectors (H2MT 4.3). Ids 0..n-1 are the rows; each new parent
    gets the next id. Returns (the root's children, parent id -> children), document order."""
    n = len(vectors)
    vec = [_unit(v) for v in vectors]
    first = list(range(n))  # a node's first row: its place in the document
    children: dict[int, list[int]] = {}
    level = list(range(n))
    rounds = 0
    while len(level) > fan_out:
        if check is not None:
            check("clustering")
        rounds += 1
        groups = None
        if rounds <= MAX_LEVELS:
            groups = cluster_level(np.stack([vec[i] for i in level]), fan_out, seed, check)
            if len(groups) > MIN_COMPRESSION * len(level):
                groups = None
        if groups is None:
            groups = document_runs(len(level), fan_out)
        nxt = []
        for g in groups:
            members = sorted((level[i] for i in g), key=first.__getitem__)
            if len(members) == 1:
                nxt.append(members[0])
                continue
            gid = len(vec)
            children[gid] = members
            first.append(first[members[0]])
            vec.append(_unit(np.mean([vec[m] for m in members], axis=0)))
            nxt.append(gid)
        level = sorted(nxt, key=first.__getitem__)
    return level, children


def cluster_level(x: np.ndarray, fan_out: int = FAN_OUT, seed: int = SEED,
                  check: Callable[[str], None] | None = None) -> list[np.ndarray]:
    """Row groups of one level: a BIC-chosen Gaussian mixture, oversized clusters split again,
    so no group has more than ``fan_out`` rows (groups may be single rows)."""
    n = len(x)
    k_lo = math.ceil(n / fan_out)
    k_hi = max(k_lo, min(n // 2, 2 * k_lo))
    labels = gmm_labels(x, _candidates(k_lo, k_hi), seed, check)
    groups = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    if len(groups) == 1:  # the mixture found nothing to split: document order
        return document_runs(n, fan_out)
    out: list[np.ndarray] = []
    for g in groups:
        if len(g) > fan_out:
            out.extend(g[s] for s in cluster_level(x[g], fan_out, seed, check))
        else:
            out.append(g)
    return out


def _candidates(k_lo: int, k_hi: int) -> list[int]:
    return sorted({int(k) for k in np.linspace(k_lo, k_hi, BIC_CANDIDATES).round()})


def gmm_labels(x: np.ndarray, ks: list[int], seed: int = SEED,
               check: Callable[[str], None] | None = None) -> np.ndarray:
    """Hard labels of the lowest-BIC GaussianMixture over ``ks`` components, fitted on a PCA
    projection of ``x`` (scaled to unit overall spread)."""
    from sklearn.decomposition import PCA
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    n = len(x)
    dims = max(1, min(PCA_DIMS, n - 1, x.shape[1]))
    solver = "randomized" if dims < min(x.shape) // 2 else "full"
    z = PCA(n_components=dims, svd_solver=solver,
            random_state=seed).fit_transform(x.astype(np.float64))
    spread = float(z.std())
    if spread > 0:
        z = z / spread
    best: tuple[float, object] | None = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for k in ks:
            if k >= n:
                continue
            if check is not None:
                check("clustering")
            gm = GaussianMixture(k, covariance_type="diag", reg_covar=1e-3,
                                 init_params="k-means++", random_state=seed).fit(z)
            bic = gm.bic(z)
            if best is None or bic < best[0]:
                best = (bic, gm)
    if best is None:
        return np.zeros(n, dtype=int)
    return best[1].predict(z)


def document_runs(n: int, fan_out: int) -> list[np.ndarray]:
    """0..n-1 cut in order into the fewest near-equal runs of at most ``fan_out``."""
    return [np.asarray(r) for r in np.array_split(np.arange(n), math.ceil(n / fan_out))]


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def lsa_embed(texts: list[str]) -> np.ndarray:
    """Unit LSA vectors (TF-IDF then truncated SVD): the embedding when none is injected."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    try:
        tfidf = TfidfVectorizer(sublinear_tf=True, stop_words="english").fit_transform(texts)
    except ValueError:  # no words at all: every chunk looks the same
        return np.zeros((len(texts), 1), dtype=np.float32)
    dims = min(LSA_DIMS, tfidf.shape[1] - 1, len(texts) - 1)
    x = (TruncatedSVD(dims, random_state=SEED).fit_transform(tfidf) if dims >= 2
         else tfidf.toarray())
    return normalize(x).astype(np.float32)


# -- the tree ------------------------------------------------------------------------------------

def _assemble(raw: Tree, chunks: list[Chunk], top: list[int],
              children: dict[int, list[int]]) -> Tree:
    asm = TreeAssembler("induced", raw.title, raw.pages)
    leaves: dict[int, list[int]] = {}

    def leaf_rows(i: int) -> list[int]:
        if i not in children:
            return [i]
        if i not in leaves:
            leaves[i] = [r for c in children[i] for r in leaf_rows(c)]
        return leaves[i]

    def add(parent: int, ids: list[int], ancestors: set[str]) -> None:
        texts = ["\n\n".join(chunks[r].text for r in leaf_rows(i)) for i in ids]
        titles = sibling_titles(texts, [ancestors] * len(ids), [i in children for i in ids])
        for i, title in zip(ids, titles):
            if i not in children:
                c = chunks[i]
                asm.add(parent, text=c.text, page_start=c.page_start, page_end=c.page_end,
                        kind="paragraph")
                continue
            pages = [p for r in leaf_rows(i)
                     for p in (chunks[r].page_start, chunks[r].page_end) if p is not None]
            nid = asm.add(parent, title=title, page_start=min(pages) if pages else None,
                          page_end=max(pages) if pages else None, kind=INDUCED_KIND)
            add(nid, children[i], ancestors | title_words(title))

    add(ROOT, top, set())
    return asm.finish()
