"""``route``: routing only, no generation."""
from __future__ import annotations

from engine.answer.modes.base import Mode, Step
from engine.answer.request import Request


class RouteMode(Mode):
    name = "route"
    help = "only finds the sections, no answer"
    label = "Sections only"
    generates = False

    def plan(self, inputs: Request, ranked, quote) -> Step:
        return Step(None, sorted(inputs.route.selected))
