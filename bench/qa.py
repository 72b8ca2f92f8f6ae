"""Question-answering evaluation: every answer mode and two retrieval baselines side by side.

    python -m bench.qa --questions FILE... [--docs DIR] [--modes LIST] [--k K] [--limit N]
                       [--gen-limit N] [--out DIR] [--db URL] [--max-new-tokens N]
                       [--no-ingest] [--baseline-gen] [--gate on|off|both]
                       [--aggregation NAME] [--sweep-k 1,2,3,4,6] [--sweep-modes LIST]
                       [--checkpoints untrained,shipped,PATH...]
                       [--routers fused,memory,lexical,dense] [--text-only]

Question files are in the format of ../shared/bench: a line with ``reference`` (chunk ids) is an
ORD-QA question on ``openroad_documentation.json`` (looked up beside the question file, then in
../shared/bench/ordqa); a line with ``doc`` is a manual question on that PDF (in --docs, default
../shared/corpus) with ``gold`` = [{title, page}]. The set name is the file's stem.

Modes (--modes, comma separated; default all):
- ``none``   the backbone alone: the question, no context.
- ``full``   the manual's text up to the context window.
- ``text``   engine ``text`` mode: the best sentences of the routed sections (sentence packing,
             ``--sentence-budget`` tokens, ``--quote-threshold``).
- ``text-sections``: text mode with the earlier packing (whole routed sections, --text-budget).
- ``quote``  the quote alone (engine ``quote`` mode), scored like an answer, no generation.
- ``memory`` the routed nodes' memories (H2MT).
- ``flat``   HMT-style segment memories, no tree (engine ``flat`` mode; its index is built on
             first use per document, which costs about one ingest of that document).
- ``route``  routing only (hit rate, routing time); always run for every question.
- ``bm25``, ``dense``: text retrieval over all node texts (rank-bm25; all-MiniLM-L6-v2) with the
  SAME node budget as the route: n = the number of nodes the memory route selected for that
  question. Retrieved nodes' text is the context, as in ``text`` mode (generation only with
  --baseline-gen; routing hit is always reported).
- ``bm25-3``: the BM25 top-3 nodes as text (always generated): the retrieval anchor of issue 16.

Every generated row carries ``degenerate`` (engine.answer.generation.cleanup: a loop, debris or nothing; the
summary counts them per mode) and ``cut`` (stopped at the token limit); ROUGE-L and F1 are
scored without the " (cut at N tokens)" marker. Text-mode rows also carry ``evidence_all``: the
score of every sentence of the packed sections against the answer (to choose the evidence
threshold: ``--from-results`` prints its precision table). Every engine row carries ``quote_hit``
(the quote's node is a gold node or inside its subtree; no quote counts as a miss), the quote's
node and score. Every answer the engine generates carries the answer check (engine.answer.checks.check):
``flagged``, ``folded``, ``unsupported`` (the terms) and ``answer_terms`` (the recall of the
reference answer's key terms, engine.answer.checks.terms); the summary's check table gives per mode the
share flagged and how often flagged and unflagged answers hold the reference's key terms
(``bench.metrics.check_rates``). --resume keeps the rows of questions already in
results.jsonl and runs the rest.

Routing hit (../shared/bench/README.md): a gold item is reached when a selected (route) or
retrieved (bm25/dense) node is the gold node or lies inside its subtree; ``hit`` = some gold item
reached, ``full`` = all reached, ``coverage`` = fraction reached. ``ctx_hit`` is the same test on
the nodes whose text actually fitted the context budget (text/bm25/dense).

--checkpoints compares trained parts in one run on the same questions and library: each label
gets its own rows (``memory [shipped]``, ``route [untrained]``...), its memories written under its
own fingerprint (ingested when missing).

--routers compares routers (``bench/routers.py``): one ``route[<router>]`` row per router with
hit, all gold, ctx_hit (a gold node in the packed text context) and hit3 (in its first three
nodes), beside flat BM25, flat MiniLM and flat RRF over the same nodes and budgets. With
--text-only the documents are ingested without memories (phase one only); a router that needs
memories a document lacks is skipped on its questions (the row says why; the table counts
the questions each router answered), and the fused router leaves the memory channel out there.

--limit N keeps N questions per file, taken round-robin over the file's documents; --gen-limit N
runs the generating modes on the first N of those only (routing modes run on all of them).
Outputs in --out: results.jsonl (one row per question and mode), summary.md, and with --sweep-k
sweep.jsonl, rouge_vs_k.png, ttft_vs_k.png. The last printed line summarises the best mode.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.baselines import BM25Index, DenseIndex, node_corpus
from bench.metrics import (HELD, check_rates, clean_reference, evidence_precision,
                           gold_regions, manual_gold, mean, median, ordqa_gold, rouge_l,
                           routing_hit, term_recall, token_f1)
from bench.routers import FLAT, flat_rows, parse_router, router_row
from bench.readers import IN_PROCESS, SERVED, comparison_table, differences
from engine.answer.passages.evidence import Section, scored_lines, strip_cut_marker
from engine.answer.generation.cleanup import clean_answer, degeneracy
from engine.answer.passages.sections import pack_blocks, readable
from engine.answer.generation.decoding import Decoding, generate
from engine.answer.generation.prompts import TEXT_PROMPTS, text_plan
from engine.answer.generation.reader import InProcessReader
from engine.routing.router import RoutingTree
from engine.ask import AskOptions, MemoriesPending, ask
from engine.ingest import file_sha256, ingest_file
from engine.runtime import Runtime
from engine.settings import DEFAULT_BACKBONE, Settings, SettingsError

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
ORDQA_DOC = "openroad_documentation.json"
ALL_MODES = ("none", "full", "text", "memory", "flat", "bm25", "dense", "bm25-3", "quote")
# "text-sections": text mode with the earlier packing (whole sections, AskOptions.text_packing)
ENGINE_GEN_MODES = {"full", "text", "memory", "flat", "quote", "text-sections"}
ROUTED_MODES = {"route", "text", "memory", "quote", "text-sections"}  # modes whose selected nodes are the memory route


@dataclass
class Question:
    id: str
    set: str
    kind: str  # ordqa | manual
    doc: str  # file name
    doc_path: Path
    question: str
    answer: str
    gold_raw: list
    gen: bool = True  # run the generating modes on it
    doc_id: int | None = None
    regions: list[set[int]] = field(default_factory=list)
    gold_nodes: list[list[int]] = field(default_factory=list)


# -- loading -------------------------------------------------------------------------------------

def _interleave(rows: list[dict]) -> list[dict]:
    """Round-robin over documents, keeping file order within each document."""
    by_doc: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_doc[r.get("doc", ORDQA_DOC)].append(r)
    out, i = [], 0
    while len(out) < len(rows):
        for doc_rows in by_doc.values():
            if i < len(doc_rows):
                out.append(doc_rows[i])
        i += 1
    return out


def load_questions(files: list[Path], docs_dir: Path, limit: int | None) -> list[Question]:
    out = []
    for f in files:
        rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        if limit is not None:
            rows = _interleave(rows)[:limit]
        for i, r in enumerate(rows):
            if "reference" in r:
                path = f.parent / ORDQA_DOC
                if not path.exists():
                    path = SHARED / "bench" / "ordqa" / ORDQA_DOC
                q = Question(str(r["id"]), f.stem, "ordqa", ORDQA_DOC, path, r["question"].strip(),
                             clean_reference(r["answer"]), list(r["reference"]))
            elif "doc" in r:
                q = Question(str(r["id"]), f.stem, "manual", r["doc"], docs_dir / r["doc"],
                             r["question"].strip(), r["answer"], list(r.get("gold", [])))
            else:
                raise SystemExit(f"{f}: line {i + 1} has neither 'reference' nor 'doc'")
            out.append(q)
    return out


def prepare_documents(rt: Runtime, questions: list[Question], no_ingest: bool,
                      memories: bool = True) -> dict[str, int]:
    """doc file name -> doc id, ingesting (or re-writing memories of) what is missing."""
    paths = {q.doc: q.doc_path for q in reversed(questions)}  # the first question's path wins
    return ingest_documents(rt, paths, no_ingest, memories)


def ingest_documents(rt: Runtime, paths: dict[str, Path], no_ingest: bool,
                     memories: bool = True) -> dict[str, int]:
    """name -> doc id for documents at ``paths`` (name -> file), ingesting (or re-writing
    memories of) what is missing; a missing file or (with ``no_ingest``) an unstored document
    is reported and left out."""
    ids: dict[str, int] = {}
    for name in sorted(paths):
        path = paths[name]
        if not path.exists():
            print(f"  {name}: file not found at {path}; its questions are skipped", flush=True)
            continue
        existing = rt.library.find_by_sha256(file_sha256(path))
        ready = existing is not None and rt.fingerprint in rt.library.get_document(existing).fingerprints
        if existing is None and no_ingest:
            print(f"  {name}: not in the database (--no-ingest); skipped", flush=True)
            continue
        t0 = time.perf_counter()
        # --no-ingest writes nothing: a stored document without (complete) memories under this
        # fingerprint is used as it is, and memory mode skips its questions
        res = ingest_file(path, rt, memories=memories and not no_ingest)
        print(f"  {name}: doc {res.doc_id}, {res.nodes} nodes, {res.tokens} tokens"
              f"{' (reused)' if ready else f', ingested in {time.perf_counter() - t0:.0f} s'}",
              flush=True)
        ids[name] = res.doc_id
    return ids


# -- running -------------------------------------------------------------------------------------

def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _clean(row: dict) -> None:
    """The baselines' answers (none, bm25-3) get the text mode's loop cut (``clean_answer``)."""
    text, reason, trimmed = clean_answer(row["answer"], row.get("stop"))
    row.update(answer=text, degenerate=reason, repetition_cut=trimmed)
    if trimmed:
        row["cut"] = False


def _quality(row: dict, q: Question) -> None:
    if row.get("answer") is not None:
        plain = strip_cut_marker(row["answer"])
        row["rouge_l"] = rouge_l(plain, q.answer)
        row["token_f1"] = token_f1(plain, q.answer)
        row["answer_terms"] = term_recall(q.answer, plain)
        if row.get("degenerate", False) is False:
            row["degenerate"] = degeneracy(plain, row.get("stop"))


def _hit(row: dict, q: Question, selected: list[int] | None, used: list[int] | None) -> None:
    if selected is not None:
        h = routing_hit(selected, q.regions)
        row.update(hit=h.hit, full=h.full, coverage=h.coverage, reached=h.reached)
    if used is not None:
        row["ctx_hit"] = routing_hit(used, q.regions).hit


class Runner:
    def __init__(self, rt: Runtime, args):
        self.rt = rt
        self.args = args
        self.bm25: dict[int, BM25Index] = {}
        self.dense: dict[int, DenseIndex] = {}

    def tree(self, doc_id: int):
        cache = self.rt.cache.setdefault("bench_trees", {})
        if doc_id not in cache:
            cache[doc_id] = self.rt.library.get_tree(doc_id)
        return cache[doc_id]

    def _base(self, q: Question, mode: str, k: int) -> dict:
        return {"id": q.id, "set": q.set, "doc": q.doc, "mode": mode, "k": k,
                "question": q.question, "reference": q.answer, "gold_nodes": q.gold_nodes,
                "answer": None, "selected": None, "used": None, "n_selected": None,
                "hit": None, "full": None, "coverage": None, "ctx_hit": None,
                "rouge_l": None, "token_f1": None, "ttft_ms": None, "total_ms": None,
                "prefill_tokens": None, "generated_tokens": None, "route_ms": None,
                "scored": None, "peak_mem_mb": None, "degenerate": False, "cut": None,
                "warning": None, "evidence": None, "quote_hit": None, "quote_score": None,
                "quote_node": None, "flagged": None, "folded": None, "unsupported": None,
                "quote_terms": None, "answer_terms": None,
                "max_new_tokens": self.max_new_tokens(q)}

    def engine_mode(self, q: Question, mode: str, k: int, gate: bool = True,
                    label: str | None = None) -> dict:
        a = self.args
        packing = "sections" if mode == "text-sections" else "sentences"
        label = label or (mode if mode != "text-sections" else None)
        mode = "text" if mode == "text-sections" else mode
        opts = AskOptions(mode=mode, k=k, max_depth=a.max_depth, gate=gate,
                          text_packing=packing, sentence_budget=a.sentence_budget,
                          quote_threshold=a.quote_threshold,
                          max_new_tokens=self.max_new_tokens(q), text_budget=a.text_budget,
                          text_sections=a.text_sections or None,
                          text_prompt=a.text_prompt, repetition_penalty=a.repetition_penalty,
                          no_repeat_ngram=a.no_repeat_ngram)
        ans = ask(self.rt, q.doc_id, q.question, opts, log=False)
        row = self._base(q, label or ("text-sections" if packing == "sections" else mode), k)
        m = ans.metrics
        # quote_hit: the quote's node is a gold node or lies inside its subtree (no quote: a miss)
        quote = ans.quote
        if q.regions:
            row["quote_hit"] = quote is not None and routing_hit([quote.node_id], q.regions).hit
        row["quote_terms"] = term_recall(q.answer, quote.text if quote is not None else None)
        if quote is not None:
            row.update(quote_node=quote.node_id, quote_score=quote.score, quote_text=quote.text)
        row.update(ttft_ms=m.ttft_ms, total_ms=m.total_ms, route_ms=m.route_ms if mode != "full" else None,
                   peak_mem_mb=m.peak_mem_mb)
        if mode != "route":
            row.update(answer=ans.text, prefill_tokens=m.prefill_tokens,
                       generated_tokens=m.generated_tokens, degenerate=ans.degenerate,
                       repetition_cut=ans.repetition_cut,
                       cut=ans.cut, warning=ans.warning, stop=ans.stop,
                       reader=ans.reader, reader_error=ans.reader_error,
                       evidence=[[e.node_id, e.page, e.score, e.text] for e in ans.evidence])
            if ans.check is not None:  # the answer check (engine.answer.checks.check)
                row.update(flagged=ans.check.flagged, folded=ans.folded,
                           unsupported=[u.text for u in ans.check.unsupported],
                           check_line=ans.check.line,
                           answer_terms=term_recall(q.answer, strip_cut_marker(ans.text)))
        else:
            row["ttft_ms"] = None  # no generation
        if ans.route is not None and mode in ROUTED_MODES:
            sel = [ans.route.nodes[i].node_id for i in ans.route.selected]
            row.update(selected=sel, n_selected=len(sel), scored=ans.route.scored)
            used = [c.node_id for c in ans.cited] if mode == "text" else None
            row["used"] = used
            _hit(row, q, sel, used)
            if mode == "text" and ans.text.strip():
                row["evidence_all"] = self.sentence_scores(q, ans.text, used)
        elif ans.route is not None and mode == "flat":
            row["n_selected"] = len(ans.route.selected)  # segments searched for
        _quality(row, q)
        return row

    def sentence_scores(self, q: Question, answer: str, node_ids: list[int]) -> list:
        """[node_id, score, gold] of every sentence of these nodes against the answer."""
        tree = self.tree(q.doc_id)
        gold = set().union(*q.regions) if q.regions else set()
        secs = [Section(q.doc_id, i, tree.node(i).title, tree.node(i).text, None, None)
                for i in node_ids if readable(tree.node(i))]
        lines = scored_lines(self.rt.encoder, answer, secs)
        return [[e.node_id, e.score, e.node_id in gold] for e in lines]

    def max_new_tokens(self, q: Question) -> int:
        """``--max-new-tokens``, or with ``--cap-to-reference`` the reference answer's length in
        the backbone's tokens (at least 1), as the H2MT paper's evaluation caps generation."""
        if not self.args.cap_to_reference:
            return self.args.max_new_tokens
        return max(1, len(self.rt.backbone.encode(q.answer)))

    def _generate(self, q: Question, context: str):
        """The backbone's answer to ``q`` from ``context`` (none: the question alone) under the
        text mode's prompt and decoding."""
        a = self.args
        return generate(text_plan(InProcessReader(self.rt.backbone), q.question, context,
                                  TEXT_PROMPTS[a.text_prompt]),
                        Decoding(max_new_tokens=self.max_new_tokens(q),
                                 repetition_penalty=a.repetition_penalty,
                                 no_repeat_ngram=a.no_repeat_ngram))

    def none_mode(self, q: Question) -> dict:
        row = self._base(q, "none", 0)
        base = _peak_rss_mb()
        t0 = time.perf_counter()
        res = self._generate(q, "")
        total = (time.perf_counter() - t0) * 1e3
        row.update(answer=res.text, prefill_tokens=res.prefill_tokens, cut=res.cut, stop=res.stop,
                   generated_tokens=res.generated_tokens, total_ms=total,
                   ttft_ms=(res.first_token_at - t0) * 1e3 if res.first_token_at else None,
                   peak_mem_mb=max(0.0, _peak_rss_mb() - base))
        _clean(row)
        _quality(row, q)
        return row

    def retrieval_mode(self, q: Question, mode: str, n: int, generate: bool) -> dict:
        tree = self.tree(q.doc_id)
        if mode == "bm25" and q.doc_id not in self.bm25:
            self.bm25[q.doc_id] = BM25Index.build(*node_corpus(tree))
        if mode == "dense" and q.doc_id not in self.dense:
            self.dense[q.doc_id] = DenseIndex.build(*node_corpus(tree))
        index = self.bm25[q.doc_id] if mode == "bm25" else self.dense[q.doc_id]
        row = self._base(q, mode, n)
        base = _peak_rss_mb()
        t0 = time.perf_counter()
        got = index.search(q.question, n)
        row["route_ms"] = (time.perf_counter() - t0) * 1e3
        row.update(selected=got, n_selected=len(got))
        used = None
        if generate:
            ctx_text, kept = pack_blocks(self.rt.backbone.encode, self.args.text_budget,
                                         [(tree, i) for i in got])
            used = [got[j] for j in kept]
            res = self._generate(q, ctx_text)
            row.update(answer=res.text, prefill_tokens=res.prefill_tokens, cut=res.cut, stop=res.stop,
                       generated_tokens=res.generated_tokens, used=used,
                       total_ms=(time.perf_counter() - t0) * 1e3,
                       ttft_ms=(res.first_token_at - t0) * 1e3 if res.first_token_at else None)
            _clean(row)
        row["peak_mem_mb"] = max(0.0, _peak_rss_mb() - base)
        _hit(row, q, got, used)
        _quality(row, q)
        return row

    def flat_tree(self, doc_id: int, doc) -> RoutingTree:
        cache = self.rt.cache.setdefault("bench_flat", {})
        if doc_id not in cache:
            cache[doc_id] = RoutingTree.from_tree(doc.tree, None, doc_id, doc.evidence)
        return cache[doc_id]

    def question(self, q: Question, modes: list[str], k: int, gates: list[bool]) -> list[dict]:
        """All rows of one question: route first (its size is the baselines' budget)."""
        if self.args.routers:
            rows = [router_row(self, q, r, k) for r in self.args.routers]
            n = next((r["n_selected"] for r in rows if r["n_selected"]), 1)
            rows += flat_rows(self, q, n)
            if modes == ["route"]:
                return rows
        else:
            rows = []
        rows.append(self.engine_mode(q, "route", k))
        n = rows[-1]["n_selected"] or 1
        for mode in modes:
            if mode in ("bm25", "dense"):
                rows.append(self.retrieval_mode(q, mode, n, self.args.baseline_gen and q.gen))
            elif mode == "bm25-3":
                if q.gen:
                    row = self.retrieval_mode(q, "bm25", 3, True)
                    row["mode"] = "bm25-3"
                    rows.append(row)
            elif not q.gen:
                continue
            elif mode == "none":
                rows.append(self.none_mode(q))
            elif mode == "memory":
                for g in gates:
                    try:
                        rows.append(self.engine_mode(q, "memory", k, gate=g,
                                                     label=None if g else "memory-nogate"))
                    except MemoriesPending:
                        print(f"  {q.doc}: memories incomplete; memory mode skipped", flush=True)
            elif mode in ENGINE_GEN_MODES:
                rows.append(self.engine_mode(q, mode, k))
        return rows


