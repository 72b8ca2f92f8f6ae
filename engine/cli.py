"""Command line: ``python -m engine ingest PATH... | ask DOC|all QUESTION | tree DOC_ID | list |
worker``.

``ingest`` prints one JSON object per document on its own line (stdout) and a progress bar on
stderr; a file the user got wrong prints a JSON error line and the others still go in.

A storage fault (the disk full, the database read-only, unreachable or locked past the lock
timeout: storage/faults.py) is one line naming it, on stdout as a file's JSON error or on
stderr as "error: ...", never a traceback; ``--debug`` (or ``H2MT_DEBUG=1``) adds the traceback.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from engine.answer.option_table import CLI, Option, offered
from engine.document.builders import FILE_EXTENSIONS
from engine.settings import Settings
from engine.document.tree import DocumentError



def _debug(args: argparse.Namespace | None = None) -> bool:
    """Tracebacks wanted: ``--debug`` or ``H2MT_DEBUG=1``."""
    return bool(getattr(args, "debug", False)) or os.environ.get("H2MT_DEBUG", "") not in (
        "", "0")


def _settings(args: argparse.Namespace) -> Settings:
    # a flag given here wins over the environment; nothing else does
    return Settings.from_env(db_url=getattr(args, "db", None),
                             aggregation=getattr(args, "aggregation", None),
                             node_token_limit=getattr(args, "node_tokens", None),
                             reader=getattr(args, "reader", None),
                             reader_model=getattr(args, "reader_model", None))


def _expand(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix.lower() in FILE_EXTENSIONS))
        else:
            out.append(p)
    return out


def _stored(rt, path: Path) -> bool:
    """The file is in the library (its phase one stored); False when that cannot be read."""
    from engine.ingest import file_sha256

    try:
        return rt.library.find_by_sha256(file_sha256(path)) is not None
    except Exception:  # noqa: BLE001 - the database gone as well: say nothing more
        return False


def cmd_ingest(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from storage.faults import StorageFault, classify

    rt = Runtime.load(_settings(args))
    failures = 0
    for path in _expand(args.paths):
        if not path.is_file():
            print(json.dumps({"file": str(path), "error": "no such file"}), flush=True)
            failures += 1
            continue
        bar = tqdm(total=0, desc=f"evidence {path.name}", unit="node", file=sys.stderr,
                   disable=args.quiet)

        def progress(done: int, total: int, *, stage: str) -> None:
            bar.set_description(f"{stage} {path.name}", refresh=False)
            bar.total = total
            bar.n = done
            bar.refresh()

        try:
            result = ingest_file(path, rt, progress, memories=not args.text_only,
                                 unit_vectors=not args.no_unit_vectors)
        except DocumentError as e:
            print(json.dumps({"file": str(path), "error": str(e)}), flush=True)
            failures += 1
            continue
        except Exception as e:  # one file's failure never stops the rest of the batch
            fault = classify(e)
            if fault is None or _debug(args):
                logging.getLogger(__name__).exception("ingest of %s failed", path)
            if fault is not None:  # the storage's fault, named: not the file's
                line = str(e) if isinstance(e, StorageFault) else fault.line("Storing it")
                if _stored(rt, path):
                    line += (" The manual is stored (askable in text and route modes); the "
                             "same command writes its missing memories.")
                print(json.dumps({"file": str(path), "error": line}), flush=True)
            else:
                print(json.dumps({"file": str(path), "error": f"could not be read "
                                  f"({type(e).__name__}: {e})"}), flush=True)
            failures += 1
            continue
        finally:
            bar.close()
        print(json.dumps(result.as_json()), flush=True)
    return 1 if failures else 0


def cmd_ask(args: argparse.Namespace) -> int:
    from engine.ask import AskError, ask
    from engine.answer.shown import cards, places_line
    from engine.runtime import Runtime

    settings = _settings(args)
    opts = cli_options(args, settings)
    try:  # bad option values: one line before anything is loaded, in every mode
        opts.validate(settings)
    except AskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rt = Runtime.load(settings)
    try:
        answer = ask(rt, args.doc, args.question, opts)
    except AskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    failed = 1 if answer.reader_error else 0  # a served reader's failure: the quote still shown
    if args.json:
        print(json.dumps(answer.as_json()))
        return failed
    if answer.warning:
        print(f"note: {answer.warning}", file=sys.stderr)
    if answer.short_answer is not None:  # the manual's own term, before everything else
        sa = answer.short_answer
        page = f", p.{sa.page_label or sa.page}" if sa.page else ""
        print(f"short answer: {sa.term}  ({sa.text}{page})\n")
    out = answer.as_json()
    if answer.passages.shown:  # the three passages as the screen shows them (engine.answer.shown)
        print(f"the manual's passages, best first ({places_line(out['places'])}):")
        for c in cards(out["passages"]):
            print("\n".join(c.lines()))
        print()
    elif answer.not_covered:
        print("the manual does not seem to cover this (no quote)\n")
    key = out["key_line"]
    if out["key_line_shown"]:
        print(f"from the manual (p. {key['page']}): {key['text']}\n")
    if answer.reader_error:
        print(f"error: {answer.reader_error}", file=sys.stderr)
    elif answer.traits.generates:
        print("the model's reading of the passages:")
        if answer.folded and answer.fold_line:  # the Ask tab's fold, as one line above it
            print(f"(not checked as right) {answer.fold_line}")
        print(answer.text or "(the model wrote nothing)")
    elif not answer.traits.quote_is_answer:
        print(answer.text or "(routing only)")
    if answer.evidence:
        print("\nevidence:")
        for e in answer.evidence:
            page = f"p.{e.page} " if e.page else ""
            print(f"  {page}[{e.doc_id}:{e.node_id}] {e.text} ({e.score:.2f})")
    if answer.cited:
        print("\ncited:")
        for c in answer.cited:
            pages = f" p.{c.page_start}-{c.page_end}" if c.page_start else ""
            print(f"  [{c.doc_id}:{c.node_id}] {c.title}{pages}")
    m = answer.metrics
    print(f"\nTTFT {m.ttft_ms:.0f} ms, total {m.total_ms:.0f} ms, routing {m.route_ms:.0f} ms, "
          f"prefill {m.prefill_tokens} tokens, generated {m.generated_tokens}, "
          f"peak +{m.peak_mem_mb:.0f} MB", file=sys.stderr)
    if answer.reader:
        print(f"reader: {answer.reader}", file=sys.stderr)
    return failed


def option_flags(p: argparse.ArgumentParser, options: list[Option] | None = None) -> None:
    """A flag per Ask option offered on the command line (``option_table.offered(CLI)``, or
    ``options``): ``--max-depth N``, a choice's ``--router {...}``, a switch ``--hier-pos`` (off
    by default) or ``--no-gate`` (on by default); left out: the option's default."""
    for o in options if options is not None else offered(CLI):
        flag = "--" + o.name.replace("_", "-")
        if o.type is bool:
            flag = flag if not o.default else "--no-" + o.name.replace("_", "-")
            p.add_argument(flag, dest=o.name, action="store_false" if o.default else
                           "store_true", help=f"{'off' if o.default else 'on'}: {o.help}")
            continue
        default = f" (default: {o.default})" if o.default is not None else ""
        p.add_argument(flag, dest=o.name, type=o.type, default=None,
                       choices=list(o.allowed()) if o.choices is not None else None,
                       help=f"{o.help}{default}")


