"""Answer generation over a Route (H2MT 3.3 "Output generation") and its baselines.

Modes (all through the backbone's chat template, greedy decoding):
- ``memory``: H2MT. The selected nodes' memories become input embeddings (memory slots) placed
  in the user turn before the question text; the model never generates from memory vectors
  alone. Slots go through the ArcAligner projector and, when enabled, its masked LoRA and gate
  (engine/aligner.py); otherwise through the parts' memory input scale. Optionally HDT's
  hierarchical positional encoding of each node's tree path is added to its slot.
- ``text``: the reader reads the best sentences of the routed sections (``engine.answer.sentences``,
  RECOMP-style extractive compression), in document order under their heading paths and pages,
  within a small token budget; with no sentence above the threshold it answers without context.
  ``Context.text_packing = "sections"`` keeps the earlier packing (the selected nodes' whole
  text, best routing score first, within ``text_budget``) for comparison.
- ``quote``: the quote alone (``engine.answer.quote``), no generation.
- ``full``: the manual's text in document order up to the context window (the plain baseline).
- ``flat``: HMT-style: fixed-length segments of the manual, one memory each from the same
  writer, memory search by the same scaled dot-product over all segment memories, no tree.
- ``route``: routing only, no generation.

Metrics: TTFT (time from the call to the first generated token's logits), total time, routing
time, prefill tokens (sequence positions of the prompt, slots included), generated tokens, and
peak memory (CUDA max allocated on GPU; on CPU the growth of the resident set during the call,
sampled).

Decoding stops on a looping 4-gram (``engine.answer.guard``); ``GenerationResult.stop`` says why
generation ended (eos, length, time, repeat). ``plan_*`` build a mode's prompt and citations
before anything is generated, so a caller can show the route first and stream the answer.
"""
from __future__ import annotations

import math
import resource
import time
from dataclasses import asdict, dataclass, field

import torch
from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteriaList

from engine.answer.evidence import EvidenceLine
from engine.answer.guard import DECODE, RepeatStop
from engine.answer.quote import Quote
from engine.answer.sentences import Sentence, context_text
from engine.memory.backbone import Backbone
from engine.routing.router import Route

MODES = ("memory", "text", "full", "flat", "route", "quote")
TEXT_PACKINGS = ("sentences", "sections")
SLOT_MARKER = "\u2063MEMORY\u2063"  # invisible separators: never in user text, split on it
# Node kinds never put into an answer's context (document.hygiene marks them at build time).
CONTEXT_EXCLUDED_KINDS = frozenset({"toc", "index"})
SYSTEM_PROMPT = ("You answer questions about a technical manual. Use the provided context; "
                 "answer briefly and precisely.")
# Text mode's prompt (the memory prompt above is the one the parts were trained with).
TEXT_SYSTEM_PROMPT = ("You answer questions about a technical manual from the numbered manual "
                      "sections given. Answer from those sections only. Name the exact command, "
                      "option or function the manual uses. If the sections do not answer the "
                      "question, say: the manual does not say.")
# Text mode's prompts by name (AskOptions.text_prompt, which says why "generic" is the default):
# "generic" is the memory prompt above, "manual" the stricter one.
TEXT_PROMPTS = {"generic": SYSTEM_PROMPT, "manual": TEXT_SYSTEM_PROMPT}


@dataclass
class Citation:
    id: int  # routed node id
    doc_id: int | None
    node_id: int
    title: str
    page_start: int | None
    page_end: int | None


@dataclass
class Metrics:
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    route_ms: float = 0.0
    query_vector_ms: float = 0.0  # part of route_ms: the H2MT query vector (a backbone pass)
    prefill_tokens: int = 0
    generated_tokens: int = 0
    peak_mem_mb: float = 0.0
    evidence_ms: float = 0.0  # finding the evidence lines after generation
    quote_ms: float = 0.0  # scoring the routed sections' sentences and choosing the quote


