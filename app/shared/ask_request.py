"""One request of the Ask tab (and of the /ask API): its inputs parsed once, checked by the
engine's own rules and turned into ``engine.ask.AskOptions``.

``AskRequest``'s parameters are the ask inputs in the order of the /ask API's positional
parameters: the manual, the question and the Ask options the table offers on the tab
(``engine.answer.option_table``); the tab lists its input components from them
(``app/ask/ask_tab.py``). Values arrive as sent (the events run without Gradio's
preprocessing): a number may be a float, a string or blank, and a client may send anything.
"""
from __future__ import annotations

import functools
import inspect

import gradio as gr

from app.shared.lines import EMPTY_QUESTION, NO_MANUAL
from engine.answer.option_table import ASK, Option, offered, option
from engine.answer.options import question_problem, whole_number
from engine.ask import AskError, AskOptions
from engine.settings import Settings

# The page's longest answer (the engine allows more, engine.ask.MAX_NEW_TOKENS; on a CPU an
# answer of 512 tokens already takes minutes): ``Option.app_most`` of max_new_tokens.
APP_MAX_NEW_TOKENS = option("max_new_tokens").app_most
# The inputs before the options (/ask's first two parameters).
FIRST = ("doc", "question")


def form_default(o: Option):
    """An option's value on a fresh form: its default, or 0 for a number whose None means "no
    limit" (the form's 0 = no limit)."""
    return 0 if o.default is None and o.none is not None and o.type is int else o.default


class FormRequest:
    """A tab's inputs, in its API's parameter order: ``FIRST`` (the manual, the question...),
    then one per Ask option offered on the tab (``option_table.offered(WHERE)``, in the table's
    order, each with its form default: a new one comes last and the parameters of before still
    work). The values arrive as sent; ``req.max_depth`` reads one."""

    FIRST: tuple[str, ...] = ("doc", "question")
    WHERE = ASK
    __slots__ = ("values",)

    def __init__(self, *args, **kwargs):
        bound = self.signature().bind(*args, **kwargs)
        bound.apply_defaults()
        object.__setattr__(self, "values", dict(bound.arguments))

    def __getattr__(self, name: str):
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError(f"a {type(self).__name__} is read-only")

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self.values == other.values

    def __hash__(self) -> int:
        return hash(tuple((type(v), v) for v in self.values.values()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.values.items())
        return f"{type(self).__name__}({shown})"

    @classmethod
    def options_offered(cls) -> list[Option]:
        return offered(cls.WHERE)

    @classmethod
    def names(cls) -> list[str]:
        """The inputs in the API's parameter order."""
        return [*cls.FIRST, *(o.name for o in cls.options_offered())]

    @classmethod
    def signature(cls) -> inspect.Signature:
        """The API's parameters (app.shared.binding.bind gives the handler this signature):
        ``FIRST``, then each option with its form default (a client may leave it out)."""
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature(
            [*(inspect.Parameter(name, kind) for name in cls.FIRST),
             *(inspect.Parameter(o.name, kind, default=form_default(o))
               for o in cls.options_offered())])


class AskRequest(FormRequest):
    """The Ask tab's inputs (/ask's parameters): the manual, the question and the options
    offered on the tab. A number whose None means "no limit" (the depth cap, the node budget)
    takes 0 or blank for it; ``router`` None or blank means the settings' router (left out:
    fused, as before it was a parameter). Read once, by ``problems``."""

    __slots__ = ()

    def problems(self, settings: Settings) -> dict[str, str]:
        """{input: one line} for each input the engine would refuse, in the inputs' order,
        checked by the engine's rules (``AskOptions.problems``, ``question_problem``) in every
        mode: an option the mode does not use is checked too. The inputs' own readings
        (``read_input``): a number arrives as sent, 0 or blank is "no limit" where None means
        that, and the longest answer is 1 to ``APP_MAX_NEW_TOKENS`` here. Read once per
        request (``_read``: the validator, the page's clearing and the ask share it)."""
        try:
            return dict(_read(self, settings)[1])
        except TypeError:  # a value that cannot be hashed (a list from a client)
            return dict(_read.__wrapped__(self, settings)[1])

    def refused(self, settings: Settings) -> bool:
        """Whether /ask's validator refuses this request (then nothing is asked or wiped)."""
        return bool(self.problems(settings))

    def options(self, settings: Settings) -> AskOptions:
        """The engine's options of this request; a bad value is one line (gr.Error, the first
        of ``problems``) and nothing is asked or stored."""
        problems = self.problems(settings)
        if problems:
            raise gr.Error(next(iter(problems.values())))
        return _read(self, settings)[0]


@functools.lru_cache(maxsize=64)
def _read(req: AskRequest, settings: Settings) -> tuple[AskOptions | None,
                                                        tuple[tuple[str, str], ...]]:
    """(the engine's options or None, the problems in the inputs' order) of ``req``."""
    problems: dict[str, str] = {}
    if req.doc in (None, ""):  # the page's one line for it (app/shared/lines.py)
        problems["doc"] = NO_MANUAL
    values = {}
    for o in req.options_offered():
        try:
            values[o.name] = read_input(o, req.values[o.name], settings)
        except AskError as e:
            problems[o.name] = str(e)
    engine = AskOptions(**values).problems(settings) if len(values) == len(
        req.options_offered()) else {}
    for name in values:
        if name in engine and name not in problems:
            problems[name] = engine[name]
    question = question_problem(req.question, settings.max_question_chars)
    if question is not None:  # the page's words for an empty one
        problems["question"] = (EMPTY_QUESTION if not (req.question or "").strip() else
                                f"{question[0].upper()}{question[1:]}.")
    ordered = tuple((name, problems[name]) for name in req.names() if name in problems)
    return (None if ordered else AskOptions(**values)), ordered


def read_input(o: Option, raw, settings: Settings):
    """One option's value as a form or a client sends it, read as the engine takes it; AskError
    (one line) for what a form may not send (a fraction, a negative "no limit", a blank that
    means nothing, an answer longer than the page allows)."""
    if o.type is bool:
        return bool(raw)
    if o.type is int:
        v = whole_number(raw, o.said)
        if o.none is not None:
            if v is not None and v < 0:
                raise AskError(f"{o.said} must be 0 ({o.none}) or more, not {v}")
            return v or None
        if v is None:
            raise AskError(f"{o.said} is missing")
        if o.app_most is not None and not o.least <= v <= o.app_most:
            raise AskError(f"{o.said} must be {o.least} to {o.app_most} here, not {v}")
        return v
    if o.type is float:
        if raw in (None, ""):
            if o.none is None:
                raise AskError(f"{o.said} is missing")
            return None
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise AskError(f"{o.said} must be a number, not {raw!r}") from None
    if raw in (None, "") and o.setting is not None:
        return getattr(settings, o.setting)
    return raw
