"""The candidate stage of routing on a big library (issue 25).

Below ``Settings.candidates_min_nodes`` routed nodes every channel scores every node
(``routing.fused``, the exact path). Above it, the channels score a candidate set and the nodes
the walk visits, so a route's cost follows what it looks at rather than the library's size:

- dense: the ``CANDIDATES`` nearest nodes of an approximate nearest-neighbour index over the
  nodes' sentence-encoder vectors (``CandidateIndex``; usearch's HNSW, inner product on unit
  vectors = cosine), their cosines then computed exactly from the stored vectors;
- lexical: the ``CANDIDATES`` best nodes by BM25 (one pass over the query terms' posting lists,
  which is what BM25 costs anyway; no per-node work beyond them);
- memory: the H2MT score (3.3) only on the candidates and the nodes the walk visits.

The z-statistics (``routing.fusion``) stay those of every node, computed without scoring every
node: a channel's mean and variance over the nodes are linear and quadratic forms of the
question's vector, mu = q . m and var = q^T S q - mu^2 with m and S the mean and second moment
of the node vectors (dense: the sentence-encoder vectors; memory: the keys W_k m_u), so one
d x d product gives the exact statistics; BM25's come from the sum and the sum of squares of its
scores (zero off the posting lists). Statistics over the candidates alone would be those of the
best nodes and would change each channel's weight in the sum.

Why usearch: a maintained HNSW library (many releases a year) with a small wheel that depends on
numpy only (faiss-cpu is ~30 MB and pulls OpenMP; hnswlib has had no release since 2023), that
stores float16 vectors (the stored evidence is float16 already) and serialises an index to bytes,
so the index is kept in the library's database beside the evidence it was built from.
"""
from __future__ import annotations

import io
import math

import numpy as np

from engine.routing.fusion import MISSING_Z

# Candidates per text channel (dense nearest neighbours, BM25 best). On the dev sets (forced on
# at every size) this left the routing results unchanged (docs/results.md, issue 25).
CANDIDATES = 256
# HNSW parameters: neighbours per node, and the beam widths of building and searching (the
# search beam is at least the number of results asked).
CONNECTIVITY = 16
EXPANSION_ADD = 64
EXPANSION_SEARCH = CANDIDATES
VERSION = "1"  # bump when the index layout or parameters change: stored indexes are rebuilt


class Moments:
    """Mean and second moment of row vectors, for exact score statistics of a linear channel:
    scores s = X q have mean q.m and variance q^T S q - (q.m)^2 over the rows."""

    def __init__(self, mean: np.ndarray, second: np.ndarray, n: int):
        self.mean, self.second, self.n = mean, second, n

    @classmethod
    def of(cls, rows: np.ndarray, chunk: int = 8192) -> "Moments":
        rows = np.asarray(rows)
        d = rows.shape[1] if rows.ndim == 2 else 0
        total, second = np.zeros(d), np.zeros((d, d))
        for i in range(0, len(rows), chunk):
            x = rows[i:i + chunk].astype(np.float64)
            total += x.sum(0)
            second += x.T @ x
        n = max(len(rows), 1)
        return cls(total / n, second / n, len(rows))

    def stats(self, q: np.ndarray, scale: float = 1.0) -> tuple[float, float]:
        """(mean, standard deviation) of (rows . q) * scale."""
        q = np.asarray(q, dtype=np.float64)
        mu = float(self.mean @ q)
        var = max(float(q @ self.second @ q) - mu * mu, 0.0)
        return mu * scale, math.sqrt(var) * abs(scale)


