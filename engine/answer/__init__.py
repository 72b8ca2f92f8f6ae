"""Answers from a route: the modes (memory, text, full, route) and the HMT-style flat baseline.
Public face: ``MODES``, ``Answer``, ``Context``; ``flat`` builds the baseline's segment index."""
from engine.answer.modes import MODES, Answer, Context

__all__ = ["MODES", "Answer", "Context"]
