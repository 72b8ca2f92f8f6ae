"""A routing trace as tables: one row per scored node, and where the fused and the memory router
disagree (``router_agreement``: what each selected for the same question, ``Route.alternatives``
holding the other router's selection). Plain data in, plain rows out, as ``app/views/figures.py``
draws the same route."""
from __future__ import annotations

from dataclasses import dataclass

from app.shared.lines import ALL_CLUES_COL, MANUAL_COL, MEMORIES_COL, SECTION_COL
from app.views.figures import gate_loops
from app.views.hover import pages_label
from engine.routing.channels import CHANNELS, LABELS

# -- tables ---------------------------------------------------------------------------------------

# The channel columns hold each channel's best score in the node's branch (what routing compares).
CHANNEL_COLUMNS = [LABELS[c] for c in CHANNELS]
ROUTE_COLUMNS = ["status", "title", "pages", "depth", "score", *CHANNEL_COLUMNS, "prob",
                 "gate loops", MANUAL_COL, SECTION_COL, "id"]


def _branch(channels: dict | None, name: str) -> float | None:
    ch = (channels or {}).get(name)
    v = None if ch is None else ch.get("subtree")
    return None if v is None else round(v, 4)


def node_pages(n, trees: dict | None) -> str:
    """A routed node's pages as shown: printed labels where ``trees`` (Trees by document id)
    holds its manual, else physical numbers."""
    return pages_label(n.page_start, n.page_end, (trees or {}).get(n.doc_id))


def route_rows(route, answer=None, trees: dict | None = None) -> list[list]:
    """One row per scored node: selected first (in selection order), then pruned by score;
    ``trees``: the routed manuals' Trees, for printed page labels."""
    nodes = route.nodes
    sel = [nodes[i] for i in route.selected]
    pr = sorted((n for n in nodes if n.status == "pruned"), key=lambda n: -(n.score or 0))
    rows = []
    for n in [nodes[0], *sel, *pr]:
        lp = gate_loops(answer, n.id)
        chans = getattr(n, "channels", None)
        rows.append([n.status, ("\u00a0\u00a0\u00a0" * n.depth) + (n.title or "(untitled)"),
                     node_pages(n, trees), n.depth,
                     None if n.score is None else round(n.score, 4),
                     *(_branch(chans, c) for c in CHANNELS),
                     None if n.prob is None else round(n.prob, 4),
                     " ".join(map(str, lp)) if lp else "", n.doc_id, n.node_id, n.id])
    return rows


# -- where the fused and the memory router disagree ----------------------------------------------

AGREEMENT_COLUMNS = ["title", "pages", "depth", ALL_CLUES_COL, MEMORIES_COL, MANUAL_COL,
                     SECTION_COL, "id"]


@dataclass
class Agreement:
    """The selections of the fused and the memory router for one question, compared."""

    both: list[int]
    fused_only: list[int]
    memory_only: list[int]

    def counts(self) -> dict[str, int]:
        return {"both": len(self.both), "fused_only": len(self.fused_only),
                "memory_only": len(self.memory_only)}


def single_channel(route) -> bool:
    """A one-channel router's route that carries only its own channel: its "fused" alternative
    is that channel again, not a fusion, so there is nothing to compare."""
    router = getattr(route, "router", None)
    return router not in (None, "fused") and len(getattr(route, "channels", None) or {}) < 2


def single_channel_reason(route) -> str:
    label = LABELS.get(route.router, route.router)
    return (f"The {label} router scored only its own evidence, so there is no fused or memory "
            "router selection to compare with: choose the fused router to see where the fused "
            "and the memory router disagree.")


def router_agreement(route) -> Agreement | None:
    """Compare the two routers' selections (the route's own and ``route.alternatives``); None
    when one of them is not known (memories not written yet, or a route from the log)."""
    router = getattr(route, "router", None)
    if single_channel(route):
        return None
    alts = getattr(route, "alternatives", None) or {}
    fused = list(route.selected) if router == "fused" else alts.get("fused")
    memory = list(route.selected) if router == "memory" else alts.get("memory")
    if fused is None or memory is None:
        return None
    f, m = set(fused), set(memory)
    return Agreement(both=sorted(f & m), fused_only=sorted(f - m), memory_only=sorted(m - f))


def agreement_summary(agreement: Agreement | None, unavailable: str = "") -> str:
    """One line for the UI: the counts, or why the comparison is not available."""
    if agreement is None:
        return unavailable or ("finding sections by their memories did not run for this "
                               "question")
    c = agreement.counts()
    line = (f"both: {c['both']}, fused only: {c['fused_only']}, "
            f"memory only: {c['memory_only']}")
    if not agreement.fused_only and not agreement.memory_only:
        return line + " — the two routers selected the same sections."
    return line


def agreement_rows(route, agreement: Agreement | None, trees: dict | None = None) -> list[list]:
    """The nodes selected by exactly one of the two routers, in document order."""
    if agreement is None:
        return []
    nodes = route.nodes
    only = sorted([(i, "selected", "—") for i in agreement.fused_only]
                  + [(i, "—", "selected") for i in agreement.memory_only])
    return [[("\u00a0\u00a0\u00a0" * nodes[i].depth) + (nodes[i].title or "(untitled)"),
             node_pages(nodes[i], trees), nodes[i].depth, f, m,
             nodes[i].doc_id, nodes[i].node_id, i]
            for i, f, m in only]
