"""What an ask request may be: its options (``AskOptions``), their checks, the question's, and
the one-line errors a user's request gets (``AskError``, ``MemoriesPending``)."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from engine.answer.passages import sentences as sentence_evidence
from engine.answer.modes import MODES, TEXT_PACKINGS
from engine.answer.generation.prompts import TEXT_PROMPTS
from engine.routing.fused import ROUTERS, WALKS

# The most new tokens an answer may ask for: SmolLM2's context window (8192 positions) less
# room for the prompt; more than this cannot be generated whatever the mode, so it is refused
# up front (also in route and quote mode, where nothing is generated: a bad value is a bad
# request in every mode).
MAX_NEW_TOKENS = 4096


class AskError(ValueError):
    """A problem with the user's request (empty question, unknown document, bad setting)."""


class MemoriesPending(AskError):
    """The request needs memories that phase two of ingest is still writing."""

    def __init__(self, message: str, done: int, total: int):
        super().__init__(message)
        self.done, self.total = done, total


@dataclass
class AskOptions:
    mode: str = "text"  # text answers are the default; memory is the fast H2MT path
    k: int = 3
    max_depth: int | None = None
    budget: int | None = None
    temperature: float = 1.0
    gate: bool = True
    hier_pos: bool = False
    max_new_tokens: int = 128
    text_budget: int = 1024
    # At most this many sections (best routing score first) in text mode's context; None (the
    # default): as many as fit the budget. A cap of 3 (as many as the BM25 top-3 baseline) was
    # tried and not kept: on etoolbox it left \patchcmd's own section out of "How do I patch a
    # command?" (docs/results.md, "Prompt, decoding and context").
    text_sections: int | None = None
    query_fraction: float = 0.5  # H2MT 3.3 uses the first half of the question's tokens
    flat_segment_tokens: int = 256
    router: str = "fused"  # fused | memory | lexical | dense (engine.routing.fused)
    walk: str | None = None  # engine.routing.fused.WALKS; None: the settings' walk
    # Text mode's system prompt (engine.answer.generation.prompts.TEXT_PROMPTS). "generic" is the default by
    # measurement: on the manual dev questions it scored 13.12 ROUGE-L against 12.04 for the
    # stricter "manual" prompt, whose "say the manual does not say" made SmolLM2-135M refuse
    # or answer in a few words (docs/results.md, "Prompt, decoding and context").
    text_prompt: str = "generic"
    repetition_penalty: float = 1.0  # decoding; 1.0 = off
    no_repeat_ngram: int = 0  # decoding; 0 = off
    # Text mode's context (engine.answer.modes.TEXT_PACKINGS): "sentences" (the best sentences
    # of the routed sections within sentence_budget tokens, engine.answer.passages.sentences) or
    # "sections" (the earlier packing: whole sections within text_budget tokens).
    text_packing: str = "sentences"
    sentence_budget: int = sentence_evidence.BUDGET
    # the least score a quote needs; None: the passage ranker's own bar (its JSON file), or
    # sentences.THRESHOLD for the linear score
    quote_threshold: float | None = None
    # Text mode (sentence packing): a name question's (answer_type.NAME_TYPES) answer may only
    # copy a span of the sentences given (engine.answer.generation.copying); docs/results.md,
    # "Copy-constrained decoding for name questions".
    copy_names: bool = False

    def problems(self, settings=None) -> dict[str, str]:
        """{field: one line} for every bad value, whatever the mode: an option a mode does not
        use is still checked, so a bad request fails the same way in every mode. ``settings``
        (engine.settings.Settings): also the sizes they allow (``over_limits``)."""
        out: dict[str, str] = {}
        for name, value, allowed in (("mode", self.mode, MODES), ("router", self.router, ROUTERS),
                                     ("walk", self.walk, WALKS),
                                     ("text_prompt", self.text_prompt, TEXT_PROMPTS),
                                     ("text_packing", self.text_packing, TEXT_PACKINGS)):
            if value is not None and value not in allowed:
                what = name.replace("_", " ")
                out[name] = f"unknown {what} {value!r}; choose one of {', '.join(allowed)}"
        for name, (least, line) in WHOLE_NUMBERS.items():
            value = getattr(self, name)
            label = NUMBER_LABELS.get(name, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                out[name] = f"{label} must be a whole number, not {value!r}"
            elif value < least or (name == "max_new_tokens" and value > MAX_NEW_TOKENS):
                out[name] = line.format(label=label, value=value, most=MAX_NEW_TOKENS)
        if not (isinstance(self.temperature, numbers.Real) and math.isfinite(self.temperature)
                and self.temperature > 0):
            out["temperature"] = (f"the temperature must be a positive number, not "
                                  f"{self.temperature!r}")
        if not 1.0 <= self.repetition_penalty <= 2.0:
            out["repetition_penalty"] = "the repetition penalty must lie in [1, 2] (1 = off)"
        if not isinstance(self.copy_names, bool):
            out["copy_names"] = f"copy_names must be true or false, not {self.copy_names!r}"
        if not 0 < self.query_fraction <= 1:
            out["query_fraction"] = "query_fraction must lie in (0, 1]"
        if settings is not None:
            out.update({k: v for k, v in self.over_limits(settings).items() if k not in out})
        return out

    def over_limits(self, settings) -> dict[str, str]:
        """{field: one line naming the limit} for each size over what ``settings`` allow
        (H2MT_MAX_K, H2MT_MAX_BUDGET_TOKENS): a request that would route or read the whole
        library is refused where it enters (issue 44)."""
        out: dict[str, str] = {}
        if isinstance(self.k, numbers.Integral) and self.k > settings.max_k:
            out["k"] = f"k must be at most {settings.max_k} (H2MT_MAX_K), not {self.k}"
        for name in ("text_budget", "sentence_budget", "flat_segment_tokens"):
            value = getattr(self, name)
            if isinstance(value, numbers.Integral) and value > settings.max_budget_tokens:
                out[name] = (f"{NUMBER_LABELS.get(name, name)} must be at most "
                             f"{settings.max_budget_tokens} tokens (H2MT_MAX_BUDGET_TOKENS), "
                             f"not {value}")
        return out

    def validate(self, settings=None) -> None:
        """AskError with the first of ``problems`` (in the order above); ``settings``: the
        sizes they allow checked too."""
        problems = self.problems(settings)
        if problems:
            raise AskError(next(iter(problems.values())))


# What each whole-number option is called in its one-line problem (its field name otherwise).
NUMBER_LABELS = {"k": "k", "max_depth": "the depth cap", "budget": "the node budget",
                 "max_new_tokens": "max new tokens", "text_budget": "the text budget",
                 "flat_segment_tokens": "the flat segment size"}
# The whole-number options (None allowed where the field's default is None): the least value
# and the line for one out of range.
WHOLE_NUMBERS = {
    "k": (1, "{label} must be at least 1, not {value}"),
    "max_depth": (1, "{label} must be at least 1, not {value}"),
    "budget": (1, "{label} must be at least 1, not {value}"),
    "max_new_tokens": (1, "{label} must be 1 to {most}, not {value}"),
    "text_budget": (1, "{label} must be at least 1 token, not {value}"),
    "flat_segment_tokens": (1, "{label} must be at least 1 token, not {value}"),
    "text_sections": (1, "{label} must be at least 1 (or None: as many as fit)"),
    "sentence_budget": (1, "{label} must be at least 1 token"),
    "no_repeat_ngram": (0, "{label} must be 0 (off) or more"),
}


def whole_number(x, name: str) -> int | None:
    """A number as sent by a form or a client (an int, a float, a string; blank: None) as an
    int; AskError (a ValueError) with one line when it is not a whole number."""
    if x is None or x == "":
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise AskError(f"{name} must be a whole number, not {x!r}") from None
    if not v.is_integer():
        raise AskError(f"{name} must be a whole number, not {x!r}")
    return int(v)


def parse_doc_id(doc) -> int:
    """A document id as given (an int, or its digits from a form, a URL or the CLI); AskError
    with one line otherwise."""
    try:
        return int(doc)
    except (TypeError, ValueError):
        raise AskError(f"not a document id: {doc!r}") from None


def question_problem(question: str | None, limit: int) -> str | None:
    """What is wrong with a question (empty, or over ``limit`` characters:
    ``Settings.max_question_chars``), or None."""
    question = (question or "").strip()
    if not question:
        return "the question is empty"
    if len(question) > limit:
        return f"the question is {len(question)} characters long; the limit is {limit}"
    return None


def checked_question(question: str | None, limit: int) -> str:
    """The question without surrounding space; AskError when ``question_problem`` finds one."""
    problem = question_problem(question, limit)
    if problem is not None:
        raise AskError(problem)
    return question.strip()
