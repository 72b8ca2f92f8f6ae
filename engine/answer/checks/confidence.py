"""How far a generated answer can be trusted: signals the product computes, one calibrated number.

``answer_signals`` reads one answer with what the product already has (``SIGNALS``):

- ``unsupported``, ``supported_share``, ``denies``, ``number_conflict``: the answer check's
  findings (``engine.answer.checks.check``; the share of the answer's key terms its sources hold);
- ``quote_agree``: the share of the answer's key terms that the quote holds (0.5 without a quote);
  ``key_agree``: 1 when the answer names the key line's term (``engine.answer.checks.key_line``), 0 when
  it does not, 0.5 without a key line; ``type_miss``: the question asks for an option, a command,
  a value or a file and the answer names no term of that kind ("which option" answered without
  one);
- ``sim_mean``, ``sim_min``: each answer sentence's best cosine to a sentence or line of what the
  reader was given (the packaged all-MiniLM-L6-v2), mean and lowest;
- ``lp_mean``, ``lp_min``: the reader's own log-probability of its tokens (greedy, as chosen,
  ``engine.answer.measure.TokenLogProbs``), mean and lowest; ``lp_known``: 0 where the reader
  returns none (a served reader without log-probs), the two then set to ``LOGPROB_DEFAULT`` (the
  model is fitted on copies of its rows with them missing, ``bench.calibration``);
- ``repetition``: the share of the answer's word 3-grams that repeat an earlier one;
- ``route_margin``: the first selected node's routing probability minus its best sibling's;
  ``quote_score``: the quote's sentence score (0 without a quote);
- ``cut``: generation stopped by a limit; ``words``: log of the answer's length in words;
- ``entry_agree``, ``passages_agree``, ``other_entry``, ``quote_lead``: the answer against the
  three passages the screen shows (``passage_signals``, issue 67): it names a term of the quote's
  entry (its signature line's, else the quote's code terms; 0.5 without any), the share of its
  key terms the three passages hold, it names a term of passage 2's or 3's signature that the
  quote lacks (it follows another place), and the quote's score lead over passage 2
  (``engine.answer.shown.places``' gap, at most ``LEAD_CAP``).

``Confidence`` is a logistic regression over them (scikit-learn's, fitted by
``bench.calibration`` on answers labelled by key-fact regexes; coefficients and standardisation
in ``assets/answer_check.json``, its card ``assets/ANSWER_CHECK_CARD.md``). Below its threshold
(chosen on the dev probe) the answer is folded under one line saying why, in words, from the
signal that pulls the score down most (``reason``). A fit holds for the reader whose answers it
was fitted on (``reader``: the ``H2MT_READER`` value, or a served reader's model name).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.answer.checks import terms
from engine.answer.checks.check import Check, UNCHECKED_KINDS
from engine.answer.passages.units import split_sentences
from engine.answer.question import Question
from engine.answer.checks.key_line import KINDS, KeyLine, wanted
from engine.answer.logistic import Logistic
from engine.settings import DEFAULT_BACKBONE

SIGNALS = ("unsupported", "supported_share", "denies", "number_conflict", "quote_agree",
           "key_agree", "type_miss", "sim_mean", "sim_min", "lp_mean", "lp_min", "lp_known",
           "repetition", "route_margin", "quote_score", "cut", "words", "entry_agree",
           "passages_agree", "other_entry", "quote_lead")
LEAD_CAP = 0.5  # the quote's lead over passage 2 counts up to this (a lone passage: the cap)
_ENTRY_KINDS = frozenset({"option", "command", "file", "identifier", "code", "operator"})
LOGPROB_DEFAULT = (-0.6, -4.0)  # (mean, min): about the median of the fitted answers' values
ASSET = Path(__file__).resolve().parents[3] / "assets" / "answer_check.json"
_WORD = re.compile(r"\w+")


def _answer_terms(answer: str) -> list[terms.Term]:
    return [t for t in terms.find_terms(answer) if t.kind not in UNCHECKED_KINDS]


def _share_in(found: list[terms.Term], text: str | None) -> float:
    if not text:
        return 0.5
    if not found:
        return 1.0
    norm = terms.normalize(text)
    return sum(terms.contains(norm, t.key) for t in found) / len(found)


def entry_terms(passage: str | None, whole: bool = True) -> set[str]:
    """The normalised terms naming a passage's entry: those of its first line when that line
    reads as a signature (a command line), else (``whole``) the code terms of all its text."""
    from engine.answer.passages.units import is_command_line

    lines = [x.strip() for x in (passage or "").splitlines() if x.strip()]
    if not lines:
        return set()
    text = lines[0] if is_command_line(lines[0]) else "\n".join(lines) if whole else ""
    return {terms.normalize(t.text) for t in terms.find_terms(text) if t.kind in _ENTRY_KINDS}


def passage_signals(answer: str, passages: list[str], scores: list[float]) -> dict[str, float]:
    """``entry_agree``, ``passages_agree``, ``other_entry``, ``quote_lead`` (module docstring) of
    an answer against the passages shown (their texts and scores, the quote first)."""
    said = terms.normalize(answer or "")
    names = lambda ts: any(terms.contains(said, t) for t in ts)  # noqa: E731
    quote = passages[0] if passages else None
    own = entry_terms(quote)
    others = set().union(*(entry_terms(p, whole=False) for p in passages[1:3])) - own
    lead = LEAD_CAP if len(scores) < 2 else min(max(scores[0] - scores[1], 0.0), LEAD_CAP)
    return {"entry_agree": 0.5 if not own else float(names(own)),
            "passages_agree": _share_in(_answer_terms(answer), "\n".join(passages[:3])),
            "other_entry": float(bool(others) and names(others) and not names(own)),
            "quote_lead": lead if passages else 0.0}


def repetition(answer: str) -> float:
    """The share of the answer's word 3-grams that repeat an earlier one."""
    words = [w.lower() for w in _WORD.findall(answer or "")]
    grams = list(zip(words, words[1:], words[2:]))
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


