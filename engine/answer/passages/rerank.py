"""A second stage over the quote's best candidates: the question and each entry read together.

The linear score (``sentences.score``) reads the question and each unit apart (word overlap,
one MiniLM cosine, heading match); on a big manual hundreds of units share the question's
words. This stage re-reads the ``TOP`` best candidates at or above the quote's bar with the
question beside each of them and reorders those candidates only (every other unit keeps its
place; each unit keeps its linear ``score``, so the bar and the passages' rules are the same).

Scorer (``QueryLikelihood``): zero-shot query likelihood with the bundled backbone (UPR: Sachan
et al. 2022, "Improving Passage Retrieval with Zero-Shot Question Generation"; Zhuang et al.
2023, open LLMs as query-likelihood rankers): the mean log-probability of the question's
tokens as the instruction model's reply to "this passage; write a question that it answers"
(its chat template), the passage being what a quote from the candidate shows (``quote``) cut
to ``ENTRY_TOKENS`` tokens, all candidates in one batched forward pass. The new order sorts by
``z(linear) + weight * z(likelihood)`` (z: standardised over the question's reranked
candidates); the weight is chosen held out by manual on the dev probe (docs/results.md,
"Second-stage ranking (issue 66)", where a plain-text prompt over the unit's window is
measured too).

Scorer "cross" (``cross_encoder.CrossEncoder``): the bundled MiniLM read as a cross-encoder,
its top layers and head fitted on Debian man pages and FAQs (``engine.training.cross_fit``),
over the ``CROSS_TOP`` best candidates, blended the same way with ``CROSS_WEIGHT``
(docs/results.md, "The cross-encoder as the second stage"). A scorer carries its own ``top``
and ``weight``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from engine.answer.passages.sentences import Sentence
from engine.answer.question import Question

RERANKERS = ("none", "likelihood", "cross")
TOP = 8  # candidates re-read (cost grows with TOP x ENTRY_TOKENS: docs/results.md)
ENTRY_TOKENS = 40  # an entry's tokens the scorer reads (its signature and first sentence)
WEIGHT = 0.5  # the likelihood's weight in the blend (held out by manual: docs/results.md)
CROSS_TOP = 8  # candidates the cross-encoder re-reads (8-30 measured: docs/results.md)
CROSS_WEIGHT = 1.0  # the best fixed weight (held out by manual: 0; docs/results.md)
# the bundled instruction model's chat turns (ChatML, without the default system turn its
# template would add) around the passage; the question is the assistant's reply
OPENING = "<|im_start|>user\n"
PROMPT = "\n\nWrite a question that this passage answers.<|im_end|>\n<|im_start|>assistant\n"


@dataclass
class Reranked:
    """The candidates in their new order and what the stage cost."""

    ranked: list[Sentence]
    ms: float = 0.0  # the scorer's time (tokenising and the forward pass)
    tokens: int = 0  # sequence positions of the batch (the measured work)
    reordered: bool = False  # the best candidate changed


def passage_text(s: Sentence, ranked: list[Sentence]) -> str:
    """What the scorer reads of a candidate: the passage a quote from it shows (its entry's
    signature first: ``quote._quote_from``)."""
    from engine.answer.passages.quote import _quote_from

    return _quote_from(s, ranked, None).text


class QueryLikelihood:
    """log P(question | entry) per token under a causal LM (module docstring). ``model``: a
    transformers causal LM (its ``.model`` body and ``lm_head``); the logits are taken at the
    question's positions only."""

    top, weight = TOP, WEIGHT

    def __init__(self, model, tokenizer, entry_tokens: int = ENTRY_TOKENS):
        self.model, self.tok, self.entry_tokens = model, tokenizer, entry_tokens

    def scores(self, question: str, passages: list[str]) -> tuple[np.ndarray, int]:
        """(mean log-prob of the question's tokens given each passage, batch positions)."""
        import torch

        if not passages:
            return np.zeros(0, np.float32), 0
        q = self.tok.encode(question.strip(), add_special_tokens=False)
        o = self.tok.encode(OPENING, add_special_tokens=False)
        p = self.tok.encode(PROMPT, add_special_tokens=False)
        rows = [o + self.tok.encode(t, add_special_tokens=False)[:self.entry_tokens] + p + q
                for t in passages]
        width = max(map(len, rows))
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
        # left padding: the question sits at the same positions in every row
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        dtype = next(self.model.parameters()).dtype
        with torch.inference_mode():
            hidden = self.model.model(input_ids=ids, attention_mask=mask,
                                      position_ids=pos).last_hidden_state
            h = hidden[:, width - len(q) - 1:width - 1]  # each predicts the next question token
            logits = self.model.lm_head(h.to(dtype)).float()
            lp = torch.log_softmax(logits, -1)
            target = torch.tensor(q).expand(len(rows), -1).unsqueeze(-1)
            mean = lp.gather(-1, target).squeeze(-1).mean(1)
        return mean.numpy(), int(ids.numel())


