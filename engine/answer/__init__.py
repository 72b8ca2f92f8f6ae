"""Answers from a route, by stage: what the manual gives (``passages``), generating (``generation``),
checking the answer (``checks``); the modes (``modes``: memory, text, quote, full, flat, route),
the request's options (``options``), the events and what an answer is (``events``,
``response``), its measurement (``measure``) and the engine's lines to the user (``notices``).
Public face: ``MODES``, ``Answer``."""
from engine.answer.modes import MODES
from engine.answer.response import Answer

__all__ = ["MODES", "Answer"]