def route_margin(route) -> float:
    """The first selected node's routing probability minus its best sibling's (0 without)."""
    if route is None or not route.selected:
        return 0.0
    first = route.selected[0]
    parent = route.tree.parent[first]
    others = [route.probs.get(c) for c in route.tree.children[parent] if c != first] \
        if parent is not None else []
    own = route.probs.get(first) or 0.0
    return own - max([p for p in others if p is not None] or [0.0])


def similarity(encoder, answer: str, sources: list[str],
               manual_encoder=None) -> tuple[float, float]:
    """(mean, lowest) over the answer's sentences of the best cosine to a sentence or line of
    ``sources`` (all-MiniLM-L6-v2); (0, 0) without an encoder or text. ``manual_encoder``
    encodes the sources' sentences (the manual's stored vectors); ``encoder`` by default."""
    said = split_sentences(answer or "")
    given = [s for src in sources for line in src.split("\n") for s in split_sentences(line)]
    if encoder is None or not said or not given:
        return 0.0, 0.0
    a, g = encoder.encode(said), (manual_encoder or encoder).encode(given)
    best = (np.asarray(a) @ np.asarray(g).T).max(axis=1)
    return float(best.mean()), float(best.min())


@dataclass(frozen=True)
class Reading:
    """What one generated answer is read against: the question, the texts its model was given
    (``sources``), the quote and its score, the generation's log-probabilities and stop, the
    route's margin (``route_margin``), the encoders ``similarity`` uses (None: off), and the
    passages shown, the quote first (``engine.answer.passages.quote.passages``)."""

    question: Question
    sources: list[str]
    quote: str | None = None
    quote_score: float = 0.0
    logprobs: list[float] | None = None
    stop: str | None = None
    margin: float = 0.0
    encoder: object | None = None
    manual_encoder: object | None = None
    passages: tuple = ()  # passages.quote.Quote, each with its text and score


def answer_signals(answer: str, given: Reading, key: KeyLine | None,
                   check: Check | None) -> dict[str, float]:
    """The signals of one generated answer (module docstring), by name."""
    question, sources, quote, logprobs = given.question, given.sources, given.quote, given.logprobs
    stop, margin, quote_score = given.stop, given.margin, given.quote_score
    encoder, manual_encoder = given.encoder, given.manual_encoder
    found = _answer_terms(answer)
    kind = wanted(question)
    checked = check.checked if check is not None else 0
    n_unsup = len(check.unsupported) if check is not None else 0
    sim_mean, sim_min = similarity(encoder, answer, [*sources, quote or ""], manual_encoder)
    if logprobs:
        lp_mean, lp_min, known = float(np.mean(logprobs)), float(np.min(logprobs)), 1.0
    else:
        (lp_mean, lp_min), known = LOGPROB_DEFAULT, 0.0
    key_agree = 0.5
    if key is not None:
        key_agree = float(terms.contains(terms.normalize(answer), terms.normalize(key.term)))
    return {"unsupported": min(n_unsup, 3) / 3,
            "supported_share": 1 - n_unsup / checked if checked else 1.0,
            "denies": float(check is not None and check.denies_coverage),
            "number_conflict": float(check is not None and check.number_conflict is not None),
            "quote_agree": _share_in(found, quote), "key_agree": key_agree,
            "type_miss": float(kind is not None and not any(t.kind in KINDS[kind] for t in found)),
            "sim_mean": sim_mean, "sim_min": sim_min, "lp_mean": lp_mean, "lp_min": lp_min,
            "lp_known": known, "repetition": repetition(answer), "route_margin": margin,
            "quote_score": quote_score, "cut": float(stop in ("length", "time")),
            "words": math.log1p(len((answer or "").split())),
            **passage_signals(answer, [p.text for p in given.passages],
                              [p.score for p in given.passages])}


def reader_of(settings) -> str:
    """The reader a fit is for, as the settings name it: ``H2MT_READER``, or a served reader's
    model name (``H2MT_READER_MODEL``)."""
    return settings.reader_model if settings.reader_is_remote else settings.reader


@dataclass(frozen=True)
class Confidence(Logistic):
    """The fitted answer check (standardised signals -> logistic regression) and its fold
    threshold."""

    reader: str = DEFAULT_BACKBONE  # the reader whose answers it was fitted on (Settings.reader)

    @classmethod
    def load(cls, path: Path = ASSET) -> "Confidence | None":
        """The shipped model; None when the file is not there (nothing is folded on it)."""
        if not Path(path).exists():
            return None
        d = json.loads(Path(path).read_text())
        return cls(**cls.fields(d, key="signals"), reader=str(d.get("reader", DEFAULT_BACKBONE)))

    def _z(self, signals: dict[str, float]) -> np.ndarray:
        x = np.array([signals[n] for n in self.names], dtype=float)
        return (x - self.mean) / self.scale

    def score(self, signals: dict[str, float]) -> float:
        """P(the answer holds the key fact), 0..1."""
        return float(self.probabilities(np.array([[signals[n] for n in self.names]]))[0])

    def weakest(self, signals: dict[str, float]) -> str:
        """The signal that pulls the score down most (its contribution against the mean)."""
        parts = self._z(signals) * self.coef
        return self.names[int(np.argmin(parts))]
