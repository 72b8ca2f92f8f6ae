"""What the Ask tab shows of the last answer beside the /ask outputs: the ``view`` State.

The /ask API keeps its outputs (answer, metrics, tables, figures, history); the notice, the
text-mode offer, the two routers' disagreement view and the evidence lines travel in this State
instead and are shown by the step after the answer (``app/ask/ask_handlers.show_view``). The
cited-section view reads the evidence lines back from it.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.views.pages import Line


@dataclass(frozen=True)
class ViewState:
    """The last answer's notes. A field left None is left as the page shows it (a notice about
    memories still being written changes the notice alone; a route still being answered has its
    disagreement view and nothing else yet)."""
    notice: str | None = None  # the engine's warning, or why nothing was asked ("": none)
    offer_text: bool | None = None  # show "Answer in text mode instead"
    agreement: str | None = None  # where the fused and the memory router disagree, in words
    agreement_rows: list[list] | None = None  # the sections only one of the two selected
    evidence: list[dict] | None = None  # asdict() of the answer's evidence lines
    evidence_note: str | None = None  # what the evidence lines are, or why there are none
    query_id: int | None = None  # the shown answer's row in the query log (its feedback)
    passages: list[dict] | None = None  # the passages after the quote (Quote.as_json())

    def node_lines(self, doc_id, node_id) -> list[Line]:
        """The evidence lines in node (doc_id, node_id), to highlight on its page."""
        return [Line(e["text"], e["page"], e["score"]) for e in self.evidence or []
                if str(e["doc_id"]) == str(doc_id) and str(e["node_id"]) == str(node_id)]
