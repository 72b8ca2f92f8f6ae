"""Answer generation over a Route (H2MT 3.3 "Output generation") and its baselines.

Modes (all through the backbone's chat template, greedy decoding):
- ``memory``: H2MT. The selected nodes' memories become input embeddings (memory slots) placed
  in the user turn before the question text; the model never generates from memory vectors
  alone. Slots go through the ArcAligner projector and, when enabled, its masked LoRA and gate
  (engine/aligner.py); otherwise through the parts' memory input scale. Optionally HDT's
  hierarchical positional encoding of each node's tree path is added to its slot.
- ``text``: the raw text of the selected nodes, deepest first, within a token budget, numbered
  for citation.
- ``full``: the manual's text in document order up to the context window (the plain baseline).
- ``flat``: HMT-style: fixed-length segments of the manual, one memory each from the same
  writer, memory search by the same scaled dot-product over all segment memories, no tree.
- ``route``: routing only, no generation.

Metrics: TTFT (time from the call to the first generated token's logits), total time, routing
time, prefill tokens (sequence positions of the prompt, slots included), generated tokens, and
peak memory (CUDA max allocated on GPU; on CPU the growth of the resident set during the call,
sampled).
"""
from __future__ import annotations

import math
import resource
import time
from dataclasses import asdict, dataclass

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from engine.memory.backbone import Backbone
from engine.routing.router import Route

MODES = ("memory", "text", "full", "flat", "route")
SLOT_MARKER = "\u2063MEMORY\u2063"  # invisible separators: never in user text, split on it
# Node kinds never put into an answer's context (document.hygiene marks them at build time).
CONTEXT_EXCLUDED_KINDS = frozenset({"toc", "index"})
SYSTEM_PROMPT = ("You answer questions about a technical manual. Use the provided context; "
                 "answer briefly and precisely.")


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
    prefill_tokens: int = 0
    generated_tokens: int = 0
    peak_mem_mb: float = 0.0


@dataclass
class Answer:
    text: str
    mode: str
    cited: list[Citation]
    gate: dict[int, list[int]]  # routed node id -> extra loops per gated layer
    metrics: Metrics
    route: Route | None = None
    warning: str | None = None  # shown to the user beside the answer (e.g. a left-out channel)

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

def chat_parts(backbone: Backbone, user_text: str) -> list[str]:
    """The chat-templated prompt split at SLOT_MARKER (text before, [between...], after)."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
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


@torch.no_grad()
def generate(backbone: Backbone, pieces: list[torch.Tensor], *, slot_mask: torch.Tensor | None = None,
             aligner=None, max_new_tokens: int = 128,
             max_time: float | None = None) -> GenerationResult:
    """Greedy generation from concatenated input embeddings [n, d] (text and slots)."""
    embeds = torch.cat(pieces).unsqueeze(0).to(backbone.device, backbone.dtype)
    mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=backbone.device)
    first = _FirstToken()
    kwargs = dict(inputs_embeds=embeds, attention_mask=mask, max_new_tokens=max_new_tokens,
                  do_sample=False, logits_processor=LogitsProcessorList([first]),
                  pad_token_id=backbone.tokenizer.pad_token_id)
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
    text = backbone.tokenizer.decode(new, skip_special_tokens=True).strip()
    return GenerationResult(text=text, prefill_tokens=embeds.shape[1],
                            generated_tokens=int(new.numel()), first_token_at=first.at, loops=loops)


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


def _embed_text(backbone: Backbone, text: str) -> torch.Tensor:
    ids = torch.tensor(backbone.encode(text), dtype=torch.long)
    return backbone.embed(ids).float().cpu() if len(ids) else torch.zeros(0, backbone.hidden_size)


def _node_text(ctx: Context, rid: int) -> str:
    """A routed node's text for the answer context; "" for tables of contents and indexes."""
    doc_id, node_id = ctx.routing.origin[rid]
    if doc_id not in ctx.trees:
        return ""
    node = ctx.trees[doc_id].node(node_id)
    return "" if node.kind in CONTEXT_EXCLUDED_KINDS else node.local_text


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