def _brief(r: dict) -> str:
    hit = "-" if r["hit"] is None else ("H" if r["hit"] else "x")
    rouge = "" if r["rouge_l"] is None else "/%.0f" % (r["rouge_l"] * 100)
    return f"{r['mode']}:{hit}{rouge}"


# -- summary -------------------------------------------------------------------------------------

def _f(x, scale=1.0, nd=1):
    return "-" if x is None else f"{x * scale:.{nd}f}"


def summarise(rows: list[dict]) -> dict:
    """(set, mode) -> aggregate numbers."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["set"], r["mode"])].append(r)
    out = {}
    for key, rs in groups.items():
        hits = [r for r in rs if r["hit"] is not None]
        gen = [r for r in rs if r["answer"] is not None]
        peaks = [r["peak_mem_mb"] for r in rs if r["peak_mem_mb"] is not None]
        out[key] = {
            "n": len(rs), "n_hit": len(hits), "n_gen": len(gen),
            "hit": mean(float(r["hit"]) for r in hits), "full": mean(float(r["full"]) for r in hits),
            "coverage": mean(r["coverage"] for r in hits),
            "ctx_hit": mean(float(r["ctx_hit"]) for r in rs if r["ctx_hit"] is not None),
            "hit3": mean(float(r["hit3"]) for r in rs if r.get("hit3") is not None),
            "rouge_l": mean(r["rouge_l"] for r in gen), "token_f1": mean(r["token_f1"] for r in gen),
            "ttft_ms": median(r["ttft_ms"] for r in gen), "prefill": median(r["prefill_tokens"] for r in gen),
            "route_ms": median(r["route_ms"] for r in rs),
            "n_selected": median(r["n_selected"] for r in rs if r["n_selected"] is not None),
            "peak_mem_mb": max(peaks) if peaks else None,
            "degenerate": sum(1 for r in gen if r.get("degenerate")),
            "warned": sum(1 for r in gen if r.get("degenerate") and r.get("warning")),
            "cut": sum(1 for r in gen if r.get("cut")),
            "loop_cut": sum(1 for r in gen if r.get("repetition_cut")),
            "quote_hit": mean(float(r["quote_hit"]) for r in rs if r.get("quote_hit") is not None),
            "quote_terms": mean(r.get("quote_terms") for r in rs),
            "answer_terms": mean(r.get("answer_terms") for r in gen),
        }
    return out


MODE_ORDER = ["none", "full", "flat", "quote", "text", "text-sections", "memory", "memory-nogate", "route", "bm25", "bm25-3",
              "dense",
              "route[fused]", "route[memory]", "route[lexical]", "route[dense]", "flat-bm25",
              "flat-dense", "flat-rrf"]


def _router_modes(summ: dict, set_name: str) -> list[str]:
    """route[...] rows in the order asked, then the flat retrievers."""
    routes = [m for (s, m) in summ if s == set_name and m.startswith("route[")]
    return routes + [m for m in FLAT if (set_name, m) in summ]


def routers_table(summ: dict, set_name: str) -> str:
    """Routers and flat retrievers: hit among selected, all gold, ctx_hit, hit3, time."""
    lines = ["| router | questions | hit (selected) | all gold | ctx_hit | hit@3 (context) "
             "| median nodes | median ms |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m in _router_modes(summ, set_name):
        s = summ.get((set_name, m))
        if s is None:
            continue
        lines.append(f"| {m} | {s['n_hit']} | {_f(s['hit'], 100)} | {_f(s['full'], 100)} "
                     f"| {_f(s['ctx_hit'], 100)} | {_f(s['hit3'], 100)} "
                     f"| {_f(s['n_selected'], 1, 0)} | {_f(s['route_ms'], 1, 1)} |")
    return "\n".join(lines)


def loss_table(rows: list[dict], set_name: str) -> str:
    """Per router: questions whose gold no selected node reached, by the depth at which the
    gold's ancestor on the path was pruned (``bench.routers.gold_loss``), and the median walk
    time (scoring and walking, without the question's encodings)."""
    routes = [r for r in rows if r["set"] == set_name and r["mode"].startswith("route[")
              and "lost_depth" in r]  # routed rows (a skipped router has none)
    if not routes:
        return ""
    modes = list(dict.fromkeys(r["mode"] for r in routes))
    depths = sorted({r["lost_depth"] for r in routes if r["lost_depth"] is not None})
    lines = ["| router | questions | gold not reached | "
             + " | ".join(f"lost at depth {d}" for d in depths) + " | median walk ms |",
             "| --- | ---: | ---: | " + " | ".join("---:" for _ in depths) + " | ---: |"]
    for m in modes:
        rs = [r for r in routes if r["mode"] == m]
        lost = [r for r in rs if r["lost_depth"] is not None]
        by = [sum(1 for r in lost if r["lost_depth"] == d) for d in depths]
        unvisited = sum(1 for r in lost if r["lost_as"] != "pruned")
        note = f" ({unvisited} never scored)" if unvisited else ""
        lines.append(f"| {m} | {len(rs)} | {len(lost)}{note} | " + " | ".join(map(str, by))
                     + f" | {_f(median(r['walk_ms'] for r in rs if r.get('walk_ms') is not None), 1, 2)} |")
    return "\n".join(lines)


def check_table(rows: list[dict], set_name: str) -> str:
    """The answer check per mode (``bench.metrics.check_rates``): the share of answers flagged,
    and how often flagged and unflagged answers hold the reference's key terms, at two bars
    (some of them; at least half)."""
    rows = [r for r in rows if r["set"] == set_name and r.get("flagged") is not None]
    if not rows:
        return ""
    lines = ["| mode | answers | flagged | key-term recall: flagged / unflagged "
             "| holds some: flagged / unflagged | of those holding some, flagged "
             "| holds half: flagged / unflagged | of those holding half, flagged |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m in sorted({r["mode"] for r in rows}):
        rs = [r for r in rows if r["mode"] == m]
        some, half = check_rates(rs, HELD[0]), check_rates(rs, HELD[1])
        lines.append(
            f"| {m} | {some['n']} | {some['n_flagged']} ({_f(some['flagged'], 100)}%) "
            f"| {_f(some['recall_flagged'], 100)} / {_f(some['recall_unflagged'], 100)} "
            f"| {_f(some['held_flagged'], 100)} / {_f(some['held_unflagged'], 100)} "
            f"| {_f(some['flagged_of_held'], 100)} ({some['n_held']}) "
            f"| {_f(half['held_flagged'], 100)} / {_f(half['held_unflagged'], 100)} "
            f"| {_f(half['flagged_of_held'], 100)} ({half['n_held']}) |")
    return "\n".join(lines)


def summary_table(summ: dict, set_name: str) -> str:
    lines = ["| mode | questions (routed / generated) | hit rate | all gold reached | gold coverage "
             "| ctx hit | ROUGE-L F | token F1 | median TTFT ms | median prefill tok "
             "| median routing ms | median nodes | peak mem MB | degenerate (warned) | cut "
             "| loop cut | quote hit | quote terms | answer terms |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    def order(m: str) -> tuple[int, str]:  # "memory [shipped]": by mode, then by label
        base = m.split(" [")[0]
        return (MODE_ORDER.index(base) if base in MODE_ORDER else 99, m)

    modes = sorted({m for (s, m) in summ if s == set_name}, key=order)
    for m in modes:
        s = summ[(set_name, m)]
        lines.append(f"| {m} | {s['n_hit']} / {s['n_gen']} | {_f(s['hit'], 100)} | {_f(s['full'], 100)} "
                     f"| {_f(s['coverage'], 100)} | {_f(s['ctx_hit'], 100)} | {_f(s['rouge_l'], 100, 2)} "
                     f"| {_f(s['token_f1'], 100, 2)} | {_f(s['ttft_ms'], 1, 0)} | {_f(s['prefill'], 1, 0)} "
                     f"| {_f(s['route_ms'], 1, 1)} | {_f(s['n_selected'], 1, 0)} | {_f(s['peak_mem_mb'], 1, 0)} "
                     + (f"| {s['degenerate']} ({s['warned']}) | {s['cut']} | {s['loop_cut']} "
                        if s["n_gen"] else "| - | - | - ")
                     + f"| {_f(s['quote_hit'], 100)} | {_f(s['quote_terms'], 100)} "
                       f"| {_f(s['answer_terms'], 100)} |")
    return "\n".join(lines)


def best_line(summ: dict) -> str:
    parts = []
    for set_name in sorted({s for s, _ in summ}):
        gen = {m: v for (s, m), v in summ.items() if s == set_name and v["rouge_l"] is not None}
        routed = {m: v for (s, m), v in summ.items() if s == set_name and v["hit"] is not None}
        if gen:
            m = max(gen, key=lambda x: gen[x]["rouge_l"])
            parts.append(f"{set_name}: best ROUGE-L {m} {gen[m]['rouge_l'] * 100:.2f} "
                         f"(routing hit {_f(gen[m]['hit'], 100)}%)")
        if routed:
            m = max(routed, key=lambda x: routed[x]["hit"])
            parts.append(f"{set_name}: best routing hit {m} {routed[m]['hit'] * 100:.1f}%")
    return "best: " + "; ".join(parts) if parts else "best: no results"


# -- sweep and plots -----------------------------------------------------------------------------

def run_sweep(runner: Runner, questions: list[Question], ks: list[int], modes: list[str],
              out: Path) -> tuple[list[dict], str]:
    rows = []
    for k in ks:
        for q in questions:
            rows.append(runner.engine_mode(q, "route", k))
            if q.gen:
                for m in modes:
                    if m == "route":
                        continue
                    rows.append(runner.engine_mode(q, m, k))
        print(f"  sweep k={k}: {len(rows)} rows", flush=True)
    with open(out / "sweep.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    agg: dict[tuple[str, str, int], list[dict]] = defaultdict(list)
    for r in rows:
        agg[(r["set"], r["mode"], r["k"])].append(r)
    lines = ["| set | mode | k | questions | hit rate | gold coverage | ROUGE-L F | median TTFT ms "
             "| median prefill tok | median nodes | median scored | median routing ms |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for (s, m, k), rs in sorted(agg.items()):
        hits = [r for r in rs if r["hit"] is not None]
        lines.append(f"| {s} | {m} | {k} | {len(rs)} | {_f(mean(float(r['hit']) for r in hits), 100)} "
                     f"| {_f(mean(r['coverage'] for r in hits), 100)} "
                     f"| {_f(mean(r['rouge_l'] for r in rs), 100, 2)} | {_f(median(r['ttft_ms'] for r in rs), 1, 0)} "
                     f"| {_f(median(r['prefill_tokens'] for r in rs), 1, 0)} "
                     f"| {_f(median(r['n_selected'] for r in rs), 1, 0)} "
                     f"| {_f(median(r['scored'] for r in rs), 1, 0)} | {_f(median(r['route_ms'] for r in rs), 1, 1)} |")
    plot_sweep(agg, out)
    return rows, "\n".join(lines)


def plot_sweep(agg: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for metric, fname, ylabel, scale in (("rouge_l", "rouge_vs_k.png", "ROUGE-L F (%)", 100),
                                         ("ttft_ms", "ttft_vs_k.png", "median TTFT (ms)", 1)):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        series: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
        for (s, m, k), rs in agg.items():
            vals = [r[metric] for r in rs if r[metric] is not None]
            if not vals:
                continue
            v = mean(vals) if metric == "rouge_l" else median(vals)
            series[(s, m)].append((k, v * scale))
        for (s, m), pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{s} {m}")
        ax.set_xlabel("top-k per parent")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if series:
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=120)
        plt.close(fig)


# -- main ----------------------------------------------------------------------------------------

def load_runtimes(settings: Settings, checkpoints: str | None) -> list[tuple[str, Runtime]]:
    """One Runtime per compared checkpoint, sharing the backbone and the library.

    'untrained' is the untrained initialisation, 'shipped' the checkpoint in assets/, anything
    else a safetensors path; None: the settings' own (the shipped one by default)."""
    if not checkpoints:
        rt = Runtime.load(settings)
        label = str(settings.checkpoint_path.name) if settings.checkpoint_path else "untrained"
        return [(label, rt)]
    from engine.memory.backbone import load_backbone
    from engine.memory.parts import load_or_init_parts
    from storage import Library

    backbone = load_backbone(settings)
    library = Library(settings.database_url)
    out = []
    for spec in [c.strip() for c in checkpoints.split(",") if c.strip()]:
        ck = {"untrained": "none", "shipped": "auto"}.get(spec, spec)
        s = settings.with_(checkpoint=ck)
        if spec == "shipped" and s.checkpoint_path is None:
            raise SystemExit("no shipped checkpoint for these settings (default backbone, mean)")
        out.append((spec if spec in ("untrained", "shipped") else Path(spec).stem,
                    Runtime(s, backbone, load_or_init_parts(s, backbone), library)))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=Path, nargs="+")
    ap.add_argument("--from-results", type=Path, default=None,
                    help="only re-summarise an existing results.jsonl (e.g. of an interrupted run)")
    ap.add_argument("--docs", type=Path, default=CORPUS, help="folder of the manuals (PDFs)")
    ap.add_argument("--modes", default=",".join(ALL_MODES))
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--max-depth", type=int, default=None)
    ap.add_argument("--limit", type=int, default=None, help="questions per file (round-robin over docs)")
    ap.add_argument("--gen-limit", type=int, default=None, help="generate for the first N per file only")
    ap.add_argument("--out", type=Path, default=Path("bench_out"))
    ap.add_argument("--db", default=None, help="database URL (default: a scratch one in --out)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--cap-to-reference", action="store_true",
                    help="cap generation at the reference answer's length in the backbone's tokens "
                         "(as the H2MT paper's evaluation does), instead of --max-new-tokens")
    ap.add_argument("--resume", action="store_true",
                    help="keep the questions already in --out's results.jsonl, run the others")
    ap.add_argument("--text-prompt", choices=tuple(TEXT_PROMPTS), default=AskOptions.text_prompt,
                    help="text-mode system prompt (engine.answer.generation.prompts.TEXT_PROMPTS); the "
                         "product's default unless given")
    ap.add_argument("--repetition-penalty", type=float, default=AskOptions.repetition_penalty,
                    help="decoding: transformers' repetition penalty for every generating mode")
    ap.add_argument("--no-repeat-ngram", type=int, default=AskOptions.no_repeat_ngram,
                    help="decoding: never repeat an n-gram of this size (0 = off), every mode")
    ap.add_argument("--text-sections", type=int, default=AskOptions.text_sections,
                    help="text mode: at most this many sections in the context (0: as many as fit)")
    ap.add_argument("--sentence-budget", type=int, default=AskOptions.sentence_budget,
                    help="text mode's context tokens (sentence packing)")
    ap.add_argument("--quote-threshold", type=float, default=AskOptions.quote_threshold,
                    help="sentence score below which there is no quote nor context")
    ap.add_argument("--text-budget", type=int, default=1024, help="context tokens for text/bm25/dense")
    ap.add_argument("--no-ingest", action="store_true",
                    help="skip documents not already stored; write no memories")
    ap.add_argument("--baseline-gen", action="store_true", help="generate answers for bm25/dense too")
    ap.add_argument("--gate", choices=("on", "off", "both"), default="on")
    ap.add_argument("--aggregation", default=None, help="Settings.aggregation (re-writes memories)")
    ap.add_argument("--sweep-k", default=None, help="e.g. 1,2,3,4,6")
    ap.add_argument("--sweep-modes", default="route,memory")
    ap.add_argument("--routers", default=None,
                    help="compare routers: comma-separated fused,memory,lexical,dense (plus flat "
                         "BM25, MiniLM and RRF baselines over the same nodes and budgets)")
    ap.add_argument("--text-only", action="store_true",
                    help="ingest without memories (phase one only; no memory router)")
    ap.add_argument("--checkpoints", default=None,
                    help="compare trained parts in one run: comma-separated 'untrained', 'shipped' "
                         "or safetensors paths; each gets its own rows (mode [label])")
    ap.add_argument("--reader", default=None,
                    help="the model that reads text (H2MT_READER): a model folder, a GGUF file, or "
                         "an OpenAI-compatible server's base URL (http://host:8000/v1)")
    ap.add_argument("--reader-model", default=None,
                    help="the served model's name with an http(s) --reader (H2MT_READER_MODEL)")
    ap.add_argument("--compare-in-process", action="store_true",
                    help="with a served --reader: ask every question with the in-process reader "
                         "too, one after the other (rows 'MODE [in-process]', 'MODE [served]'), "
                         "and compare their answers and time to first token (bench/readers.py)")
    args = ap.parse_args(argv)
    args.routers = [r for r in (args.routers or "").split(",") if r]
    for r in args.routers:
        try:
            parse_router(r)
        except ValueError as e:
            raise SystemExit(str(e)) from None
    if args.from_results:
        rows = [json.loads(x) for x in args.from_results.read_text().splitlines() if x.strip()]
        summ = summarise(rows)
        md = [f"(re-summarised from {args.from_results}: {len({(r['set'], r['id']) for r in rows})} questions)", ""]
        for s in sorted({s for s, _ in summ}):
            md += [f"## {s}", "", summary_table(summ, s), "", routers_table(summ, s), "",
                   loss_table(rows, s), "", check_table(rows, s), ""]
        if any(r.get("evidence_all") for r in rows):
            table = evidence_precision(rows, [x / 100 for x in range(50, 96, 5)])
            md += ["## evidence threshold (text mode)", "",
                   f"{table[0]['n']} answers without a degeneracy flag, {table[0]['correct']} "
                   "correct (token F1 >= 0.3); at most 3 lines per answer.", "",
                   "| threshold | lines shown | in a gold section | and answer correct "
                   "| answers with a line |", "| ---: | ---: | ---: | ---: | ---: |"]
            for e in table:
                md.append(f"| {e['threshold']:.2f} | {e['lines']} | {_f(e['precision'], 100)} "
                          f"| {_f(e['strict'], 100)} | {_f(e['answers'], 100)} |")
        print("\n".join(md))
        print(best_line(summ))
        return
    if not args.questions:
        ap.error("--questions is required")

    args.out.mkdir(parents=True, exist_ok=True)
    db = args.db or f"sqlite:///{(args.out / 'lib.sqlite3').resolve()}"
    try:
        settings = Settings.from_env(db_url=db, aggregation=args.aggregation,
                                     reader=args.reader, reader_model=args.reader_model)
    except SettingsError as e:
        raise SystemExit(f"error: {e}") from None
    modes = [m for m in args.modes.split(",") if m]
    known = ALL_MODES + ("route", "text-sections")
    bad = [m for m in modes if m not in known]
    if bad:
        raise SystemExit(f"unknown modes {bad}; choose from {', '.join(known)}")
    gates = {"on": [True], "off": [False], "both": [True, False]}[args.gate]

    t_start = time.perf_counter()
    questions = load_questions(args.questions, args.docs, args.limit)
    runtimes = load_runtimes(settings, args.checkpoints)
    if args.compare_in_process:
        if not settings.reader_is_remote or args.checkpoints:
            raise SystemExit("--compare-in-process needs a served --reader (and no --checkpoints)")
        served = runtimes[0][1]
        local = Runtime(replace(settings, reader=DEFAULT_BACKBONE, reader_model=None),
                        served.backbone, served.parts, served.library)
        runtimes = [(IN_PROCESS, local), (SERVED, served)]
    rt = runtimes[0][1]
    for label, r in runtimes:
        print(f"{label}: backbone {r.backbone.name} on {r.backbone.device}; aggregation "
              f"{r.parts.aggregation}; fingerprint {r.fingerprint[:12]}", flush=True)
    doc_ids = prepare_documents(rt, questions, args.no_ingest, memories=not args.text_only)
    for _, other in runtimes[1:]:  # the same documents, memories under each fingerprint
        if prepare_documents(other, questions, args.no_ingest) != doc_ids:
            raise SystemExit("documents differ between checkpoints (use the same --db, no --no-ingest)")
    kept = []
    for q in questions:
        if q.doc not in doc_ids:
            continue
        q.doc_id = doc_ids[q.doc]
        tree = rt.library.get_tree(q.doc_id)
        gold = ordqa_gold(tree, q.gold_raw) if q.kind == "ordqa" else manual_gold(tree, q.gold_raw)
        missing = sum(1 for g in gold if not g)
        if missing:
            print(f"  {q.id}: {missing} gold item(s) match no node", flush=True)
        q.gold_nodes = [sorted(g) for g in gold]
        q.regions = gold_regions(tree, gold)
        kept.append(q)
    questions = kept
    per_set: dict[str, int] = defaultdict(int)
    for q in questions:  # --gen-limit counts the questions kept (documents present)
        q.gen = args.gen_limit is None or per_set[q.set] < args.gen_limit
        per_set[q.set] += 1
    runners = [(label, Runner(r, args)) for label, r in runtimes]
    runner = runners[0][1]
    rows: list[dict] = []
    out_rows = args.out / "results.jsonl"
    have: dict[tuple[str, str], set[str]] = defaultdict(set)
    if args.resume and out_rows.exists():
        rows = [json.loads(x) for x in out_rows.read_text().splitlines() if x.strip()]
        for r in rows:
            have[(r["set"], r["id"])].add(r["mode"])
        print(f"  resuming: {len(rows)} rows of {len(have)} questions already in {out_rows}",
              flush=True)
    with open(out_rows, "a" if args.resume else "w") as f:
        for i, q in enumerate(questions):
            got = have[(q.set, q.id)]
            todo = [m for m in modes if m not in got]  # a resumed run adds the missing modes
            if not todo and "route" in got:
                continue
            t0 = time.perf_counter()
            for label, one in runners:
                for r in one.question(q, todo, args.k, gates):
                    if r["mode"] in got:  # the route row, run again for the budget
                        continue
                    if len(runners) > 1:
                        r["mode"] = f"{r['mode']} [{label}]"
                    rows.append(r)
                    f.write(json.dumps(r) + "\n")
            f.flush()
            brief = " ".join(_brief(r) for r in rows if r["id"] == q.id and r["set"] == q.set)
            print(f"[{i + 1}/{len(questions)}] {q.set} {q.id} {time.perf_counter() - t0:.1f}s  {brief}",
                  flush=True)

    summ = summarise(rows)
    sweep_md = ""
    if args.sweep_k:
        ks = [int(x) for x in args.sweep_k.split(",")]
        _, sweep_md = run_sweep(runner, questions, ks, args.sweep_modes.split(","), args.out)

    md = ["# QA results", "",
          f"- backbone: {rt.backbone.name} on {rt.backbone.device} ({platform.processor() or platform.machine()}); "
          f"parts: {'; '.join(f'{label} (fingerprint `{r.fingerprint[:12]}`, aggregation `{r.parts.aggregation}`)' for label, r in runtimes)}",
          f"- k={args.k}, max depth {args.max_depth}, max new tokens "
          f"{'the reference length' if args.cap_to_reference else args.max_new_tokens}, "
          f"text budget {args.text_budget} tokens, limit {args.limit}, gen limit {args.gen_limit}, "
          f"gate {args.gate}, baseline generation {'on' if args.baseline_gen else 'off'}, "
          f"text sections {args.text_sections or 'no cap'}, "
          f"text prompt {args.text_prompt}, repetition penalty {args.repetition_penalty}, "
          f"no-repeat n-gram {args.no_repeat_ngram or 'off'}",
          "- hit: some gold item reached by a selected/retrieved node (gold node or inside its subtree); "
          "all gold reached: every gold item; coverage: mean fraction reached; ctx hit: the same on "
          "the nodes that fitted the context budget. bm25/dense retrieve as many nodes as the route "
          "selected for that question. ROUGE-L and token F1 in %, means over generated answers.",
          f"- command: `python -m bench.qa {' '.join(sys.argv[1:]) if argv is None else ' '.join(argv)}`",
          f"- wall time {time.perf_counter() - t_start:.0f} s", ""]
    for s in sorted({s for s, _ in summ}):
        md += [f"## {s}", "", summary_table(summ, s), ""]
        if any(r.get("flagged") is not None for r in rows if r["set"] == s):
            md += ["The answer check (engine.answer.checks.check): answers flagged, and the reference's "
                   "key terms (engine.answer.checks.terms) in flagged and unflagged answers, in %:", "",
                   check_table(rows, s), ""]
        if args.routers:
            md += [routers_table(summ, s), "", "Where the routes lost their gold:", "",
                   loss_table(rows, s), ""]
    if args.compare_in_process:
        diff = differences(rows)
        (args.out / "reader_differences.json").write_text(json.dumps(diff, indent=1))
        md += ["## in-process and served reader", "", comparison_table(rows), "",
               f"{len(diff)} answers differ (reader_differences.json)", ""]
    if sweep_md:
        md += ["## k sweep", "", sweep_md, "", "![ROUGE-L vs k](rouge_vs_k.png) ![TTFT vs k](ttft_vs_k.png)", ""]
    (args.out / "summary.md").write_text("\n".join(md))
    print("\n".join(md))
    print(best_line(summ))


if __name__ == "__main__":
    main()
