"""The answer modes, one class per mode in a table by name (``MODES``), as the training stages
are (``engine.training.stages``). ``Mode`` (``modes.base``) says what a class declares; the
pipeline that runs one is ``engine.ask``. A mode defined elsewhere joins with ``register``."""
from __future__ import annotations

from engine.answer.modes.base import Mode, ModeTraits, Step
from engine.answer.modes.flat import FlatMode
from engine.answer.modes.full import FullMode
from engine.answer.modes.memory import MemoryMode
from engine.answer.modes.quote import NOT_COVERED, QuoteMode
from engine.answer.modes.route import RouteMode
from engine.answer.modes.text import TEXT_PACKINGS, TextMode

MODES: dict[str, type[Mode]] = {
    m.name: m for m in (MemoryMode, TextMode, FullMode, FlatMode, RouteMode, QuoteMode)}


def register(mode: type[Mode]) -> type[Mode]:
    """Adds ``mode`` to the table under its name (a name already there is an error)."""
    if mode.name in MODES:
        raise ValueError(f"an answer mode named {mode.name!r} exists already")
    MODES[mode.name] = mode
    return mode


__all__ = ["MODES", "Mode", "ModeTraits", "NOT_COVERED", "Step", "TEXT_PACKINGS", "register"]
