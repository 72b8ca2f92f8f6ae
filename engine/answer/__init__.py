"""Answers from a route: the modes (``modes``: memory, text, quote, full, flat, route), their
prompts, decoding and measurement, and what an answer is (``response``). Public face: ``MODES``,
``Answer``."""
from engine.answer.modes import MODES
from engine.answer.response import Answer

__all__ = ["MODES", "Answer"]
