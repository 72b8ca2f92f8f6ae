"""Steps 5-6 of the fusion's training: the held-out measurement with the real router, the
decision to ship (a paired sign test) and the report's table."""
from __future__ import annotations

import numpy as np

from engine.routing.channels import CHANNELS
from engine.routing.fusion import FusionWeights
from engine.training.fusion.config import log
from engine.training.fusion.features import Doc


def validate(doc: Doc, rqs: list, proj, learned: FusionWeights, k: int,
             rows: list[int]) -> list[dict]:
    """Hit among the selected nodes (k per parent) of each router on ``rows`` of the held-out
    document's queries, per query kind and over all rows; with and without the memory channel.
    Each row keeps its per-query hits on heading+generated queries (``hits``) for the paired
    comparison of ``decide``."""
    from dataclasses import replace

    from engine.routing.fused import RouteBy, RouterUnavailable, route_on_evidence
    from engine.routing.router import WalkLimits
    from engine.routing.hits import gold_regions, routing_hit
    from engine.routing.routing_tree import RoutingTree

    rt = RoutingTree.from_tree(doc.tree, doc.memories, 0, doc.evidence)
    regions = [gold_regions(doc.tree, [{g} for g in doc.queries[r].gold]) for r in rows]
    setups = [("z-sum (untrained)", "fused", None), ("learned", "fused", learned),
              ("lexical alone", "lexical", None), ("dense alone", "dense", None),
              ("memory alone", "memory", None)]
    table = []
    for memory in ((True, False) if doc.memories else (False,)):
        for name, router, weights in setups:
            if router == "memory" and not memory:
                continue
            hits: dict[str, list[bool]] = {}
            for r, reg in zip(rows, regions):
                rq = rqs[r] if memory else replace(rqs[r], memory=None)
                try:
                    sel = route_on_evidence(rt, rq, proj if memory else None, RouteBy(
                        router, weights, limits=WalkLimits(k=k))).selected
                except RouterUnavailable:
                    continue
                hit = routing_hit(sel, reg).hit
                hits.setdefault(doc.queries[r].kind, []).append(hit)
                hits.setdefault("all", []).append(hit)
                if doc.queries[r].kind != "sentence":
                    hits.setdefault("heading+generated", []).append(hit)
            table.append({"router": name, "memory": memory, "k": k,
                          **{kind: round(float(np.mean(v)), 4) for kind, v in hits.items()},
                          "n": {kind: len(v) for kind, v in hits.items()},
                          "hits": [int(h) for h in hits.get("heading+generated", [])]})
            log(f"  {name:18s} memory={memory!s:5s} k={k} " + "  ".join(
                f"{kd}={np.mean(v):.3f}" for kd, v in hits.items()))
    return table


def sign_test(wins: int, losses: int) -> float:
    """One-sided p-value of ``wins`` or more among ``wins + losses`` discordant queries when
    either router is as likely to win each (the paired sign test)."""
    from math import comb

    n = wins + losses
    return sum(comb(n, i) for i in range(wins, n + 1)) / 2 ** n if n else 1.0


def decide(table: list[dict], column: str = "heading+generated", alpha: float = 0.05
           ) -> tuple[bool, str]:
    """Ship when the learned fusion beats the untrained z-sum with every channel present, by
    more than chance on the same queries (paired sign test, one-sided p <= ``alpha``), and is
    no worse when the memory channel is absent."""
    def get(router, memory):
        for row in table:
            if row["router"] == router and row["memory"] == memory:
                return row
        return None

    full = max(r["memory"] for r in table)
    lrow, zrow = get("learned", full), get("z-sum (untrained)", full)
    if lrow is None or zrow is None or lrow.get(column) is None:
        return False, "no held-out measurement"
    lw, zw = lrow[column], zrow[column]
    wins = sum(a > b for a, b in zip(lrow["hits"], zrow["hits"]))
    losses = sum(a < b for a, b in zip(lrow["hits"], zrow["hits"]))
    p = sign_test(wins, losses)
    said = (f"held-out {column}, memory channel {'present' if full else 'absent'}: learned "
            f"{lw:.3f} vs z-sum {zw:.3f}; learned alone hits {wins} queries, z-sum alone "
            f"{losses} (sign test p = {p:.3g})")
    if lw <= zw:
        return False, said
    if p > alpha:
        return False, said + f": not more than chance (p > {alpha})"
    lo, zo = get("learned", False), get("z-sum (untrained)", False)
    if full and lo is not None and zo is not None and lo[column] < zo[column]:
        return False, said + f"; but without memories {lo[column]:.3f} < {zo[column]:.3f}"
    return True, said



def report_markdown(report: dict) -> str:
    lines = []
    for key, table in report["held_out"].items():
        cols = [c for c in ("heading+generated", "heading", "generated", "sentence", "all")
                if any(c in r for r in table)]
        k = table[0].get("k", report["config"]["k"]) if table else report["config"]["k"]
        lines.append(f"Held-out {key.split(' (k=')[0]}: hit among selected, k = {k}\n")
        lines.append("| router | memory channel | " + " | ".join(
            f"{c} (n={table[0]['n'].get(c, 0)})" for c in cols) + " |")
        lines.append("|---|---|" + "---|" * len(cols))
        for r in table:
            lines.append(f"| {r['router']} | {'yes' if r['memory'] else 'absent'} | "
                         + " | ".join(f"{r.get(c, float('nan')):.3f}" for c in cols) + " |")
        lines.append("")
    w = report["weights"]
    lines.append("| weight | " + " | ".join(CHANNELS) + " |")
    lines.append("|---|" + "---|" * len(CHANNELS))
    lines.append("| subtree | " + " | ".join(f"{w['subtree'][c]:.3f}" for c in CHANNELS) + " |")
    lines.append("| own | " + " | ".join(f"{w['own'][c]:.3f}" for c in CHANNELS) + " |")
    lines.append("")
    lines.append(f"Shipped: {'yes' if report['shipped'] else 'no'} ({report['decision']})\n")
    return "\n".join(lines)

