"""The dev probe's questions on the quote stage alone, before and after the passage ranker, on
every probe manual, without indexing it (issue 42).

    python -m bench.probe_stage [--manuals LIST] [--sections 50] [--linear-only] [--out DIR]

``bench.probe`` asks through the whole product, which needs each manual indexed (octave's 1,158
pages take most of an hour on a loaded 2-core machine). This bench builds each manual's tree as
ingest does, stands in for the walk with the ``--sections`` best sections by BM25 over heading
path and text (``bench.quote_time.stood_in_walk``: the walk keeps 40-60 sections on a big
manual), and then runs both quote stages on the same sections: the linear score over the
routed sections' units (before) and the passage ranker with the flat BM25 over the whole
manual (after), the quote's page located in the PDF as the product does. Each quote is judged
by ``bench.probe_set.judge`` (quote holds the key, quote's page is a gold page) and checked for
fragments (``quote.is_fragment``). Prints and writes OUT/summary.md and OUT/rows.jsonl (each
row with its passages' texts and pages, which ``bench.short_answer_fit`` reads).
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from bench.probe_set import (ProbeAnswer, judge, load_manuals, load_questions, manual_pdf,
                             size_bucket)
from bench.quote_time import stood_in_walk, with_ranker

VARIANTS = ("before (linear, routed sections)", "after (passage ranker)")


def run(manuals: list[str] | None, n_sections: int, linear_only: bool = False) -> list[dict]:
    import pymupdf

    from engine.answer.passages import quote as quoting
    from engine.answer.passages import ranking, sentences
    from engine.answer.question import Question
    from engine.answer.passages.pages import _norm, locate_page
    from engine.answer.passages.passage_index import PassageIndex
    from engine.document.build import build_tree
    from engine.memory.backbone import load_tokenizer
    from engine.routing.dense import load_encoder
    from engine.settings import Settings

    settings = Settings.from_env()
    tok = load_tokenizer(settings)
    encoder = load_encoder("cpu")
    ranker = ranking.PassageRanker.load(with_ranker(settings).passage_ranker_path)
    all_manuals = load_manuals()
    questions = load_questions(manuals=all_manuals)
    rows = []
    for key in manuals or list(all_manuals):
        m = all_manuals[key]
        pdf = manual_pdf(m)
        tree = build_tree(pdf, lambda t: tok.encode(t, add_special_tokens=False), tok.decode,
                          settings.node_token_limit)
        with pymupdf.open(pdf) as doc:
            pages = [_norm(p.get_text()) for p in doc]
        walk = stood_in_walk(tree, n_sections)
        index = PassageIndex.build(1, tree)

        def page_of(s):
            return locate_page(s.text, s.page_start, s.page_end, pages)

        for q in (q for q in questions if q.manual == key):
            found = walk(q.question)
            asked = Question.read(q.question)
            before = sentences.score(encoder, asked, sentences.candidates(found))
            variants = [(VARIANTS[0], before, sentences.THRESHOLD)]
            if not linear_only:
                after, _ = ranking.rank(ranker, encoder, asked, sentences.candidates(found),
                                        ranking.Manuals({1: index}, lambda d, n: n,
                                                        {1: tree.pages}))
                variants.append((VARIANTS[1], after, ranker.threshold))
            for name, ranked, bar in variants:
                quote = quoting.choose(ranked, bar, page_of)
                shown = quoting.passages(quote, ranked, bar, page_of)
                v = judge(q, ProbeAnswer(text=quote.text if quote else "",
                                         quote=quote.text if quote else None,
                                         quote_page=quote.page if quote else None,
                                         flagged=None, folded=None, not_covered=quote is None,
                                         passages=tuple(p.text for p in shown)))
                rows.append({"id": q.id, "manual": key, "pages": m.pages, "variant": name,
                             "question": q.question, "quote": quote.text if quote else None,
                             "quote_page": quote.page if quote else None,
                             "channel": quote.channel if quote else None,
                             "quote_holds": v.quote_holds, "quote_page_right": v.quote_page,
                             "passages_hold": v.passages_hold,
                             "passages": [{"text": p.text, "page": p.page, "heading": p.heading}
                                          for p in shown],
                             "fragment": bool(quote and quoting.is_fragment(quote.text))})
        print(f"{key}: done", flush=True)
    return rows


def summary(rows: list[dict]) -> str:
    groups = defaultdict(list)
    for r in rows:
        groups[(r["variant"], "all")].append(r)
        groups[(r["variant"], size_bucket(r["pages"]))].append(r)
        groups[(r["variant"], r["manual"])].append(r)
    out = ["| variant | group | questions | quote holds | page right | fragments | passages hold |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for (variant, group), rs in sorted(groups.items()):
        n = len(rs)
        held = sum(r["quote_holds"] for r in rs)
        paged = [r for r in rs if r["quote_page_right"] is not None]
        right = sum(r["quote_page_right"] for r in paged)
        frag = sum(r["fragment"] for r in rs)
        three = sum(r["passages_hold"] for r in rs)
        out.append(f"| {variant} | {group} | {n} | {held}/{n} ({100 * held / n:.0f}%) | "
                   f"{right}/{len(paged)} ({100 * right / max(1, len(paged)):.0f}%) | {frag} | "
                   f"{three}/{n} ({100 * three / n:.0f}%) |")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.probe_stage")
    ap.add_argument("--manuals", help="comma-separated manual keys (default: all)")
    ap.add_argument("--sections", type=int, default=50)
    ap.add_argument("--out", type=Path, default=Path("out/probe_stage"))
    ap.add_argument("--linear-only", action="store_true",
                    help="the linear score alone (the shipped quote stage), not the ranker's")
    a = ap.parse_args(argv)
    rows = run(a.manuals.split(",") if a.manuals else None, a.sections, a.linear_only)
    a.out.mkdir(parents=True, exist_ok=True)
    with open(a.out / "rows.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    md = summary(rows)
    (a.out / "summary.md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
