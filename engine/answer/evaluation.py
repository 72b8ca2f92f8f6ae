"""Evaluating answers against a question file: the per-question evaluation shared by the dev probe
(``python -m bench.probe``) and the app's Evaluation tab, so both score answers the same way
(``engine.ask.evaluate`` asks one question and returns its row from here).

A question has a Python regular expression for its key fact (``key``, matched case-insensitively
on whitespace-collapsed, NFKC-normalised text) and optionally the physical 1-based page(s) where
the manual prints it (``pages``) and its section's title (``section``). ``judge`` turns a question
and what the product answered (plain data) into verdicts; ``evaluation_row`` is an answer's row of
verdicts, with where the route lost the gold section (``where_lost``). ``rates`` and
``risk_coverage`` sum rows up.

The question file (JSON Lines): ``{"question", "key", "pages"?, "section"?, "id"?, "manual"?,
"kind"?}``; bench/probe_set.py reads the probe's own file, with its manuals and kinds, on top.
"""
from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.answer.response import Answer

ROUTE_TITLES = 5  # selected sections named in a row's route summary
# The verdicts a summary counts: (column label, Verdict field)
COLUMNS = (("quote holds", "quote_holds"), ("quote page", "quote_page"),
           ("answer holds", "answer_holds"), ("wrong unmarked", "wrong_unmarked"),
           ("right flagged", "right_flagged"), ("fragment quotes", "quote_fragment"),
           ("passages hold", "passages_hold"))


# -- questions -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProbeQuestion:
    id: str
    manual: str
    question: str
    key: str  # regex for the key fact (case-insensitive, on normalised text)
    pages: tuple[int, ...]  # physical 1-based pages where the fact is printed; may be empty
    kind: str
    section: str | None = None  # the gold section's title, where the file gives it

    @property
    def pattern(self) -> re.Pattern:
        return _compiled(self.key)


@lru_cache(maxsize=None)
def _compiled(key: str) -> re.Pattern:
    return re.compile(key, re.IGNORECASE)


def question_of(r: dict, where: str) -> ProbeQuestion:
    """One question from a parsed line; ValueError starting with ``where`` for a bad one (no
    question, an empty key, a key that does not compile, a page that is not a number)."""
    question, key = str(r.get("question") or "").strip(), r.get("key")
    if not question:
        raise ValueError(f"{where}: no question")
    if not isinstance(key, str) or not key.strip():
        raise ValueError(f"{where}: the key is empty (write a regular expression for the fact)")
    pages = r.get("pages", r.get("page", []))
    pages = pages if isinstance(pages, list) else [] if pages is None else [pages]
    if not all(isinstance(p, int) and not isinstance(p, bool) for p in pages):
        raise ValueError(f"{where}: pages must be whole page numbers, not {pages!r}")
    q = ProbeQuestion(str(r.get("id") or where), str(r.get("manual") or ""), question, key,
                      tuple(pages), str(r.get("kind") or ""), r.get("section") or None)
    try:
        q.pattern
    except re.error as e:
        raise ValueError(f"{where}: the key does not compile: {e}") from None
    return q


def parse_questions(text: str, name: str = "questions") -> list[ProbeQuestion]:
    """A question file's questions (blank lines skipped); ValueError naming the first bad line."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{name}:{n}: not a JSON object ({e.msg})") from None
        if not isinstance(r, dict):
            raise ValueError(f"{name}:{n}: not a JSON object")
        out.append(question_of(r, f"{name}:{n}"))
    if not out:
        raise ValueError(f"{name}: no questions")
    return out


# -- matching ------------------------------------------------------------------------------------

def normal(text: str | None) -> str:
    """NFKC (ligatures and compatibility forms unfolded) and whitespace collapsed to one space:
    the regexes match wording, not the PDF's line breaks."""
    return " ".join(unicodedata.normalize("NFKC", text or "").split())


def holds(q: ProbeQuestion, text: str | None) -> bool:
    """Whether ``text`` holds the question's key fact (its regex matches)."""
    return q.pattern.search(normal(text)) is not None


# -- verdicts ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProbeAnswer:
    """What the product returned for a question, as plain data."""
    text: str  # the answer shown (quote mode: the quote, or the not-covered line)
    quote: str | None  # the quote's text (None: no quote)
    quote_page: int | None  # physical page where the quote begins
    flagged: bool | None = None  # the answer check flagged it (None: no check ran)
    folded: bool | None = None  # shown folded (flagged or degenerate)
    not_covered: bool = False  # the product said the manual does not cover it
    passages: tuple[str, ...] = ()  # the passages shown, the quote first (none: the quote alone)


