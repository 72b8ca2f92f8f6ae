"""Time from question to quote, with and without the passage ranker, in one run (issue 42).

    python -m bench.quote_time --db URL --doc ID [--rounds 2] [--expansion index+kind]
                               [--code-prior] [--out FILE]
    python -m bench.quote_time --pdf FILE [--sections 50] [--rounds 2] [--out FILE]

Asks ``QUESTIONS`` (written for timing only: generic questions a user of a circuit simulator
would ask, none from an evaluation set) in quote mode on document ``ID``, alternating the
linear score over the routed sections (``H2MT_PASSAGE_RANKER=none``: the quote as it was before
issue 42) and the shipped passage ranker, question by question, so that both see the same
machine load. Reports the median of the answer's total time (question to quote: routing and the
quote; quote mode generates nothing) and of its ``quote_ms`` for each, and the first ask's time
with the ranker (it builds the manual's passage index: ``engine.answer.passages.passage_index``).
``--expansion``: the linear score without and with entry expansion (issue 66,
``engine.answer.passages.expansion``) instead, the first ask with it building the manual's
back-of-book index. ``--code-prior``: the linear score without and with the code prior (issue
66, ``engine.answer.passages.unit_prior``).

``--pdf`` times the quote stage alone where no library holds the manual (indexing ngspice's
715 pages takes about 15 minutes on 2 cores): the tree is built as ingest builds it, the walk's
sections are stood in for by the ``--sections`` best sections by BM25 (the walk keeps 40-60 on a
big manual, issue 42), and each variant ranks their units and chooses the quote, exactly as
``grounding.find_quote`` does after routing (routing itself is the same in both variants). It
also times the linear score with each unit read alone (``window_words=0``: the quote's score
before units were read with their windows, ``sentences.windows``).
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from bench.metrics import median


def with_ranker(settings):
    """The settings with the passage ranker on: the one H2MT_PASSAGE_RANKER names, else the
    shipped one (the product's default is off since the merge, so "after" must turn it on)."""
    return settings if settings.passage_ranker_path else replace(settings, passage_ranker="auto")


QUESTIONS = (
    "How do I run a transient analysis?",
    "Which option sets the relative tolerance?",
    "What is the default temperature of a simulation?",
    "How do I plot a node voltage?",
    "How do I define a subcircuit?",
    "What does the .include statement do?",
    "How do I set the initial conditions of a capacitor?",
    "Which command saves the simulation results to a file?",
    "How do I model a diode?",
    "What is the syntax of a voltage source?",
)


def stood_in_walk(tree, n_sections: int):
    """``walk(question)``: the ``n_sections`` best readable sections by BM25 over heading path
    and text, as routed sections (``SectionText``; a stand-in for the walk, module docstring)."""
    ranked = ranked_sections(tree, n_sections)
    return lambda question: [s for s, _ in ranked(question)]


def ranked_sections(tree, n_sections: int):
    """``walk(question)``: the stood-in walk's sections (``stood_in_walk``) best first, each
    with its BM25 score, as (``SectionText``, score) pairs."""
    from engine.answer.passages import sentences
    from engine.answer.passages.sections import entry_lead, heading_path, readable
    from engine.routing import lexical

    sections = [n for n in tree.preorder() if readable(n)]
    heads = {n.id: heading_path(tree, n.id) for n in sections}
    index = lexical.LexicalIndex([lexical.evidence_tokens([heads[n.id]], n.text)
                                  for n in sections])

    def walk(question: str) -> list:
        sc = index.scores(lexical.tokenize(question))
        best = sorted(range(len(sections)), key=lambda i: -sc[i])[:n_sections]
        return [(sentences.SectionText(rid=n.id, doc_id=1, node_id=n.id, heading=heads[n.id],
                                       body=n.text, page_start=n.page_start,
                                       page_end=n.page_end, lead=entry_lead(tree, n)),
                 float(sc[i]))
                for n, i in ((sections[i], i) for i in best)]

    return walk


def quote_stage_times(pdf: Path, n_sections: int, rounds: int) -> dict:
    """{variant: [ms per question]} of the quote stage on a stood-in walk (module docstring)."""
    from engine.answer.passages import quote as quoting
    from engine.answer.passages import ranking, sentences
    from engine.answer.passages.passage_index import PassageIndex
    from engine.document.build import build_tree
    from engine.memory.backbone import load_tokenizer
    from engine.routing.dense import load_encoder
    from engine.settings import Settings

    settings = Settings.from_env()
    tok = load_tokenizer(settings)
    tree = build_tree(pdf, lambda t: tok.encode(t, add_special_tokens=False), tok.decode,
                      settings.node_token_limit)
    encoder = load_encoder("cpu")
    ranker = ranking.PassageRanker.load(with_ranker(settings).passage_ranker_path)
    walk = stood_in_walk(tree, n_sections)
    times: dict = {"linear, units scored alone (window_words=0)": [],
                   "linear, units scored with their windows (the default)": [],
                   "passage ranker": [],
                   "first ask with the ranker (builds the passage index)": []}
    index = None
    for _ in range(rounds):
        for q in QUESTIONS:
            found = walk(q)
            t = time.perf_counter()
            asked = Question.read(q)
            ranked = sentences.score(encoder, asked, sentences.candidates(found),
                                     sentences.ScoreRule(window_words=0))
            quoting.choose(ranked)
            times["linear, units scored alone (window_words=0)"].append(
                (time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            ranked = sentences.score(encoder, asked, sentences.candidates(found))
            quoting.choose(ranked)
            times["linear, units scored with their windows (the default)"].append(
                (time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            first = index is None
            index = index or PassageIndex.build(1, tree)
            ranked, _ = ranking.rank(ranker, encoder, asked, sentences.candidates(found),
                                     ranking.Manuals({1: index}, lambda d, n: n,
                                                     {1: tree.pages}))
            quoting.choose(ranked, ranker.threshold)
            ms = (time.perf_counter() - t) * 1e3
            times["first ask with the ranker (builds the passage index)" if first
                  else "passage ranker"].append(ms)
    return times


def second_stage_times(pdf: Path, n_sections: int, rounds: int, how: str = "likelihood",
                       top: int | None = None) -> dict:
    """{variant: [ms per question]} of the quote stage on a stood-in walk with issue 66's
    parts: the linear score (the default), with the entry inventory's sections for a name
    question (``engine.answer.passages.inventory``; the first ask builds it), and with the
    second stage ``how`` over its best (``engine.answer.passages.rerank``: "likelihood", the
    backbone in bfloat16 over ``rerank.TOP``, or "cross", the cross-encoder over
    ``rerank.CROSS_TOP``; ``top`` another number); "<how> share" is the second stage alone."""
    import torch

    from engine.answer.passages import inventory, rerank, sentences
    from engine.answer.passages import quote as quoting
    from engine.answer.passages.passage_index import PassageIndex
    from engine.answer.question import Question
    from engine.document.build import build_tree
    from engine.memory.backbone import load_backbone
    from engine.routing.dense import load_encoder
    from engine.settings import Settings

    torch.set_num_threads(1)
    settings = Settings.from_env()
    bb = load_backbone(settings)
    tok = bb.tokenizer
    tree = build_tree(pdf, lambda t: tok.encode(t, add_special_tokens=False), tok.decode,
                      settings.node_token_limit)
    encoder = load_encoder("cpu")
    scorer = (rerank.cross_scorer() if how == "cross" else
              rerank.QueryLikelihood(rerank.bfloat16_copy(bb.model), tok))
    if top is not None:
        scorer.top = top
    walk = stood_in_walk(tree, n_sections)
    names = ("linear (the default)", "linear + entry inventory",
             "first ask with the inventory (builds it)", f"linear + {how} second stage",
             f"{how} share", f"{how} batch positions")
    times: dict = {k: [] for k in names}
    inv = None
    for _ in range(rounds):
        for q in QUESTIONS:
            found, qq = walk(q), Question.read(q)
            t = time.perf_counter()
            ranked = sentences.score(encoder, qq, sentences.candidates(found))
            quoting.choose(ranked)
            linear = (time.perf_counter() - t) * 1e3
            times[names[0]].append(linear)
            t = time.perf_counter()
            first = inv is None
            inv = inv or inventory.Inventory.build(PassageIndex.build(1, tree))
            extra = (inventory.extra_sections(tree, inv, qq, inventory.Kept(
                         1, {s.node_id for s in found}, lambda n: n))
                     if inventory.asks_for_a_name(qq.kind) else [])
            quoting.choose(sentences.score(encoder, qq, sentences.candidates(found + extra)))
            times[names[2] if first else names[1]].append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            ranked = sentences.score(encoder, qq, sentences.candidates(found))
            done = rerank.rerank(scorer, qq, ranked, sentences.THRESHOLD)
            quoting.choose(done.ranked)
            times[names[3]].append((time.perf_counter() - t) * 1e3)
            times[names[4]].append(done.ms)
            times[names[5]].append(done.tokens)
    return times


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.quote_time")
    ap.add_argument("--db")
    ap.add_argument("--doc", type=int)
    ap.add_argument("--pdf", type=Path)
    ap.add_argument("--sections", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--second-stage", action="store_true",
                    help="with --pdf: the linear score, the entry inventory and the "
                         "likelihood second stage (issue 66)")
    ap.add_argument("--scorer", choices=("likelihood", "cross"), default="likelihood",
                    help="with --second-stage: the second stage's scorer")
    ap.add_argument("--top", type=int, default=None,
                    help="with --second-stage: candidates re-read (default: the scorer's)")
    ap.add_argument("--expansion", choices=("index", "kind", "index+kind"), default=None,
                    help="with --db: the linear score without and with entry expansion "
                         "(issue 66) instead of the passage ranker")
    ap.add_argument("--code-prior", action="store_true",
                    help="with --db: the linear score without and with the code prior (issue "
                         "66, unit_prior) instead of the passage ranker")
    a = ap.parse_args(argv)
    if a.pdf is not None:
        times = (second_stage_times(a.pdf, a.sections, a.rounds, a.scorer, a.top)
                 if a.second_stage else quote_stage_times(a.pdf, a.sections, a.rounds))
        report = {k: {"median_ms": round(median(v), 1), "n": len(v)} for k, v in times.items()}
        print(json.dumps(report, indent=1))
        if a.out:
            a.out.write_text(json.dumps({"report": report, "times": times}, indent=1))
        return
    from engine.answer.options import AskOptions
    from engine.ask import ask
    from engine.runtime import Runtime
    from engine.settings import Settings

    rt = Runtime.load(Settings.from_env(db_url=a.db))
    variants = {"before (linear, routed sections)": replace(rt.settings, passage_ranker="none"),
                "after (passage ranker)": with_ranker(rt.settings)}
    if a.expansion:
        linear = replace(rt.settings, passage_ranker="none", quote_expansion="none")
        variants = {"linear": linear,
                    f"linear + expansion {a.expansion}": replace(linear,
                                                                 quote_expansion=a.expansion)}
    if a.code_prior:
        linear = replace(rt.settings, passage_ranker="none", quote_code_prior=False)
        variants = {"linear": linear,
                    "linear + code prior": replace(linear, quote_code_prior=True)}
    second = list(variants.values())[1]
    times = {k: {"total_ms": [], "quote_ms": []} for k in variants}
    first = None
    for _ in range(a.rounds):
        for q in QUESTIONS:
            for name, s in variants.items():
                rt.settings = s
                t = time.perf_counter()
                ans = ask(rt, a.doc, q, AskOptions(mode="quote"), log=False)
                total = (time.perf_counter() - t) * 1e3
                if first is None and s is second:
                    first = total
                times[name]["total_ms"].append(total)
                times[name]["quote_ms"].append(ans.metrics.quote_ms)
    report = {k: {m: round(median(v[m]), 1) for m in v} for k, v in times.items()}
    report["first ask of the second variant (builds its index), ms"] = round(first or 0, 1)
    report["questions"] = len(QUESTIONS) * a.rounds
    print(json.dumps(report, indent=1))
    if a.out:
        a.out.write_text(json.dumps({"report": report, "times": times}, indent=1))


if __name__ == "__main__":
    main()
