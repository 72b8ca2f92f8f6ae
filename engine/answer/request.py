"""One ask from its check to its answer (``Request``): the mode, the question read once
(``engine.answer.question``), the documents it reads and, once routed, the route. The pipeline
(``engine.ask``) makes it; a mode's plan and the check read it; nothing writes to it."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from engine.answer.question import Question


@dataclass(frozen=True)
class Request:
    rt: object  # engine.runtime.Runtime
    mode: object  # engine.answer.modes.base.Mode (which reads this request)
    question: Question
    doc_ids: tuple[int, ...]
    trees: Mapping[int, object]  # doc_id -> engine.document.tree.Tree, in the request's order
    routing: object  # engine.routing.routing_tree.RoutingTree of the documents
    pending: object | None  # storage.MemoryProgress of memories still being written (None: all)
    reader: object | None  # the model that reads text, when the mode needs one
    route: object | None = None  # engine.routing.trace.Route, once routed

    @property
    def opts(self):
        """The ask's options (engine.answer.options.AskOptions)."""
        return self.question.opts

    def routed(self, question: Question, route) -> Request:
        """This request after routing: the question with its vectors, and the route."""
        return replace(self, question=question, route=route)
