"""Where the app adds time to one visitor's ask: the engine's events alone (``ask_stream``, the
``engine ask`` path) against the Ask tab's own work on the same answer (``route_views`` when the
route arrives, ``final_updates`` at the end: figures, tables, metrics, history, evidence), the
work the /ask API does besides HTTP and Gradio's queue. Medians over the questions after one
warm-up, all measured in one process (ratios hold on a loaded machine; absolute times do not).

    python -m bench.app_stages --db sqlite:///lib.sqlite3 --doc 3 [--mode text] [--tokens 128]
"""
from __future__ import annotations

import argparse
import statistics
import time

QUESTIONS = ["How do I patch a command?", "Which command appends code to a hook?",
             "How do I test whether a macro is defined?", "How do I define a new boolean flag?",
             "What does \\ifdefempty do?"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="SQLAlchemy URL of a library holding the manual")
    ap.add_argument("--doc", type=int, required=True, help="the manual's id")
    ap.add_argument("--mode", default="text")
    ap.add_argument("--tokens", type=int, default=128)
    args = ap.parse_args(argv)

    import gradio as gr

    from app.ask import ask_tab
    from app.ask.ask_handlers import final_updates, route_views
    from app.shared.memory_writer import MemoryWriter
    from app.shared.state import AppState
    from engine.answer.events import AnswerReady
    from engine.ask import AskOptions, ask_stream
    from engine.runtime import Runtime
    from engine.settings import Settings

    settings = Settings(db_url=args.db, app_worker=False, examples=False)
    rt = Runtime.load(settings)
    s = AppState(rt, settings, MemoryWriter(rt))
    with gr.Blocks(), gr.Tabs():
        tab = ask_tab.build(s)
    opts = AskOptions(mode=args.mode, max_new_tokens=args.tokens)
    rows = []
    for q in [QUESTIONS[0], *QUESTIONS]:
        t0 = time.perf_counter()
        answer = next(ev.answer for ev in ask_stream(rt, args.doc, q, opts, log=False)
                      if isinstance(ev, AnswerReady))
        engine_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        route_views(s, answer.route, None, str(args.doc), args.mode,
                    [c.node_id for c in answer.cited], None)
        t2 = time.perf_counter()
        final_updates(s, tab, answer, str(args.doc))
        t3 = time.perf_counter()
        rows.append((engine_s, answer.metrics.total_ms / 1e3, t2 - t1, t3 - t2))
    med = [statistics.median(r[i] for r in rows[1:]) for i in range(4)]
    print(f"{args.mode} mode, {args.tokens} tokens, {len(rows) - 1} questions after a warm-up, "
          f"medians: engine {med[0]:.3f} s (its total_ms {med[1]:.3f} s); app: route views "
          f"{med[2]:.3f} s, final updates {med[3]:.3f} s; app / engine "
          f"{(med[2] + med[3]) / med[0]:.3f}")


if __name__ == "__main__":
    main()