class CandidateIndex:
    """Approximate nearest neighbours over the routed nodes' dense vectors (rows with evidence,
    keyed by routed id) with the vectors' moments. ``key`` names what it was built from (the
    routed documents, the evidence fingerprint and ``VERSION``); ``count`` is the number of
    candidates each text channel gives."""

    def __init__(self, ann, moments: Moments, key: str, count: int = CANDIDATES):
        self.ann, self.moments, self.key, self.count = ann, moments, key, count

    @classmethod
    def build(cls, dense: np.ndarray, has_evidence: np.ndarray, key: str,
              threads: int = 0) -> "CandidateIndex":
        from usearch.index import Index

        ids = np.flatnonzero(has_evidence)
        vectors = np.ascontiguousarray(dense[ids], dtype=np.float32)
        ann = Index(ndim=dense.shape[1], metric="ip", dtype="f16", connectivity=CONNECTIVITY,
                    expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)
        if len(ids):
            ann.add(ids.astype(np.uint64), vectors, threads=threads)
        return cls(ann, Moments.of(vectors), key)

    def fits(self, tree) -> bool:
        """Whether it indexes this routed tree's nodes (a sanity check of a stored index)."""
        has = tree.has_evidence
        return (self.moments.n == int(has.sum()) and len(self.ann) == self.moments.n
                and (tree.dense is None or self.moments.mean.shape[0] == tree.dense.shape[1]))

    def search(self, query: np.ndarray, count: int | None = None) -> np.ndarray:
        """Routed ids of (about) the ``count`` (default: ``self.count``) nodes nearest the unit
        query vector."""
        count = self.count if count is None else count
        if len(self.ann) == 0:
            return np.zeros(0, dtype=np.int64)
        found = self.ann.search(np.asarray(query, dtype=np.float32), min(count, len(self.ann)),
                                threads=1)
        return np.asarray(found.keys, dtype=np.int64)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, ann=np.frombuffer(bytes(self.ann.save()), dtype=np.uint8),
                 mean=self.moments.mean, second=self.moments.second,
                 n=np.int64(self.moments.n), key=np.array(self.key))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "CandidateIndex":
        from usearch.index import Index

        with np.load(io.BytesIO(data)) as z:
            ann = Index.restore(z["ann"].tobytes())
            ann.expansion_search = EXPANSION_SEARCH
            return cls(ann, Moments(z["mean"], z["second"], int(z["n"])), str(z["key"]))


def top_scores(scores: np.ndarray, count: int = CANDIDATES) -> np.ndarray:
    """Ids of the ``count`` highest positive scores (BM25's best; a node sharing no term with
    the question, score 0, is never a candidate)."""
    pos = np.flatnonzero(scores > 0)
    if len(pos) > count:
        pos = pos[np.argpartition(-scores[pos], count - 1)[:count]]
    return pos


def zscores(x: np.ndarray, mean: float, sd: float, floor: float = MISSING_Z) -> np.ndarray:
    """``routing.fusion.zscore`` with given statistics: NaN -> ``floor``, clipped below at it."""
    z = (np.asarray(x, dtype=np.float32) - np.float32(mean)) / np.float32(sd if sd > 1e-9 else 1.0)
    return np.where(np.isfinite(z), np.maximum(z, np.float32(floor)), np.float32(floor))


class ChannelOnDemand:
    """One channel scored on demand: ``own(ids)`` gives the own scores of some routed nodes
    (NaN where a node has no evidence); ``mean`` and ``sd`` are the statistics over every node
    (the module docstring says how they are had without scoring every node)."""

    def __init__(self, own, mean: float, sd: float):
        self.own, self.mean, self.sd = own, mean, sd

    def z(self, ids: np.ndarray) -> np.ndarray:
        return zscores(self.own(ids), self.mean, self.sd)


class ScoredOnly:
    """A channel's scores for the trace of a candidate route (``ChannelScores``' two arrays):
    own scores of the nodes the route scored, NaN elsewhere, and subtree scores as the max over
    those below; both computed on first read (the trace, the UI and the log read them after the
    route, as they read ``Route.nodes``)."""

    def __init__(self, channel: ChannelOnDemand, scored: np.ndarray, tree, propagate: bool):
        """``scored``: [N] the route's packing scores, finite where the route scored a node."""
        self._channel, self._scored, self._tree = channel, scored, tree
        self._propagate = propagate
        self._own: np.ndarray | None = None
        self._subtree: np.ndarray | None = None

    @property
    def own(self) -> np.ndarray:
        if self._own is None:
            n = len(self._tree)
            own = np.full(n, np.nan, dtype=np.float32)
            known = np.flatnonzero(np.isfinite(self._scored))
            own[known] = self._channel.own(known)
            self._own = own
        return self._own

    @property
    def subtree(self) -> np.ndarray:
        if self._subtree is None:
            self._subtree = (self._tree.levels.propagate_max(self.own) if self._propagate
                             else self.own.copy())
        return self._subtree
