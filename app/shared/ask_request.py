"""One request of the Ask tab (and of the /ask API): its inputs parsed once, checked by the
engine's own rules and turned into ``engine.ask.AskOptions``.

``AskRequest``'s fields are the ask inputs in the order of the /ask API's positional
parameters; the tab lists its input components from them (``app/ask/ask_tab.py``), so the ask
arguments are named in this one place. Values arrive as sent (the events run without Gradio's
preprocessing): a number may be a float, a string or blank, and a client may send anything.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import gradio as gr

from app.shared.lines import EMPTY_QUESTION, NO_MANUAL
from engine.answer.options import NUMBER_LABELS, question_problem, whole_number
from engine.ask import AskError, AskOptions
from engine.settings import Settings

# The page's longest answer (the engine allows more, engine.ask.MAX_NEW_TOKENS; on a CPU an
# answer of 512 tokens already takes minutes).
APP_MAX_NEW_TOKENS = 512
@dataclass(frozen=True)
class AskRequest:
    """The ask inputs, in /ask's parameter order (``router`` may be left out by a client: the
    nine parameters of before the router still work). ``max_depth`` and ``budget`` take 0 or
    blank for "no limit"; ``router`` None means the settings' router."""
    doc: object
    question: object
    mode: object
    k: object
    max_depth: object
    budget: object
    gate: object
    hier_pos: object
    max_new_tokens: object
    router: object = "fused"

    @classmethod
    def names(cls) -> list[str]:
        """The fields in /ask's parameter order."""
        return [f.name for f in fields(cls)]

    def problems(self, settings: Settings) -> dict[str, str]:
        """{input: one line} for each input the engine would refuse, in the inputs' order,
        checked once by the engine's rules (``AskOptions.problems``, ``question_problem``) in
        every mode: an option the mode does not use is checked too. The inputs' own readings:
        a number arrives as sent (``whole_number``), 0 or blank is "no limit" for the depth cap
        and the node budget, and the longest answer is 1 to ``APP_MAX_NEW_TOKENS`` here."""
        problems: dict[str, str] = {}
        if self.doc in (None, ""):  # the page's one line for it (app/shared/lines.py)
            problems["doc"] = NO_MANUAL
        numbers: dict[str, int | None] = {}
        for name in ("k", "max_depth", "budget", "max_new_tokens"):
            label = NUMBER_LABELS[name]
            try:
                v = whole_number(getattr(self, name), label)
            except AskError as e:
                problems[name] = str(e)
                continue
            if name in ("max_depth", "budget"):
                if v is not None and v < 0:
                    problems[name] = f"{label} must be 0 (no limit) or more, not {v}"
                numbers[name] = v or None
            elif v is None:
                problems[name] = f"{label} is missing"
            elif name == "max_new_tokens" and not 1 <= v <= APP_MAX_NEW_TOKENS:
                problems[name] = (f"max new tokens must be 1 to {APP_MAX_NEW_TOKENS} here, "
                                  f"not {v}")
            else:
                numbers[name] = v
        opts = AskOptions(mode=self.mode, router=self.router or settings.router, **numbers)
        engine = opts.problems(settings)
        for name in ("mode", "router", *numbers):
            if name in engine and name not in problems:
                problems[name] = engine[name]
        question = question_problem(self.question, settings.max_question_chars)
        if question is not None:  # the page's words for an empty one
            problems["question"] = (EMPTY_QUESTION
                                    if not (self.question or "").strip() else
                                    f"{question[0].upper()}{question[1:]}.")
        return {name: problems[name] for name in self.names() if name in problems}

    def refused(self, settings: Settings) -> bool:
        """Whether /ask's validator refuses this request (then nothing is asked or wiped)."""
        return bool(self.problems(settings))

    def options(self, settings: Settings) -> AskOptions:
        """The engine's options of this request; a bad value is one line (gr.Error, the first
        of ``problems``) and nothing is asked or stored."""
        problems = self.problems(settings)
        if problems:
            raise gr.Error(next(iter(problems.values())))
        return AskOptions(mode=self.mode, k=int(float(self.k)),
                          max_depth=limit_or_none(self.max_depth),
                          budget=limit_or_none(self.budget), gate=bool(self.gate),
                          hier_pos=bool(self.hier_pos),
                          max_new_tokens=int(float(self.max_new_tokens)),
                          router=self.router or settings.router)


def limit_or_none(x) -> int | None:
    """A limit input: blank or 0 mean "no limit" (a negative or fractional value is refused by
    ``option_problems`` before it gets here)."""
    if x is None or x == "":
        return None
    v = int(float(x))
    return v if v > 0 else None