def generate_with_slots(ctx: Context, question: str, memories: torch.Tensor,
                        paths: list[list[int]] | None) -> GenerationResult:
    """H2MT generation: [chat prefix; "Context:"; slots; question; assistant prefix]."""
    head, tail = prompt_around_slots(ctx.backbone, question)
    slots = slot_embeddings(ctx, memories, paths)
    slot_mask = torch.cat([torch.zeros(len(head), dtype=torch.bool), torch.ones(len(slots), dtype=torch.bool),
                           torch.zeros(len(tail), dtype=torch.bool)])
    aligner = ctx.aligner if ctx.gate else None
    return generate(ctx.backbone, [head, slots, tail], slot_mask=slot_mask, aligner=aligner,
                    max_new_tokens=ctx.max_new_tokens, max_time=ctx.max_time)


def generate_with_text(ctx: Context, question: str, context_text: str) -> GenerationResult:
    user = f"Context:\n{context_text}\n\nQuestion: {question.strip()}" if context_text else question.strip()
    (prompt,) = chat_parts(ctx.backbone, user)
    return generate(ctx.backbone, [_embed_text(ctx.backbone, prompt)],
                    max_new_tokens=ctx.max_new_tokens, max_time=ctx.max_time)


def answer_memory(ctx: Context, question: str, route: Route) -> tuple[GenerationResult, list[int]]:
    ids = sorted(route.selected)  # document order
    if not ids:
        return generate_with_text(ctx, question, ""), []
    mem = ctx.routing.memories[ids]
    res = generate_with_slots(ctx, question, mem, [_path_indices(ctx, i) for i in ids])
    return res, ids


def pack_context(ctx: Context, route: Route) -> tuple[str, list[int]]:
    """The text mode's context: selected nodes' raw text within ctx.text_budget tokens,
    numbered, with their titles and pages. Order: by the fused score of each node's own
    evidence when the route has one (best first), else deepest first. Tables of contents and
    indexes never go in. Returns (context text, routed ids cited in that order)."""
    if route.pack_scores is not None:
        order = sorted(route.selected, key=lambda i: (-float(route.pack_scores[i]),
                                                      -ctx.routing.depth[i], i))
    else:
        order = sorted(route.selected, key=lambda i: (-ctx.routing.depth[i], i))
    blocks, used, cited = [], 0, []
    for rid in order:
        text = _node_text(ctx, rid)
        if not text.strip():
            continue
        n = len(ctx.backbone.encode(text))
        if used + n > ctx.text_budget:
            continue
        used += n
        cited.append(rid)
        c = _citation(ctx, rid)
        pages = f" (p. {c.page_start})" if c.page_start else ""
        blocks.append(f"[{len(cited)}] {c.title}{pages}:\n{text}")
    return "\n\n".join(blocks), cited


def answer_text(ctx: Context, question: str, route: Route) -> tuple[GenerationResult, list[int]]:
    """Text mode: the packed context (``pack_context``) and the question."""
    context, cited = pack_context(ctx, route)
    return generate_with_text(ctx, question, context), cited


def context_window(backbone: Backbone) -> int:
    return int(getattr(backbone.model.config, "max_position_embeddings", 2048))


def answer_full(ctx: Context, question: str) -> tuple[GenerationResult, list[int]]:
    """The manual's text in document order, cut to fit the context window."""
    room = context_window(ctx.backbone) - ctx.max_new_tokens - 200 - len(ctx.backbone.encode(question))
    texts, used = [], 0
    for tree in ctx.trees.values():
        for n in tree.preorder():
            t = n.local_text
            if not t.strip():
                continue
            ids = ctx.backbone.encode(t)
            if used + len(ids) > room:
                ids = ids[: max(0, room - used)]
                t = ctx.backbone.decode(ids)
            if not ids:
                break
            texts.append(t)
            used += len(ids)
        if used >= room:
            break
    return generate_with_text(ctx, question, "\n\n".join(texts)), []