@dataclass(frozen=True)
class Verdict:
    quote_holds: bool  # the quote holds the key fact (no quote: False)
    quote_page: bool | None  # the quote begins on a gold page (None: no gold page given)
    answer_holds: bool  # the answer shown holds the key fact
    marked: bool  # the user was warned: folded (or flagged, where no fold is known), "not covered"
    wrong_unmarked: bool  # the answer lacks the fact and nothing warned the user
    right_flagged: bool  # the answer holds the fact and was folded anyway
    quote_fragment: bool  # a quote of fewer than four words that is not a command line
    passages_hold: bool = False  # one of the passages shown (the quote or the two after it) does


# A word with one of these is code or a command line ("scons -c", "\\patchcmd", "a=b")
_CODE = re.compile(r"[-/\\=_$()\[\]{}<>.:;]")


def fragment(quote: str | None) -> bool:
    """A quote of fewer than four words none of which looks like code (issue 42: a quote is
    never a fragment, such as the single word "The" of a title page)."""
    words = normal(quote).split()
    return bool(words) and len(words) < 4 and not any(_CODE.search(w.rstrip(".,;:!?"))
                                                      for w in words)


def judge(q: ProbeQuestion, a: ProbeAnswer) -> Verdict:
    """The per-question evaluation: a question and the product's answer -> verdicts."""
    right = holds(q, a.text)
    # a flag marks an answer only where it folds it: a flagged answer shown unfolded has no
    # mark on the screen (the check's score decides, engine.answer.checks.verdict.folds)
    folded = bool(a.folded) if a.folded is not None else bool(a.flagged)
    marked = folded or a.not_covered
    return Verdict(
        quote_holds=a.quote is not None and holds(q, a.quote),
        quote_page=(a.quote_page in q.pages) if q.pages else None,
        answer_holds=right, marked=marked,
        wrong_unmarked=not right and not marked,
        right_flagged=right and folded,
        quote_fragment=fragment(a.quote),
        passages_hold=any(holds(q, p) for p in (a.passages or (a.quote,)) if p is not None))


def answer_of(ans: Answer) -> ProbeAnswer:
    """The plain data ``judge`` reads, from an engine Answer."""
    from engine.answer.passages.evidence import strip_cut_marker

    quote = ans.quote
    return ProbeAnswer(text=strip_cut_marker(ans.text or ""),
                       quote=quote.text if quote is not None else None,
                       quote_page=quote.page if quote is not None else None,
                       flagged=ans.check.flagged if ans.check is not None else None,
                       folded=ans.folded if ans.check is not None else None,
                       not_covered=ans.not_covered,
                       passages=tuple(p.text for p in ans.passages.shown))


# -- the route against the gold section ----------------------------------------------------------

def _spans(n, pages: set[int]) -> bool:
    return (n.page_start is not None and n.page_end is not None
            and any(n.page_start <= p <= n.page_end for p in pages))


def gold_nodes(nodes: list, q: ProbeQuestion) -> list:
    """The routed tree's nodes (``Route.nodes``) of the gold section: those titled as
    ``q.section``, else the most specific ones spanning a gold page (no child spans it too)."""
    if q.section:
        want = normal(q.section).lower()
        titled = [n for n in nodes if normal(n.title).lower() == want]
        if titled:
            return titled
    gold = set(q.pages)
    if not gold:
        return []
    spanning = [n for n in nodes if n.parent is not None and _spans(n, gold)]
    parents = {n.parent for n in spanning}
    return [n for n in spanning if n.id not in parents]


def where_lost(nodes: list, q: ProbeQuestion) -> str | None:
    """Where the walk left the gold section, in words: None when a gold node was selected (or
    the question names no gold page or section); else the first node on the path from the root
    to the nearest gold node that was not followed, and whether it was scored and pruned or
    never scored (``Route.nodes``: live, or rebuilt from the query log's records)."""
    golds = gold_nodes(nodes, q)
    if not golds:
        return None if not (q.pages or q.section) else "the gold section is not in the tree"
    if any(n.status == "selected" for n in golds):
        return None
    by_id = {n.id: n for n in nodes}

    def path(n):
        out = []
        while n is not None and n.parent is not None:
            out.append(n)
            n = by_id.get(n.parent)
        return out[::-1]

    # the gold node the walk came closest to: the most selected ancestors
    best = max(golds, key=lambda g: sum(p.status == "selected" for p in path(g)))
    lost = next(p for p in path(best) if p.status != "selected")
    how = "pruned (scored, not followed)" if lost.status == "pruned" else "never scored"
    return f"depth {lost.depth}: “{lost.title}” {how}"


def route_summary(ans: Answer, q: ProbeQuestion) -> dict:
    """The routing in brief: router, sections selected (the first few by title and pages) and
    whether one of them spans a gold page; the quote's section; where the gold was lost."""
    route = ans.route
    if route is None:
        return {}
    nodes = [route.nodes[i] for i in route.selected]
    gold = set(q.pages)
    return {"router": route.router, "selected": len(nodes), "scored": route.scored,
            "gold_page_selected": any(_spans(n, gold) for n in nodes) if gold else None,
            "titles": [[n.title, n.page_start, n.page_end] for n in nodes[:ROUTE_TITLES]],
            "quote_heading": ans.quote.heading if ans.quote is not None else None,
            "quote_node": ans.quote.node_id if ans.quote is not None else None,
            "lost": where_lost(route.nodes, q)}