@dataclass
class Answer:
    text: str
    mode: str
    cited: list[Citation]
    gate: dict[int, list[int]]  # routed node id -> extra loops per gated layer
    metrics: Metrics
    route: Route | None = None
    warning: str | None = None  # shown to the user beside the answer (e.g. a left-out channel)
    evidence: list[EvidenceLine] = field(default_factory=list)  # supporting sentences, best first
    cut: bool = False  # generation stopped at the token (or time) limit, mid-answer
    cut_at: int | None = None  # generated tokens when cut
    degenerate: str | None = None  # why the output is not an answer (engine.answer.guard)
    stop: str | None = None  # why generation ended (GenerationResult.stop); None: no generation
    repetition_cut: bool = False  # a loop at the end was cut off (engine.answer.guard.trim_loop)
    quote: Quote | None = None  # the manual's best passage, verbatim (engine.answer.quote)
    not_covered: bool = False  # no sentence of the routed sections reached the threshold

    def as_json(self) -> dict:
        """The CLI's --json object."""
        route = None
        if self.route is not None:
            route = [{k: r[k] for k in ("id", "parent", "doc_id", "node_id", "title", "depth",
                                        "page_start", "page_end", "score", "prob", "status",
                                        "visit", "channels")}
                     for r in self.route.as_records()]
        return {"answer": self.text, "mode": self.mode, "route": route,
                "router": self.route.router if self.route is not None else None,
                "alternatives": dict(self.route.alternatives) if self.route is not None else {},
                "warning": self.warning,
                "degenerate": self.degenerate is not None,
                "cut": self.cut, "cut_at": self.cut_at, "stop": self.stop,
                "repetition_cut": self.repetition_cut,
                "evidence": [asdict(e) for e in self.evidence],
                "quote": self.quote.as_json() if self.quote is not None else None,
                "not_covered": self.not_covered,
                "cited": [asdict(c) for c in self.cited],
                "gate": {str(k): v for k, v in self.gate.items()},
                "metrics": {k: round(v, 2) if isinstance(v, float) else v
                            for k, v in asdict(self.metrics).items()}}


# -- measurement ---------------------------------------------------------------------------------

class _FirstToken(LogitsProcessor):
    """Records when the first new token's logits exist (the end of prefill): TTFT."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, input_ids, scores):
        if self.at is None:
            self.at = time.perf_counter()
        return scores


class _PeakMemory:
    """Peak memory of one call: CUDA max allocated on GPU; on CPU the highest resident set size
    seen during the call minus the size at its start, sampled from /proc every 5 ms (a library
    call does not expose a per-call CPU peak; ru_maxrss only tells the process's lifetime peak)."""

    def __init__(self, device: torch.device, interval_s: float = 0.005):
        self.device = device
        self.interval_s = interval_s
        self.mb = 0.0

    @staticmethod
    def _rss_bytes() -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * resource.getpagesize()
        except OSError:  # not Linux: fall back to the lifetime peak (KiB on Linux, bytes on macOS)
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, self._rss_bytes())

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        else:
            import threading

            self.base = self.peak = self._rss_bytes()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            self.mb = (torch.cuda.max_memory_allocated(self.device) - self.base) / 2**20
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, self._rss_bytes())
            self.mb = (self.peak - self.base) / 2**20


# -- prompts -------------------------------------------------------------------------------------

def chat_parts(backbone: Backbone, user_text: str, system: str = SYSTEM_PROMPT) -> list[str]:
    """The chat-templated prompt split at SLOT_MARKER (text before, [between...], after)."""
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": user_text}]
    rendered = backbone.tokenizer.apply_chat_template(messages, tokenize=False,
                                                      add_generation_prompt=True)
    return rendered.split(SLOT_MARKER)


