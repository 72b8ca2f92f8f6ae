"""One request of the Ask tab (and of the /ask API): its inputs parsed once, checked by the
engine's own rules and turned into ``engine.ask.AskOptions``.

``AskRequest``'s fields are the ask inputs in the order of the /ask API's positional
parameters; the tab lists its input components from them (``app/ask_tab.py``), so the ask
arguments are named in this one place. Values arrive as sent (the events run without Gradio's
preprocessing): a number may be a float, a string or blank, and a client may send anything.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import gradio as gr

from engine.ask import AskError, AskOptions
from engine.settings import Settings

# The page's longest answer (the engine allows more, engine.ask.MAX_NEW_TOKENS; on a CPU an
# answer of 512 tokens already takes minutes).
APP_MAX_NEW_TOKENS = 512
# What each number input is called in its one-line problem.
NUMBER_LABELS = {"k": "k", "max_depth": "the depth cap", "budget": "the node budget",
                 "max_new_tokens": "max new tokens"}


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

    def question_problem(self, settings: Settings) -> str | None:
        """What is wrong with the question the engine would refuse (its limits), or None."""
        q = (self.question or "").strip()
        if not q:
            return "Type a question first."
        if len(q) > settings.max_question_chars:
            return (f"The question is {len(q)} characters long; the limit is "
                    f"{settings.max_question_chars}.")
        return None

    def option_problems(self, settings: Settings) -> dict[str, str]:
        """{field: one line} for each option the engine would refuse (each checked alone by
        ``AskOptions.validate``, so the engine's rules are the only ones), in every mode: an
        option the mode does not use is checked too. The longest answer is 1 to
        ``APP_MAX_NEW_TOKENS`` here."""
        problems: dict[str, str] = {}

        def check(name: str, **value) -> None:
            try:
                AskOptions(**value).validate(settings)
            except AskError as e:
                problems[name] = str(e)

        check("mode", mode=self.mode)
        check("router", router=self.router or settings.router)
        for name, label in NUMBER_LABELS.items():
            try:
                v = whole_number(getattr(self, name), label)
            except ValueError as e:
                problems[name] = str(e)
                continue
            if name in ("max_depth", "budget"):
                if v is not None and v < 0:
                    problems[name] = f"{label} must be 0 (no limit) or more, not {v}"
            elif v is None:
                problems[name] = f"{label} is missing"
            elif name == "max_new_tokens" and not 1 <= v <= APP_MAX_NEW_TOKENS:
                problems[name] = (f"max new tokens must be 1 to {APP_MAX_NEW_TOKENS} here, "
                                  f"not {v}")
            else:
                check(name, **{name: v})
        return problems

    def refused(self, settings: Settings) -> bool:
        """Whether /ask's validator refuses this request (then nothing is asked or wiped)."""
        return (self.question_problem(settings) is not None
                or bool(self.option_problems(settings)))

    def options(self, settings: Settings) -> AskOptions:
        """The engine's options of this request; a bad value is one line (gr.Error, the first
        of ``option_problems``) and nothing is asked or stored."""
        problems = self.option_problems(settings)
        if problems:
            raise gr.Error(next(iter(problems.values())))
        return AskOptions(mode=self.mode, k=int(float(self.k)),
                          max_depth=limit_or_none(self.max_depth),
                          budget=limit_or_none(self.budget), gate=bool(self.gate),
                          hier_pos=bool(self.hier_pos),
                          max_new_tokens=int(float(self.max_new_tokens)),
                          router=self.router or settings.router)


def whole_number(x, name: str) -> int | None:
    """A number input as an int (None when blank); ValueError with one line otherwise."""
    if x is None or x == "":
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a whole number, not {x!r}") from None
    if not v.is_integer():
        raise ValueError(f"{name} must be a whole number, not {x!r}")
    return int(v)


def limit_or_none(x) -> int | None:
    """A limit input: blank or 0 mean "no limit" (a negative or fractional value is refused by
    ``option_problems`` before it gets here)."""
    if x is None or x == "":
        return None
    v = int(float(x))
    return v if v > 0 else None
