"""Answers from a route, by stage: what the manual gives (``passages``), generating (``generation``),
checking the answer (``checks``); the modes (``modes``: memory, text, quote, full, flat, route),
the request's options (``options``), the events and what an answer is (``events``,
``response``), its measurement (``measure``), the engine's lines to the user (``notices``) and answers judged
against a question file's keys (``evaluation``: the dev probe and the Evaluation tab).
Public face: ``MODES``, ``Answer``."""
from engine.answer.modes import MODES
from engine.answer.response import Answer

__all__ = ["MODES", "Answer"]