def hierarchical_position_encoding(paths: list[list[int]], d: int) -> torch.Tensor:
    """HDT eq. (2): sum over levels l of sinusoids of the node's index p^l at that level.

    ``paths[i]`` holds the 1-based sibling index of each ancestor (root excluded) down to node i.
    Returns [len(paths), d] with rows of unit RMS (scaled by the caller).
    """
    k = torch.arange(d // 2, dtype=torch.float32)
    omega = 1.0 / (10000 ** (2 * k / d))
    out = torch.zeros(len(paths), d)
    for i, path in enumerate(paths):
        for p in path:
            out[i, 0::2][: len(k)] += torch.sin(omega * p)
            out[i, 1::2][: len(k)] += torch.cos(omega * p)
    rms = out.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(1e-6)
    return out / rms


@dataclass
class GenerationResult:
    text: str
    prefill_tokens: int
    generated_tokens: int
    first_token_at: float | None
    loops: torch.Tensor | None = None  # [n_slots, n_gated_layers] when the gate ran
    stop: str = "eos"  # why generation ended: eos | length | time | loop (cut off) | repeat

    @property
    def cut(self) -> bool:
        """Stopped by the token or time limit, not by the model (nor by the repetition stop)."""
        return self.stop in ("length", "time")


def _eos_ids(backbone: Backbone) -> set[int]:
    ids = backbone.model.generation_config.eos_token_id
    ids = [ids] if isinstance(ids, int) else list(ids or [])
    if backbone.tokenizer.eos_token_id is not None:
        ids.append(backbone.tokenizer.eos_token_id)
    return set(ids)


@torch.no_grad()
def generate(backbone: Backbone, pieces: list[torch.Tensor], *, slot_mask: torch.Tensor | None = None,
             aligner=None, max_new_tokens: int = 128,
             max_time: float | None = None, streamer=None, guard: bool = True,
             repetition_penalty: float = 1.0, no_repeat_ngram: int = 0) -> GenerationResult:
    """Greedy generation from concatenated input embeddings [n, d] (text and slots).

    ``repetition_penalty`` and ``no_repeat_ngram`` are transformers' own logits processors
    (CTRL's penalty on tokens already generated; a ban on repeating an n-gram); with
    ``inputs_embeds`` they see the generated tokens only, never the prompt's.

    ``streamer``: a transformers streamer fed the new tokens as they come (a ``GuardedStreamer``
    is given this call's guard); ``guard``: stop on a loop (``RepeatStop``), cutting it off."""
    embeds = torch.cat(pieces).unsqueeze(0).to(backbone.device, backbone.dtype)
    mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=backbone.device)
    first = _FirstToken()
    stop = RepeatStop()
    kwargs = dict(inputs_embeds=embeds, attention_mask=mask, max_new_tokens=max_new_tokens,
                  do_sample=False, logits_processor=LogitsProcessorList([first]),
                  pad_token_id=backbone.tokenizer.pad_token_id)
    if repetition_penalty != 1.0:
        kwargs["repetition_penalty"] = repetition_penalty
    if no_repeat_ngram:
        kwargs["no_repeat_ngram_size"] = no_repeat_ngram
    if guard:
        kwargs["stopping_criteria"] = StoppingCriteriaList([stop])
    if streamer is not None:
        kwargs["streamer"] = streamer
        if hasattr(streamer, "guard"):
            streamer.guard = stop if guard else None
    if max_time is not None:  # a wall-clock cap (seconds): generation stops, keeping its text
        kwargs["max_time"] = max_time
    loops = None
    if aligner is not None and slot_mask is not None and slot_mask.any():
        with aligner.attached(backbone.model), aligner.slots(slot_mask.unsqueeze(0).to(backbone.device)):
            out = backbone.model.generate(**kwargs)
        loops = aligner.last_loops[0] if aligner.last_loops is not None else None
    else:
        out = backbone.model.generate(**kwargs)
    new = out[0]  # with inputs_embeds only, generate returns just the new tokens
    text = backbone.tokenizer.decode(new[: len(new) - stop.trim], **DECODE).strip()
    if stop.fired:
        why = stop.fired
    elif new.numel() and int(new[-1]) in _eos_ids(backbone):
        why = "eos"
    elif new.numel() >= max_new_tokens:
        why = "length"
    else:
        why = "time"
    return GenerationResult(text=text, prefill_tokens=embeds.shape[1],
                            generated_tokens=int(new.numel()), first_token_at=first.at, loops=loops,
                            stop=why)


