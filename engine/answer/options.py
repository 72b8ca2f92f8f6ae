"""What an ask request may be: its options (``AskOptions``), their checks, the question's, and
the one-line errors a user's request gets (``AskError``, ``MemoriesPending``)."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from engine.answer import sentences as sentence_evidence
from engine.answer.modes import MODES, TEXT_PACKINGS
from engine.answer.prompts import TEXT_PROMPTS
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
    # Text mode's system prompt (engine.answer.prompts.TEXT_PROMPTS). "generic" is the default by
    # measurement: on the manual dev questions it scored 13.12 ROUGE-L against 12.04 for the
    # stricter "manual" prompt, whose "say the manual does not say" made SmolLM2-135M refuse
    # or answer in a few words (docs/results.md, "Text-mode prompt and decoding").
    text_prompt: str = "generic"
    repetition_penalty: float = 1.0  # decoding; 1.0 = off
    no_repeat_ngram: int = 0  # decoding; 0 = off
    # Text mode's context (engine.answer.modes.TEXT_PACKINGS): "sentences" (the best sentences
    # of the routed sections within sentence_budget tokens, engine.answer.sentences) or
    # "sections" (the earlier packing: whole sections within text_budget tokens).
    text_packing: str = "sentences"
    sentence_budget: int = sentence_evidence.BUDGET
    quote_threshold: float = sentence_evidence.THRESHOLD

    def validate(self, settings=None) -> None:
        """One line (AskError) for the first bad value, whatever the mode: an option a mode
        does not use is still checked, so a bad request fails the same way in every mode.
        ``settings`` (engine.settings.Settings): also the sizes it allows (``within``)."""
        if self.mode not in MODES:
            raise AskError(f"unknown mode {self.mode!r}; choose one of {', '.join(MODES)}")
        if self.router not in ROUTERS:
            raise AskError(f"unknown router {self.router!r}; choose one of {', '.join(ROUTERS)}")
        for name, value in (("k", self.k), ("the depth cap", self.max_depth),
                            ("the node budget", self.budget),
                            ("max new tokens", self.max_new_tokens),
                            ("the text budget", self.text_budget),
                            ("the flat segment size", self.flat_segment_tokens)):
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, numbers.Integral)):
                raise AskError(f"{name} must be a whole number, not {value!r}")
        if self.k < 1:
            raise AskError(f"k must be at least 1, not {self.k}")
        if self.max_depth is not None and self.max_depth < 1:
            raise AskError(f"the depth cap must be at least 1, not {self.max_depth}")
        if self.budget is not None and self.budget < 1:
            raise AskError(f"the node budget must be at least 1, not {self.budget}")
        if not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise AskError(f"max new tokens must be 1 to {MAX_NEW_TOKENS}, not "
                           f"{self.max_new_tokens}")
        if self.text_budget < 1:
            raise AskError(f"the text budget must be at least 1 token, not {self.text_budget}")
        if self.flat_segment_tokens < 1:
            raise AskError("the flat segment size must be at least 1 token, not "
                           f"{self.flat_segment_tokens}")
        if not (isinstance(self.temperature, numbers.Real) and math.isfinite(self.temperature)
                and self.temperature > 0):
            raise AskError(f"the temperature must be a positive number, not {self.temperature!r}")
        if self.walk is not None and self.walk not in WALKS:
            raise AskError(f"unknown walk {self.walk!r}; choose one of {', '.join(WALKS)}")
        if self.text_prompt not in TEXT_PROMPTS:
            raise AskError(f"unknown text prompt {self.text_prompt!r}; choose one of "
                           f"{', '.join(TEXT_PROMPTS)}")
        if not 1.0 <= self.repetition_penalty <= 2.0:
            raise AskError("the repetition penalty must lie in [1, 2] (1 = off)")
        if self.text_sections is not None and self.text_sections < 1:
            raise AskError("text_sections must be at least 1 (or None: as many as fit)")
        if self.text_packing not in TEXT_PACKINGS:
            raise AskError(f"unknown text packing {self.text_packing!r}; choose one of "
                           f"{', '.join(TEXT_PACKINGS)}")
        if self.sentence_budget < 1:
            raise AskError("sentence_budget must be at least 1 token")
        if self.no_repeat_ngram < 0:
            raise AskError("no_repeat_ngram must be 0 (off) or more")
        if not 0 < self.query_fraction <= 1:
            raise AskError("query_fraction must lie in (0, 1]")
        if settings is not None:
            self.within(settings)

    def within(self, settings) -> None:
        """One line (AskError) naming the limit for the first size over what ``settings``
        allow (H2MT_MAX_K, H2MT_MAX_BUDGET_TOKENS): a request that would route or read the
        whole library is refused where it enters."""
        if self.k > settings.max_k:
            raise AskError(f"k must be at most {settings.max_k} (H2MT_MAX_K), not {self.k}")
        for name, value in (("the text budget", self.text_budget),
                            ("sentence_budget", self.sentence_budget),
                            ("the flat segment size", self.flat_segment_tokens)):
            if value > settings.max_budget_tokens:
                raise AskError(f"{name} must be at most {settings.max_budget_tokens} tokens "
                               f"(H2MT_MAX_BUDGET_TOKENS), not {value}")


def checked_question(question: str | None, limit: int) -> str:
    """The question without surrounding space; AskError when empty or over ``limit`` characters
    (``Settings.max_question_chars``)."""
    question = (question or "").strip()
    if not question:
        raise AskError("the question is empty")
    if len(question) > limit:
        raise AskError(f"the question is {len(question)} characters long; the limit is {limit}")
    return question
