"""Routing evidence of a tree's nodes, computed once at ingest (phase one) and stored.

A node's evidence text is its heading path (its ancestors' titles, then its own) followed by its
own body text, so a paragraph under "Patching > \\pretocmd" carries its headings. Nodes that are
a table of contents or an index (``document.hygiene`` marks them at build time) and the root of
a tree have no evidence: they would win every word match by repeating every title.

Two text channels come out of it: the lexical tokens (``routing.lexical``, BM25 at query time)
and one sentence-encoder vector per node (``routing.dense``). Their versions make the evidence
fingerprint: a changed tokenizer or encoder re-indexes the stored evidence.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from engine.document.tree import ROOT, Tree
from engine.routing import lexical
from storage.records import NodeEvidence

# Node kinds kept out of routing evidence and out of the answer context.
NO_EVIDENCE_KINDS = frozenset({"toc", "index"})
HEADING_SEPARATOR = " > "


def has_evidence(tree: Tree, node_id: int) -> bool:
    node = tree.node(node_id)
    return node_id != ROOT and node.kind not in NO_EVIDENCE_KINDS


def heading_path(tree: Tree, node_id: int) -> list[str]:
    """Titles from the tree's first level down to the node (the document title excluded: it is
    the same for every node of a manual and carries no routing signal within it)."""
    return [n.title for n in tree.path(node_id) if n.id != ROOT and n.title]


def evidence_text(tree: Tree, node_id: int) -> str:
    """Heading path joined by " > ", a newline, then the node's own body text ("" if none)."""
    if not has_evidence(tree, node_id):
        return ""
    path = HEADING_SEPARATOR.join(heading_path(tree, node_id))
    body = tree.node(node_id).text.strip()
    return f"{path}\n{body}".strip()


def evidence_fingerprint(encoder) -> str:
    dense = encoder.fingerprint if encoder is not None else "none"
    return f"lex:{lexical.VERSION}|dense:{dense}"[:128]


def compute_evidence(tree: Tree, encoder=None,
                     progress: Callable[[int, int], None] | None = None, *,
                     vectors_later: bool = False) -> NodeEvidence:
    """Lexical tokens and (with an encoder) unit dense vectors for every node, row = node id.

    ``vectors_later``: the tokens only, under the encoder's fingerprint, the vectors left to
    ``add_vectors`` (a big upload is askable by its words first; ``vectors_pending``)."""
    n = len(tree)
    if progress is not None:
        progress(0, n)
    tokens = [lexical.evidence_tokens(heading_path(tree, i), tree.node(i).text)
              if has_evidence(tree, i) else [] for i in range(n)]
    ev = NodeEvidence(tokens=tokens, dense=None, fingerprint=evidence_fingerprint(encoder))
    if encoder is not None and not vectors_later:
        ev = add_vectors(tree, ev, encoder, progress)
    if progress is not None:
        progress(n, n)
    return ev


def vectors_pending(evidence: NodeEvidence, encoder) -> bool:
    """Whether the evidence waits for its dense vectors: stored under ``encoder`` without them
    (``compute_evidence(..., vectors_later=True)``)."""
    return encoder is not None and evidence.dense is None


def add_vectors(tree: Tree, evidence: NodeEvidence, encoder,
                progress: Callable[[int, int], None] | None = None) -> NodeEvidence:
    """``evidence`` with one sentence-encoder vector per node (zero text for the nodes without
    evidence, as the walk never reads them)."""
    texts = [evidence_text(tree, i) for i in range(len(tree))]
    dense = np.asarray(encoder.encode(texts, progress=progress), dtype=np.float32)
    return NodeEvidence(tokens=evidence.tokens, dense=dense,
                        fingerprint=evidence_fingerprint(encoder))