# -- modes ---------------------------------------------------------------------------------------

@dataclass
class Context:
    """What the modes read: the routed structure, the documents' trees, the model parts."""

    backbone: Backbone
    parts: object  # engine.memory.parts.H2MTParts
    routing: object  # engine.routing.router.RoutingTree
    trees: dict  # doc_id -> Tree
    aligner: object | None = None  # engine.memory.aligner.ArcAligner, or None
    gate: bool = True
    hier_pos: bool = False
    hier_pos_scale: float = 0.1  # HPE added at this fraction of the slot's norm
    max_new_tokens: int = 128
    max_time: float | None = None  # seconds of generation at most (Settings.request_timeout_s)
    text_budget: int = 1024  # context tokens for the text mode
    text_sections: int | None = None  # at most this many sections in text mode's context
    streamer: object | None = None  # a transformers streamer fed the answer's tokens
    guard: bool = True  # stop on a looping 4-gram (engine.answer.guard)
    text_system: str = SYSTEM_PROMPT  # text mode's system prompt (TEXT_PROMPTS)
    repetition_penalty: float = 1.0  # decoding (``generate``); 1.0 = off
    no_repeat_ngram: int = 0  # decoding (``generate``); 0 = off
    # The model that reads text (text and full modes, H2MT_READER); None: the backbone itself.
    reader: Backbone | None = None
    text_packing: str = "sentences"  # TEXT_PACKINGS
    sentences: list[Sentence] = field(default_factory=list)  # text mode's kept sentences
    sentence_page: object | None = None  # sentence -> page (for the context's page marks)

    @property
    def text_model(self) -> Backbone:
        return self.reader if self.reader is not None else self.backbone


@dataclass
class Plan:
    """A mode's prompt, ready to generate from: input embedding pieces, slot mask, gate, and
    the model that generates (None: the backbone)."""

    pieces: list[torch.Tensor]
    slot_mask: torch.Tensor | None = None
    aligner: object | None = None
    model: Backbone | None = None


def run_plan(ctx: Context, plan: Plan) -> GenerationResult:
    return generate(plan.model or ctx.backbone, plan.pieces, slot_mask=plan.slot_mask, aligner=plan.aligner,
                    max_new_tokens=ctx.max_new_tokens, max_time=ctx.max_time,
                    streamer=ctx.streamer, guard=ctx.guard,
                    repetition_penalty=ctx.repetition_penalty, no_repeat_ngram=ctx.no_repeat_ngram)


def _embed_text(backbone: Backbone, text: str) -> torch.Tensor:
    ids = torch.tensor(backbone.encode(text), dtype=torch.long)
    return backbone.embed(ids).float().cpu() if len(ids) else torch.zeros(0, backbone.hidden_size)


def _citation(ctx: Context, rid: int) -> Citation:
    return citation(ctx.routing, rid)


def citation(r, rid: int) -> Citation:
    """The citation of routed node ``rid`` of RoutingTree ``r``."""
    return Citation(id=rid, doc_id=r.origin[rid][0], node_id=r.origin[rid][1], title=r.title[rid],
                    page_start=r.pages[rid][0], page_end=r.pages[rid][1])


def _path_indices(ctx: Context, rid: int) -> list[int]:
    """1-based sibling index of each ancestor below the root, down to the node (HDT's p^l)."""
    r = ctx.routing
    path = []
    cur = rid
    while r.parent[cur] is not None:
        path.append(r.children[r.parent[cur]].index(cur) + 1)
        cur = r.parent[cur]
    return path[::-1]


