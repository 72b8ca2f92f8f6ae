"""Each Ask option declared once (issue 65): ``OPTIONS``, one ``Option`` a row: its name, type,
default, bounds, the words of its control and of its problem line, its help, the modes that read
it and where it is offered. ``engine.answer.options.AskOptions`` and its check, what each mode
reads (``reads``), the CLI's flags (``engine.cli``), the Ask and Compare controls and the API's
parameters (``app.shared.ask_request``, ``app.shared.option_controls``) are built from it, and
the MCP tool is checked against it (tests/app/test_option_table.py): a new option is one row
here plus its use."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from engine.answer.passages.sentences import BUDGET as SENTENCE_BUDGET

# ``Option.read_by``: every mode reads it (each routes and finds a quote), or every mode that
# generates; otherwise the names of the modes that read it.
ROUTING = "routing"
DECODING = "decoding"
# ``Option.on``: where an option is offered besides the engine's AskOptions: the Ask tab and its
# /ask API parameters, the Compare tab and /compare, the CLI's ``ask`` flags.
ASK, COMPARE, CLI = "ask", "compare", "cli"
# The most new tokens an answer may ask for: SmolLM2's context window (8192 positions) less
# room for the prompt; more than this cannot be generated whatever the mode, so it is refused
# up front (also in route and quote mode, where nothing is generated: a bad value is a bad
# request in every mode).
MAX_NEW_TOKENS = 4096


def _modes():
    from engine.answer.modes import MODES  # noqa: PLC0415 (the modes read this table)
    return MODES


def _routers():
    from engine.routing.fused import ROUTERS  # noqa: PLC0415
    return ROUTERS


def _walks():
    from engine.routing.fused import WALKS  # noqa: PLC0415
    return WALKS


def _prompts():
    from engine.answer.generation.prompts import TEXT_PROMPTS  # noqa: PLC0415
    return TEXT_PROMPTS


def _packings():
    from engine.answer.modes import TEXT_PACKINGS  # noqa: PLC0415
    return TEXT_PACKINGS


@dataclass(frozen=True)
class Option:
    """One Ask option. ``least``/``most``: a number's bounds (``above``: ``least`` itself
    excluded); ``rule``: a number's problem words when they are not "at least"/"to" (a float's);
    ``none``: what None means (None allowed, and 0 or blank on a form's number), else None is not
    offered on a form; ``limit``: (the ``engine.settings.Settings`` field, its variable) capping
    it; ``app_most``: the Ask tab's own upper bound; ``slider``: the form's slider range;
    ``setting``: the ``Settings`` field a form or the CLI takes when it is not given."""
    name: str
    type: type  # int, float, bool or str
    default: object
    label: str  # the control's words
    help: str  # one line: the control's info, the CLI flag's help
    read_by: str | tuple[str, ...] = ROUTING
    on: tuple[str, ...] = ()
    words: str = ""  # in a problem line ("the depth cap"); default: the name in words
    choices: Callable[[], Iterable[str]] | None = None
    least: float | None = None
    most: float | None = None
    above: bool = False
    rule: str = ""
    unit: str = ""  # " token": "at least 1 token"
    none: str | None = None
    limit: tuple[str, str] | None = None
    app_most: int | None = None
    slider: tuple[int, int] | None = None
    setting: str | None = None  # the Settings field it takes when not given (the router's)

    @property
    def said(self) -> str:
        """The option in a problem line."""
        return self.words or self.name.replace("_", " ")

    def allowed(self) -> tuple[str, ...]:
        return tuple(self.choices()) if self.choices is not None else ()

    def read_by_mode(self, mode) -> bool:
        """Whether ``mode`` (an ``engine.answer.modes.base.Mode`` class) reads it."""
        if self.read_by == ROUTING:
            return True
        if self.read_by == DECODING:
            return mode.generates
        return mode.name in self.read_by


OPTIONS: tuple[Option, ...] = (
    Option("mode", str, "text", "What you get", "the answer mode (engine.answer.modes.MODES)",
           on=(ASK, CLI), choices=_modes),
    Option("k", int, 3, "Sections followed per level",
           "At each level the router follows this many of a section's subsections (k); the "
           "rest are pruned.", on=(ASK, COMPARE, CLI), words="k", least=1,
           limit=("max_k", "H2MT_MAX_K"), slider=(1, 8)),
    Option("max_depth", int, None, "Deepest level", "Routing stops at this depth of the tree.",
           on=(ASK, COMPARE, CLI), words="the depth cap", least=1, none="no limit"),
    Option("budget", int, None, "Most sections selected",
           "Routing stops once this many are selected.", on=(ASK, COMPARE, CLI),
           words="the node budget", least=1, none="no limit"),
    Option("temperature", float, 1.0, "Routing temperature",
           "the softmax temperature of the router's scores", least=0, above=True,
           words="the temperature", rule="must be a positive number"),
    Option("gate", bool, True, "Re-read memories",
           "The model may pass over each memory slot a few extra times (the ArcAligner gate); "
           "the tree shows how many.", read_by=("memory", "flat"), on=(ASK, COMPARE, CLI)),
    Option("hier_pos", bool, False, "Tell the model where each section sits",
           "Adds each section's place in the tree to its memory (HDT position codes).",
           read_by=("memory",), on=(ASK, CLI)),
    Option("max_new_tokens", int, 128, "Longest answer (tokens)",
           "the longest answer in tokens; a longer one is cut there", read_by=DECODING,
           on=(ASK, COMPARE, CLI),
           words="max new tokens", least=1, most=MAX_NEW_TOKENS, app_most=512),
    Option("text_budget", int, 1024, "Text budget (tokens)",
           "backbone tokens of section text in text mode's context with --text-packing "
           "sections", read_by=("text",), on=(CLI,), words="the text budget", least=1,
           unit=" token", limit=("max_budget_tokens", "H2MT_MAX_BUDGET_TOKENS")),
    # At most this many sections (best routing score first) in text mode's context. A cap of 3
    # (as many as the BM25 top-3 baseline) was tried and not kept (docs/results.md, "Prompt,
    # decoding and context").
    Option("text_sections", int, None, "Sections read", "the most sections in text mode's "
           "context", read_by=("text",), least=1, none="as many as fit"),
    # H2MT 3.3 uses the first half of the question's tokens
    Option("query_fraction", float, 0.5, "Query fraction",
           "the share of the question's tokens the query vector reads", least=0, most=1,
           above=True, words="query_fraction", rule="must lie in (0, 1]"),
    Option("flat_segment_tokens", int, 256, "Flat segment size",
           "tokens per segment of flat mode", read_by=("flat",),
           words="the flat segment size", least=1, unit=" token",
           limit=("max_budget_tokens", "H2MT_MAX_BUDGET_TOKENS")),
    Option("router", str, "fused", "Find sections by", "how nodes are scored",
           on=(ASK, CLI), choices=_routers, setting="router"),
    Option("walk", str, None, "Walk", "how the router walks the tree (engine.routing.fused.WALKS)",
           choices=_walks, none="the settings' walk"),
    # "generic" is the default by measurement (docs/results.md, "Prompt, decoding and context").
    Option("text_prompt", str, "generic", "System prompt",
           "text mode's system prompt (engine.answer.generation.prompts.TEXT_PROMPTS)",
           read_by=("text", "full"), choices=_prompts),
    Option("repetition_penalty", float, 1.0, "Repetition penalty", "decoding; 1.0 = off",
           read_by=DECODING, words="the repetition penalty", least=1, most=2,
           rule="must lie in [1, 2] (1 = off)"),
    Option("no_repeat_ngram", int, 0, "No repeated n-gram", "decoding; 0 = off",
           read_by=DECODING, least=0),
    Option("text_packing", str, "sentences", "Text packing",
           "text mode's context: the best sentences (default) or whole sections (the earlier "
           "packing)", read_by=("text",), on=(CLI,), choices=_packings),
    Option("sentence_budget", int, SENTENCE_BUDGET, "Sentence budget",
           "reader tokens of the best sentences (engine.answer.passages.sentences)",
           read_by=("text",), least=1, unit=" token",
           limit=("max_budget_tokens", "H2MT_MAX_BUDGET_TOKENS")),
    Option("quote_threshold", float, None, "Quote threshold",
           "the least score a quote needs", none="the passage ranker's own bar"),
    # docs/results.md, "Copy-constrained decoding for name questions"
    Option("copy_names", bool, False, "Copy names",
           "a name question's answer may only copy a span of the sentences given",
           read_by=("text",), words="copy_names"),
)


def option(name: str) -> Option:
    """The row of ``name``; KeyError for an option that is not in the table."""
    return {o.name: o for o in OPTIONS}[name]


def reads(mode) -> tuple[str, ...]:
    """Every Ask option ``mode`` (an ``engine.answer.modes.base.Mode`` class) reads
    (``Option.read_by``): the Ask tab labels its controls from it."""
    return tuple(o.name for o in OPTIONS if o.read_by_mode(mode))


def offered(where: str) -> list[Option]:
    """The rows offered on ``where`` (ASK, COMPARE, CLI), in the table's order (so a new one
    comes after the others: the API's positional parameters of before still work)."""
    return [o for o in OPTIONS if where in o.on]