# -- one question --------------------------------------------------------------------------------

@dataclass
class Evaluation:
    """One question asked and judged: the row (plain JSON) and the engine's answer."""
    row: dict
    answer: Answer


def evaluation_row(ans: Answer, q: ProbeQuestion, mode: str, wall_ms: float) -> dict:
    """The row of one question's answer (``engine.ask.evaluate`` asks it): what was answered,
    the verdicts, the route in brief, the timings."""
    from engine.answer.shown import ONE, cards, key_line_shown, places

    a = answer_of(ans)
    met, short = ans.metrics, ans.short_answer
    check = ans.check.as_json() if ans.check is not None else None
    return {"id": q.id, "manual": q.manual, "kind": q.kind, "mode": mode,
            "question": q.question, "key": q.key, "gold_pages": list(q.pages),
            "gold_section": q.section, "quote": a.quote, "quote_page": a.quote_page,
            "passages": list(a.passages),
            "quote_score": ans.quote.score if ans.quote is not None else None,
            # each passage's score, the quote's first (the screen's "more than one candidate")
            "passage_scores": [p.score for p in ans.passages.shown],
            # the passages as a person reads them (engine.answer.shown.card): signature, where,
            # text; the Evaluation tab's rows show them
            "passage_cards": [c.lines() for c in cards([p.as_json() for p in ans.passages.shown])],
            # the key line (checks.key_line), whether the screen shows it (engine.answer.shown)
            # and whether it holds the key
            "key_line": ans.key_line.text if ans.key_line is not None else None,
            "key_line_shown": ans.as_json()["key_line_shown"],
            # the rule before issue 67's check: a whole term of the quote, one clear place
            "key_line_term": key_line_shown(
                ans.key_line.as_json() if ans.key_line is not None else None,
                ans.quote.as_json() if ans.quote is not None else None)
            and places([p.as_json() for p in ans.passages.shown]).verdict == ONE,
            "key_line_holds": ans.key_line is not None and holds(q, ans.key_line.text),
            "answer": a.text, "not_covered": a.not_covered, "flagged": a.flagged,
            "folded": a.folded, "check": check, "degenerate": ans.degenerate,
            "cut": ans.cut, "verdict": asdict(judge(q, a)), "route": route_summary(ans, q),
            "timings_ms": {"wall": wall_ms, "total": met.total_ms, "route": met.route_ms,
                           "quote": met.quote_ms,
                           "ttft": met.ttft_ms if mode != "quote" else None,
                           "evidence": met.evidence_ms},
            "generated_tokens": met.generated_tokens,
            # the short answer (passages.short_answer; None: none given) and whether it holds
            "short_answer": short.term if short is not None else None,
            "short_answer_holds": short is not None and holds(q, short.term)}


# -- sums ----------------------------------------------------------------------------------------

def _mean(xs) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def rates(rows: list[dict]) -> dict:
    """Counts and shares of each verdict over ``rows`` (a verdict that is None is left out)."""
    import statistics

    out = {"n": len(rows)}
    for _, key in COLUMNS:
        judged = [r["verdict"].get(key) for r in rows if r["verdict"].get(key) is not None]
        out[key] = (sum(judged), len(judged))
    walls = [r["timings_ms"]["wall"] for r in rows if r["timings_ms"]["wall"] is not None]
    out["median_ms"] = statistics.median(walls) if walls else None
    out["route_gold"] = _mean(float(r["route"]["gold_page_selected"]) for r in rows
                              if r["route"].get("gold_page_selected") is not None)
    return out


def right(row: dict) -> bool:
    """The row's answer is right: the answer shown holds the key (quote mode: the quote)."""
    return bool(row["verdict"]["answer_holds"])


def confidence(row: dict) -> float:
    """How sure the product was, for the risk-coverage curve: the quote's score, lowest for an
    answer the product marked (flagged, folded, not covered) or without a quote."""
    score = row.get("quote_score")
    if score is None or row["verdict"]["marked"]:
        return float("-inf") if score is None else score - 1e6
    return float(score)


def risk_coverage(rows: list[dict]) -> list[tuple[float, float]]:
    """(coverage, risk) after answering the k most confident questions, k = 1..n: the share of
    questions answered and the share of those answered wrongly (selective prediction)."""
    ranked = sorted(rows, key=confidence, reverse=True)
    out, wrong = [], 0
    for k, r in enumerate(ranked, 1):
        wrong += not right(r)
        out.append((k / len(ranked), wrong / k))
    return out