def cli_options(args: argparse.Namespace, settings: Settings,
                options: list[Option] | None = None):
    """The AskOptions of the flags given (``option_flags``); one left out with a ``setting``
    (the router) is the settings' (H2MT_ROUTER)."""
    from engine.answer.options import AskOptions

    given = {}
    for o in options if options is not None else offered(CLI):
        value = getattr(args, o.name)
        if value is None and o.setting is not None:
            value = getattr(settings, o.setting)
        if value is not None:
            given[o.name] = value
    return AskOptions(**given)


def cmd_tree(args: argparse.Namespace) -> int:
    from storage import DocumentNotFound, Library

    lib = Library(_settings(args).database_url)
    try:
        tree = lib.get_tree(args.doc_id)
    except DocumentNotFound as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{tree.title}  [{tree.source}, {len(tree)} nodes, depth {tree.depth}, {tree.pages} pages]")
    if tree.source == "induced":
        print("(no headings in the file: the sections below were induced by clustering the text, "
              "and their titles are guessed)")
    print(tree.outline(args.max_depth))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from storage import Library

    for d in Library(_settings(args).database_url).list_documents():
        print(json.dumps({"doc_id": d.id, "title": d.title, "file": d.file_name, "pages": d.pages,
                          "nodes": d.n_nodes, "depth": d.depth, "source": d.tree_source}))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """Write the memories the library's jobs ask for (engine/memory/worker.py) until stopped
    (SIGTERM or Ctrl-C give the current job back), or with ``--until-idle`` until none is left."""
    import signal

    from engine.ingest import memory_worker
    from engine.runtime import Runtime

    settings = _settings(args).with_(job_lease_s=args.lease_s, worker_poll_s=args.poll_s)
    rt = Runtime.load(settings)
    worker = memory_worker(rt)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    log = logging.getLogger("engine.memory.worker")
    log.info("memory worker %s (fingerprint %s)", worker.holder, rt.fingerprint)
    worker.enqueue_incomplete()
    try:
        worker.run(until_idle=args.until_idle)
    except KeyboardInterrupt:
        worker.stop()
    return 0


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors (an unknown choice, a number that is not one) in one line on
    stderr, exit status 2, like every other refused request of the command line; --help still
    lists the options."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser: a subcommand each, the Ask options' flags from their table."""
    parser = OneLineParser(prog="python -m engine", description=__doc__.split("\n")[0])
    parser.add_argument("--debug", action="store_true",
                        help="tracebacks for storage faults too (also H2MT_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--db", help="SQLAlchemy URL (default: SQLite file in the data folder)")
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="tracebacks for storage faults too (also H2MT_DEBUG=1)")

    p = sub.add_parser("ingest", help="build trees and memories of files and store them")
    p.add_argument("paths", nargs="+", help="files or folders (PDF, Markdown, text, HTML, ORD-QA JSON)")
    p.add_argument("--aggregation", help="Agg policy for internal nodes (H2MT appendix B)")
    p.add_argument("--node-tokens", type=int, help="per-node token limit (default 256)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--text-only", action="store_true",
                   help="phase one only: tree and routing evidence (askable in text and route "
                        "modes); a later ingest of the same file writes the memories")
    p.add_argument("--no-unit-vectors", action="store_true",
                   help="do not encode the passages the quote reads now (each ask then encodes "
                        "and stores the ones it needs)")
    common(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("ask", help="answer a question about a document or the whole library")
    p.add_argument("doc", help="document id, or 'all' for the whole library")
    p.add_argument("question")
    option_flags(p)
    p.add_argument("--reader",
                   help="the model that reads text in text and full modes (H2MT_READER): "
                        "'smollm2', a model folder, a GGUF file, or the base URL of an "
                        "OpenAI-compatible server (http://host:8000/v1)")
    p.add_argument("--reader-model",
                   help="the served model's name with an http(s) --reader "
                        "(H2MT_READER_MODEL); its key comes from H2MT_READER_API_KEY only")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    common(p)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("tree", help="print a stored document's outline")
    p.add_argument("doc_id", type=int)
    p.add_argument("--max-depth", type=int)
    common(p)
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("list", help="list stored documents")
    common(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("worker", help="write node memories queued in the library (phase two "
                                      "of ingest) without the app; any number of workers")
    p.add_argument("--until-idle", action="store_true",
                   help="exit once no document's memories are queued or being written")
    p.add_argument("--lease-s", type=float,
                   help="seconds a silent worker keeps its job (default $H2MT_JOB_LEASE_S, 120)")
    p.add_argument("--poll-s", type=float,
                   help="seconds between looks for new work (default $H2MT_WORKER_POLL_S, 2)")
    common(p)
    p.set_defaults(func=cmd_worker)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request to a reader
    if not _debug(args):  # a connection the database dropped: said in our one line, not the
        logging.getLogger("sqlalchemy.pool").setLevel(logging.CRITICAL)  # pool's traceback
    from engine.settings import SettingsError
    from storage import DatabaseUnavailable

    from storage.faults import classify

    try:
        return args.func(args)
    except (DatabaseUnavailable, SettingsError) as e:  # a wrong --db or H2MT_*: one line
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a storage fault: one line naming it (a bug: its traceback)
        fault = classify(e)
        if fault is None or _debug(args):
            raise
        print(f"error: {fault.line()}", file=sys.stderr)
        return 1
