"""What an ask request may be: its options (``AskOptions``), their checks, the question's, and
the one-line errors a user's request gets (``AskError``, ``MemoriesPending``)."""
from __future__ import annotations

import functools
import math
import numbers
from dataclasses import field, make_dataclass

from engine.answer.option_table import MAX_NEW_TOKENS, OPTIONS, Option  # noqa: F401 (engine.ask's)


class AskError(ValueError):
    """A problem with the user's request (empty question, unknown document, bad setting)."""


class MemoriesPending(AskError):
    """The request needs memories that phase two of ingest is still writing."""

    def __init__(self, message: str, done: int, total: int):
        super().__init__(message)
        self.done, self.total = done, total


def value_problem(o: Option, value) -> str | None:
    """The one line for a bad value of option ``o`` (its type, bounds or choices), or None.
    None is a value only where the row says what it means (``Option.none``)."""
    if value is None:
        return None if o.none is not None else f"{o.said} must be given"
    if o.choices is not None:
        allowed = o.allowed()
        if value not in allowed:
            return f"unknown {o.said} {value!r}; choose one of {', '.join(allowed)}"
        return None
    if o.type is bool:
        return None if isinstance(value, bool) else (
            f"{o.said} must be true or false, not {value!r}")
    if o.type is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return f"{o.said} must be a whole number, not {value!r}"
    elif o.type is float:
        if isinstance(value, bool) or not (isinstance(value, numbers.Real)
                                           and math.isfinite(value)):
            return f"{o.said} {o.rule or 'must be a number'}, not {value!r}"
    low = o.least is not None and (value <= o.least if o.above else value < o.least)
    high = o.most is not None and value > o.most
    if not (low or high):
        return None
    if o.rule:
        return f"{o.said} {o.rule}, not {value!r}"
    if o.most is not None:
        return f"{o.said} must be {o.least} to {o.most}, not {value}"
    return f"{o.said} must be at least {o.least}{o.unit}, not {value}"


def limit_problem(o: Option, value, cap: int | None) -> str | None:
    """The one line for a value over ``cap``, what the settings allow (``Option.limit``:
    H2MT_MAX_K, H2MT_MAX_BUDGET_TOKENS; issue 44), or None."""
    if cap is None or not isinstance(value, numbers.Integral) or value <= cap:
        return None
    unit = f"{o.unit}s" if o.unit else ""
    return f"{o.said} must be at most {cap}{unit} ({o.limit[1]}), not {value}"


def _problems(self, settings=None) -> dict[str, str]:
    """{field: one line} for every bad value, whatever the mode: an option a mode does not
    use is still checked, so a bad request fails the same way in every mode. ``settings``
    (engine.settings.Settings): also the sizes they allow (``limit_problem``). Checked once
    per request: the validator, the page's clearing and the ask read the same check."""
    try:
        # the types too: True == 1 and 2.0 == 2, but only 1 and 2 are whole numbers
        types = tuple(type(getattr(self, o.name)) for o in OPTIONS)
        return dict(_checked(self, types, caps(settings)))
    except TypeError:  # a value that cannot be hashed (a list from a client): checked anew
        return dict(_check(self, caps(settings)))


def caps(settings) -> tuple:
    """The settings' caps of the options that have one (``Option.limit``), in the table's
    order; None without settings."""
    return tuple(getattr(settings, o.limit[0]) if settings is not None and o.limit else None
                 for o in OPTIONS)


@functools.lru_cache(maxsize=256)
def _checked(opts, types: tuple, limits: tuple) -> tuple[tuple[str, str], ...]:
    return _check(opts, limits)


def _check(opts, limits: tuple) -> tuple[tuple[str, str], ...]:
    out = []
    for o, cap in zip(OPTIONS, limits):
        value = getattr(opts, o.name)
        line = value_problem(o, value)
        if line is None:
            line = limit_problem(o, value, cap)
        if line is not None:
            out.append((o.name, line))
    return tuple(out)


def _validate(self, settings=None) -> None:
    """AskError with the first of ``problems`` (in the table's order); ``settings``: the
    sizes they allow checked too."""
    problems = self.problems(settings)
    if problems:
        raise AskError(next(iter(problems.values())))


# The options of one ask, a field per row of ``engine.answer.option_table.OPTIONS`` with its
# default (``engine.answer.option_table`` says what each is).
AskOptions = make_dataclass(
    "AskOptions", [(o.name, o.type if o.none is None else o.type | None, field(default=o.default))
                   for o in OPTIONS],
    namespace={"problems": _problems, "validate": _validate,
               "__doc__": "The options of one ask, one field per row of "
                          "``engine.answer.option_table.OPTIONS``."},
    frozen=True)
AskOptions.__module__ = __name__  # pickled (a ZeroGPU worker's arguments) by its real name


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