def slot_embeddings(ctx: Context, memories: torch.Tensor, paths: list[list[int]] | None) -> torch.Tensor:
    """Memory slots in the input space: ArcAligner projector (eq. 1) or the parts' scale."""
    with torch.no_grad():
        if ctx.aligner is not None:
            slots = ctx.aligner.project(memories.to(ctx.backbone.device)).float().cpu()
        else:
            slots = ctx.parts.memory_as_input(memories.to(ctx.backbone.device)).float().cpu()
    if ctx.hier_pos and paths:
        hpe = hierarchical_position_encoding(paths, slots.shape[-1])
        slots = slots + ctx.hier_pos_scale * slots.norm(dim=-1, keepdim=True) / math.sqrt(slots.shape[-1]) * hpe
    return slots


def prompt_around_slots(backbone: Backbone, question: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings [n, d] of the memory-mode prompt before and after the slots (training builds
    L_gen's prefixes with this too, so it trains on exactly the prompt the product uses)."""
    before, after = chat_parts(backbone, f"Context: {SLOT_MARKER}\n\nQuestion: {question.strip()}")
    return _embed_text(backbone, before), _embed_text(backbone, after)


def slots_plan(ctx: Context, question: str, memories: torch.Tensor,
               paths: list[list[int]] | None) -> Plan:
    """H2MT generation: [chat prefix; "Context:"; slots; question; assistant prefix]."""
    head, tail = prompt_around_slots(ctx.backbone, question)
    slots = slot_embeddings(ctx, memories, paths)
    slot_mask = torch.cat([torch.zeros(len(head), dtype=torch.bool), torch.ones(len(slots), dtype=torch.bool),
                           torch.zeros(len(tail), dtype=torch.bool)])
    return Plan([head, slots, tail], slot_mask, ctx.aligner if ctx.gate else None)


def generate_with_slots(ctx: Context, question: str, memories: torch.Tensor,
                        paths: list[list[int]] | None) -> GenerationResult:
    return run_plan(ctx, slots_plan(ctx, question, memories, paths))


def text_plan(ctx: Context, question: str, context_text: str) -> Plan:
    """With context: the manual sections under ``ctx.text_system``; without: the question
    alone under the generic prompt (the backbone alone)."""
    model = ctx.text_model
    if context_text:
        user = f"Manual sections:\n{context_text}\n\nQuestion: {question.strip()}"
        (prompt,) = chat_parts(model, user, ctx.text_system)
    else:
        (prompt,) = chat_parts(model, question.strip())
    return Plan([_embed_text(model, prompt)], model=model)


def generate_with_text(ctx: Context, question: str, context_text: str) -> GenerationResult:
    return run_plan(ctx, text_plan(ctx, question, context_text))


def plan_memory(ctx: Context, question: str, route: Route) -> tuple[Plan, list[int]]:
    ids = sorted(route.selected)  # document order
    if not ids:
        return text_plan(ctx, question, ""), []
    mem = ctx.routing.memories[ids]
    return slots_plan(ctx, question, mem, [_path_indices(ctx, i) for i in ids]), ids


def answer_memory(ctx: Context, question: str, route: Route) -> tuple[GenerationResult, list[int]]:
    plan, ids = plan_memory(ctx, question, route)
    return run_plan(ctx, plan), ids


def heading_path(tree, node_id: int, levels: int = 3) -> str:
    """The node's headings below the manual's title, the last ``levels`` of them, " > "-joined."""
    titles = [n.title.strip() for n in tree.path(node_id)[1:] if n.title.strip()]
    return " > ".join(titles[-levels:])


def pack_blocks(encode, budget: int, items: list[tuple[object, int]],
                max_blocks: int | None = None) -> tuple[str, list[int]]:
    """Numbered blocks ``[i] heading path (p. N):\\n body`` of (tree, node_id) items, in the
    given order, skipping what would pass ``budget`` tokens, tables of contents, indexes and
    nodes without body text, at most ``max_blocks`` of them. Returns (context, indices of the
    items used)."""
    blocks, used, kept = [], 0, []
    for j, (tree, node_id) in enumerate(items):
        if max_blocks is not None and len(kept) >= max_blocks:
            break
        node = tree.node(node_id)
        if node.kind in CONTEXT_EXCLUDED_KINDS or not node.text.strip():
            continue
        pages = f" (p. {node.page_start})" if node.page_start else ""
        block = f"[{len(kept) + 1}] {heading_path(tree, node_id) or node.title}{pages}:\n{node.text.strip()}"
        n = len(encode(block))
        if used + n > budget:
            continue
        used += n
        kept.append(j)
        blocks.append(block)
    return "\n\n".join(blocks), kept


def pack_context(ctx: Context, route: Route) -> tuple[str, list[int]]:
    """The text mode's context: selected nodes' body text within ctx.text_budget tokens and
    ctx.text_sections blocks, numbered, under their heading paths and pages (``pack_blocks``).
    Order: by the fused score of each node's own evidence when the route has one (best first),
    else deepest first. Returns (context text, routed ids cited in that order)."""
    if route.pack_scores is not None:
        order = sorted(route.selected, key=lambda i: (-float(route.pack_scores[i]),
                                                      -ctx.routing.depth[i], i))
    else:
        order = sorted(route.selected, key=lambda i: (-ctx.routing.depth[i], i))
    order = [i for i in order if ctx.routing.origin[i][0] in ctx.trees]
    items = [(ctx.trees[ctx.routing.origin[i][0]], ctx.routing.origin[i][1]) for i in order]
    text, kept = pack_blocks(ctx.text_model.encode, ctx.text_budget, items, ctx.text_sections)
    return text, [order[j] for j in kept]


def plan_text(ctx: Context, question: str, route: Route) -> tuple[Plan, list[int]]:
    """Text mode's prompt: the kept sentences (``ctx.sentences``, chosen by the caller with
    ``engine.answer.sentences.select``; none: no context) or, with ``text_packing="sections"``,
    the earlier whole-section packing (``pack_context``). Returns (plan, routed ids read)."""
    if ctx.text_packing == "sections":
        context, cited = pack_context(ctx, route)
        return text_plan(ctx, question, context), cited
    context = context_text(ctx.sentences, ctx.sentence_page)
    cited = list(dict.fromkeys(s.rid for s in ctx.sentences))
    return text_plan(ctx, question, context), cited


def answer_text(ctx: Context, question: str, route: Route) -> tuple[GenerationResult, list[int]]:
    """Text mode: the packed context (``pack_context``) and the question."""
    plan, cited = plan_text(ctx, question, route)
    return run_plan(ctx, plan), cited


def context_window(backbone: Backbone) -> int:
    return int(getattr(backbone.model.config, "max_position_embeddings", 2048))


def plan_full(ctx: Context, question: str) -> tuple[Plan, list[int]]:
    """The manual's text in document order, cut to fit the context window."""
    model = ctx.text_model
    room = context_window(model) - ctx.max_new_tokens - 200 - len(model.encode(question))
    texts, used = [], 0
    for tree in ctx.trees.values():
        for n in tree.preorder():
            t = n.local_text
            if not t.strip():
                continue
            ids = model.encode(t)
            if used + len(ids) > room:
                ids = ids[: max(0, room - used)]
                t = model.decode(ids)
            if not ids:
                break
            texts.append(t)
            used += len(ids)
        if used >= room:
            break
    return text_plan(ctx, question, "\n\n".join(texts)), []


def answer_full(ctx: Context, question: str) -> tuple[GenerationResult, list[int]]:
    plan, cited = plan_full(ctx, question)
    return run_plan(ctx, plan), cited