def _z(x: np.ndarray) -> np.ndarray:
    sd = float(x.std())
    return (x - x.mean()) / sd if sd > 1e-9 else np.zeros_like(x)


def blend(linear: np.ndarray, second: np.ndarray, weight: float) -> np.ndarray:
    """``z(linear) + weight * z(second)`` over one question's reranked candidates."""
    return _z(np.asarray(linear, float)) + weight * _z(np.asarray(second, float))


def rerank(scorer, question: Question, ranked: list[Sentence], threshold: float) -> Reranked:
    """``ranked`` (best first, the linear score) with its ``top`` best at or above
    ``threshold`` reordered by the blend (module docstring), ``top`` and the blend's
    ``weight`` the scorer's (``TOP`` and ``WEIGHT`` when it names none); the rest in place."""
    top, weight = getattr(scorer, "top", TOP), getattr(scorer, "weight", WEIGHT)
    head = [s for s in ranked[:top] if s.score >= threshold]
    if scorer is None or len(head) < 2:
        return Reranked(list(ranked))
    t = time.perf_counter()
    ql, tokens = scorer.scores(question.text, [passage_text(s, ranked) for s in head])
    ms = (time.perf_counter() - t) * 1e3
    mixed = blend([s.score for s in head], ql, weight)
    for s, v in zip(head, ql):
        s.rerank = round(float(v), 4)
    order = [head[i] for i in np.argsort(-mixed, kind="stable")]
    return Reranked(order + ranked[len(head):], ms, tokens, order[0] is not head[0])


def scorer_for(rt):
    """The runtime's second-stage scorer (``Settings.quote_rerank``), built once: the
    backbone's weights in bfloat16 on a CPU (half the time of float32 there; its own copy, the
    reader keeps float32), as they are on a GPU; or the cross-encoder (``cross_scorer``).
    None when the setting is "none"."""
    how = getattr(rt.settings, "quote_rerank", "none")
    if how == "none":
        return None
    key = ("quote_rerank", how, rt.backbone.name)
    if key not in rt.cache:
        rt.cache[key] = (cross_scorer() if how == "cross" else
                         QueryLikelihood(bfloat16_copy(rt.backbone.model), rt.backbone.tokenizer))
    return rt.cache[key]


def cross_scorer():
    """The cross-encoder (``cross_encoder.load``) with its ``top`` and ``weight``."""
    from engine.answer.passages import cross_encoder

    scorer = cross_encoder.load()
    scorer.top, scorer.weight = CROSS_TOP, CROSS_WEIGHT
    return scorer


def bfloat16_copy(model):
    """The model in bfloat16 (a copy when it is in another dtype)."""
    import copy

    import torch

    if next(model.parameters()).dtype == torch.bfloat16:
        return model
    return copy.deepcopy(model).to(torch.bfloat16).eval()
