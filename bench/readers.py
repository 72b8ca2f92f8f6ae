"""Two readers on the same questions in one run (``bench.qa --compare-in-process`` with a served
``--reader``): whether their greedy answers are the same, question by question, and the cost of
the HTTP hop on time to first token as a ratio of medians over the same questions (both asked
one after the other under the same load)."""
from __future__ import annotations

from collections import defaultdict
from statistics import median

IN_PROCESS, SERVED = "in-process", "served"


def _split(mode: str) -> tuple[str, str | None]:
    """'text [served]' -> ('text', 'served'); 'text' -> ('text', None)."""
    if mode.endswith("]") and " [" in mode:
        base, _, label = mode[:-1].rpartition(" [")
        return base, label
    return mode, None


def pairs(rows: list[dict]) -> dict[tuple[str, str], list[tuple[dict, dict]]]:
    """(set, mode) -> [(in-process row, served row)] of the questions both readers answered."""
    by: dict[tuple[str, str, str], dict[str, dict]] = defaultdict(dict)
    for r in rows:
        base, label = _split(r["mode"])
        if label in (IN_PROCESS, SERVED) and r.get("answer") is not None:
            by[(r["set"], base, r["id"])][label] = r
    out: dict[tuple[str, str], list[tuple[dict, dict]]] = defaultdict(list)
    for (set_name, base, _), two in sorted(by.items()):
        if len(two) == 2:
            out[(set_name, base)].append((two[IN_PROCESS], two[SERVED]))
    return dict(out)


def comparison_table(rows: list[dict]) -> str:
    """Markdown: per set and mode, the questions, how many answers are identical, the median
    TTFT of each reader over those questions and their ratio (served / in-process)."""
    lines = ["| set | mode | questions | identical answers | median TTFT in-process (ms) "
             "| median TTFT served (ms) | ratio |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for (set_name, mode), got in pairs(rows).items():
        same = sum(1 for a, b in got if a["answer"] == b["answer"])
        local = median(a["ttft_ms"] for a, _ in got)
        served = median(b["ttft_ms"] for _, b in got)
        lines.append(f"| {set_name} | {mode} | {len(got)} | {same} | {local:.0f} | {served:.0f} "
                     f"| {served / local:.2f} |")
    return "\n".join(lines)


def differences(rows: list[dict]) -> list[dict]:
    """The questions whose two answers differ: set, mode, id, both answers and where they part
    (the first differing character)."""
    out = []
    for (set_name, mode), got in pairs(rows).items():
        for a, b in got:
            if a["answer"] == b["answer"]:
                continue
            at = next((i for i, (x, y) in enumerate(zip(a["answer"], b["answer"])) if x != y),
                      min(len(a["answer"]), len(b["answer"])))
            out.append({"set": set_name, "mode": mode, "id": a["id"], "at": at,
                        "in_process": a["answer"], "served": b["answer"],
                        "stop": (a.get("stop"), b.get("stop"))})
    return out
