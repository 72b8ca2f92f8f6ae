"""The Evaluation tab: run a question file against one manual and see where answers fail.

Upload a question file in the dev probe's format (JSON Lines: ``question``, ``key`` (a regular
expression for the key fact), optional ``pages`` / ``page`` (gold pages) and ``section`` (gold
section title); engine/answer/evaluation.py), pick a manual and a mode, and run it: each question
is asked and judged by ``engine.ask.evaluate``, the code ``python -m bench.probe`` runs, with a
progress bar and the table filling in as it goes. Per question: the quote and its page, the
answer, whether each holds the key, the check's verdict, and where the route lost the gold
section; selecting a row draws that question's routing tree. Then the summary (the probe's
verdict counts) and the risk-coverage curve (answers taken most confident first: the quote's
score, marked answers last), and the rows as JSON Lines to download.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import gradio as gr
import plotly.graph_objects as go

from app.shared.binding import bind
from app.shared.lines import check_word, questions_line
from app.shared.examples import EXAMPLE_FILE
from app.shared.state import ALL, AppState, doc_arg, doc_choices, empty_figure, md_text
from app.shared.user_errors import user_error, user_errors
from app.views.answer_view import figure_of, route_from_log
from engine.answer.evaluation import COLUMNS, parse_questions, rates, risk_coverage
from engine.ask import AskOptions, evaluate
from engine.ingest import file_sha256

EVAL_MODES = ("quote", "text")  # the probe's modes
ROW_COLUMNS = ["#", "question", "passages (best first)", "quote page", "gold pages",
               "quote holds", "answer", "answer holds", "check", "route lost the gold"]
# Wide enough for each header on one line; the verdict columns visible beside the texts.
ROW_WIDTHS = ["3%", "14%", "30%", "6%", "6%", "6%", "14%", "6%", "7%", "8%"]
# the passages column is Markdown (a passage's lines on lines of their own)
ROW_TYPES = ["number", "str", "markdown", "str", "str", "str", "str", "str", "str", "str"]
SUMMARY_COLUMNS = ["verdict", "questions", "share"]
EXAMPLE_QUESTIONS = EXAMPLE_FILE.parent / "questions.jsonl"  # the five example questions
MAX_QUESTIONS = 500
TEXT_CELL = 160  # characters of a quote or answer shown in a cell


def _short(text: str | None) -> str:
    t = " ".join((text or "").split())
    return t if len(t) <= TEXT_CELL else t[:TEXT_CELL - 1] + "…"


def _mark(v: bool | None) -> str:
    return "—" if v is None else "✓" if v else "✗"


def check_label(row: dict) -> str:
    """The check's verdict in a word or two."""
    if row["not_covered"]:
        return "not covered"
    if row["check"] is None:
        return "no check" if row["mode"] == "quote" else "—"
    return check_word(row)


def passages_cell(row: dict) -> str:
    """The row's passages as the Ask tab shows them (``engine.answer.shown.card``), each two
    to five lines, the quote first; a row of an older results file: its quote."""
    cards = row.get("passage_cards")
    if not cards:
        return md_text(_short(row["quote"]))
    return "<br><br>".join("<br>".join(md_text(line) for line in card) for card in cards)


def table_row(i: int, row: dict) -> list:
    v = row["verdict"]
    answer = "(the quote)" if row["mode"] == "quote" else _short(row["answer"])
    return [i, row["question"], passages_cell(row), row["quote_page"],
            ", ".join(map(str, row["gold_pages"])) or (row["gold_section"] or ""),
            _mark(v["quote_holds"]), answer, _mark(v["answer_holds"]),
            check_label(row), row["route"].get("lost") or ""]


def summary_rows(rows: list[dict]) -> list[list]:
    s = rates(rows)
    out = [[label, f"{s[key][0]}/{s[key][1]}",
            f"{100 * s[key][0] / s[key][1]:.0f}%" if s[key][1] else "—"]
           for label, key in COLUMNS]
    routed = s["route_gold"]
    out.append(["gold page routed", "", "—" if routed is None else f"{100 * routed:.0f}%"])
    out.append(["median ms per question", "",
                "—" if s["median_ms"] is None else f"{s['median_ms']:.0f}"])
    return out


def risk_figure(rows: list[dict]) -> go.Figure:
    pts = risk_coverage(rows)
    fig = go.Figure(go.Scatter(x=[c for c, _ in pts], y=[r for _, r in pts], mode="lines+markers",
                               line=dict(shape="hv"), name="risk",
                               hovertemplate="coverage %{x:.0%}<br>risk %{y:.0%}<extra></extra>"))
    fig.update_layout(title="Risk-coverage (answers taken most confident first)", height=320,
                      xaxis=dict(title="coverage (share of questions answered)", range=[0, 1.02],
                                 tickformat=".0%"),
                      yaxis=dict(title="risk (share of those wrong)", range=[-0.02, 1.02],
                                 tickformat=".0%"),
                      margin=dict(l=60, r=20, t=50, b=50), plot_bgcolor="white")
    return fig


def run_file(s: AppState, t: EvaluationTab, doc, file, mode, progress=gr.Progress()):
    """Ask and judge every question of the file; the table grows as they are answered
    (updates keyed by component)."""
    if doc in (None, "", ALL):
        raise user_error("Choose one manual to evaluate.")
    if not file:
        raise user_error("Upload a question file (JSON Lines) first.")
    if mode not in EVAL_MODES:
        raise user_error(f"mode {mode!r} is not one of {', '.join(EVAL_MODES)}")
    path = Path(file if isinstance(file, str) else file.name)
    try:
        questions = parse_questions(path.read_text(encoding="utf-8"), path.name)
    except (ValueError, UnicodeDecodeError) as e:
        raise user_error(str(e)) from None
    if len(questions) > MAX_QUESTIONS:
        raise user_error(f"{path.name} has {len(questions)} questions; at most {MAX_QUESTIONS}")
    doc_id = doc_arg(doc)
    settings = asdict(AskOptions(mode=mode))
    rows, routes, table = [], [], []
    for i, q in enumerate(questions, 1):
        progress((i - 1) / len(questions), desc=f"question {i} of {len(questions)}")
        with user_errors():
            ev = evaluate(s.rt, doc_id, q, mode)
        rows.append(ev.row)
        routes.append(ev.answer.as_json()["route"])
        table.append(table_row(i, ev.row))
        yield {t.status: f"{i} of {len(questions)} questions answered ({mode} mode)…",
               t.table: table}
    out = Path(tempfile.mkdtemp(prefix="h2mt-eval-")) / f"{path.stem}-{mode}-results.jsonl"
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    wrong = sum(not r["verdict"]["answer_holds"] for r in rows)
    yield {t.status: f"Done: {len(rows)} questions, {wrong} without the key fact in the "
                     "answer. Select a row to see its routing tree.",
           t.table: table, t.summary: summary_rows(rows), t.risk: risk_figure(rows),
           t.download: str(out),
           t.run: {"rows": rows, "routes": routes, "settings": settings, "doc": doc_id}}


def example_count() -> int:
    """How many questions the example file holds (one a non-empty line)."""
    return sum(1 for line in EXAMPLE_QUESTIONS.read_text().splitlines() if line.strip())


def example_copy() -> str:
    """A copy of the example question file in a temporary folder, which the page may serve
    wherever the app is installed."""
    folder = Path(tempfile.mkdtemp(prefix="h2mt-eval-example-"))
    return str(shutil.copyfile(EXAMPLE_QUESTIONS, folder / EXAMPLE_QUESTIONS.name))


def use_example(s: AppState, t: EvaluationTab):
    """The example question file and the example manual picked; a line saying how to add the
    manual when the library lacks it."""
    path = example_copy()
    doc_id = s.rt.library.find_by_sha256(file_sha256(EXAMPLE_FILE))
    if doc_id is None:
        return {t.file: path, t.status: "The example questions ask the example manual, which "
                "is not in the library: upload app/shared/example_manual/etoolbox-manual.pdf in "
                "the Library tab first."}
    return {t.file: path, t.doc: gr.update(choices=doc_choices(s, False), value=str(doc_id)),
            t.status: f"The example file's {example_count()} questions on manual #{doc_id} are "
                      "ready: press Run."}


def row_tree(s: AppState, t: EvaluationTab, run: dict | None, evt: gr.SelectData):
    """The routing tree of the selected question, and what was answered."""
    if not run or evt.index is None:
        return {t.head: ""}
    i = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
    if not 0 <= i < len(run["rows"]):
        return {t.head: ""}
    row, records = run["rows"][i], run["routes"][i]
    lost = row["route"].get("lost")
    head = (f"**{i + 1}. {md_text(row['question'])}**  \n"
            f"key: `{row['key'].replace('`', chr(0x2cb))}` · quote page {row['quote_page'] or '—'} · "
            f"answer holds the key: {_mark(row['verdict']['answer_holds'])} · check: "
            f"{check_label(row)}" + (f"  \nroute lost the gold at {md_text(lost)}" if lost
                                     else ""))
    if not records:
        return {t.tree: empty_figure("This answer was found without routing."), t.head: head}
    route = route_from_log(records, run["settings"])
    return {t.tree: figure_of(s, route, title=f"Routing tree of question {i + 1}"),
            t.head: head}


# -- layout and events ---------------------------------------------------------------------------

@dataclass
class EvaluationTab:
    tab: gr.Tab
    doc: gr.Dropdown
    file: gr.File
    mode: gr.Radio
    button: gr.Button
    status: gr.Markdown
    table: gr.Dataframe
    summary: gr.Dataframe
    risk: gr.Plot
    download: gr.File
    run: gr.State
    head: gr.Markdown
    tree: gr.Plot
    example: gr.Button  # puts the example question file in and picks the example manual


def build(s: AppState) -> EvaluationTab:
    """The tab's components, inside the caller's ``gr.Tabs``."""
    with gr.Tab("Evaluation", id="evaluation") as tab:
        gr.Markdown("Run a question file against a manual: each question's quote and answer "
                    "judged by its key (a regular expression for the fact), the check's "
                    "verdict, and where the route lost the gold section. One JSON object a "
                    "line: `{\"question\": ..., \"key\": ..., \"pages\": [12]}` (optional "
                    "`pages`, `section`, `id`); the dev probe's files work as they are.")
        with gr.Row(equal_height=True):
            doc = gr.Dropdown(label="Manual", choices=doc_choices(s, False), scale=3,
                              elem_id="eval-doc", allow_custom_value=True)
            file = gr.File(label="Question file (.jsonl)", file_types=[".jsonl", ".json"],
                           scale=3, elem_id="eval-file")
            mode = gr.Radio(list(EVAL_MODES), value="quote", label="Mode", scale=2,
                            info="quote: no generation (fast); text: the model answers too",
                            elem_id="eval-mode")
            button = gr.Button("Run", variant="primary", scale=1, elem_id="eval-run")
        with gr.Row(equal_height=True):
            example = gr.Button("Use the example questions", size="sm", scale=0,
                                min_width=220, elem_id="eval-example")
            gr.DownloadButton("Download the example file", value=example_copy(), size="sm",
                              scale=0, min_width=220, elem_id="eval-example-download")
            gr.Markdown(questions_line(example_count(),
                                       "on the example manual, in the format above."))
        status = gr.Markdown(elem_id="eval-status")
        table = gr.Dataframe(headers=ROW_COLUMNS, type="array", interactive=False, wrap=True,
                             datatype=ROW_TYPES,
                             max_height=520, elem_id="eval-table", column_widths=ROW_WIDTHS,
                             label="Per question (select a row to see its routing tree)")
        with gr.Row():
            summary = gr.Dataframe(headers=SUMMARY_COLUMNS, type="array", interactive=False,
                                   elem_id="eval-summary", label="Summary", scale=2)
            risk = gr.Plot(label="Risk-coverage", elem_id="eval-risk")
        download = gr.File(label="Download the results (JSON Lines)", interactive=False,
                           elem_id="eval-download")
        head = gr.Markdown(elem_id="eval-row-head")
        tree = gr.Plot(label="Routing tree", show_label=False, elem_id="eval-route-plot")
        run = gr.State(None)
    return EvaluationTab(tab, doc, file, mode, button, status, table, summary, risk, download,
                         run, head, tree, example)


def manual_choices(s: AppState):
    """The manual picker's choices, as the library lists them now."""
    return gr.update(choices=doc_choices(s, False))


def wire(s: AppState, t: EvaluationTab) -> None:
    t.tab.select(bind(s, manual_choices), None, t.doc,
                 api_visibility="private", show_progress="hidden", queue=False)
    t.button.click(bind(s, run_file, t), [t.doc, t.file, t.mode],
                   [t.status, t.table, t.summary, t.risk, t.download, t.run],
                   api_visibility="private", concurrency_limit=1, concurrency_id="evaluation",
                   show_progress_on=[t.status])
    t.example.click(bind(s, use_example, t), None, [t.file, t.doc, t.status],
                    api_visibility="private", show_progress="hidden")
    t.table.select(bind(s, row_tree, t), t.run, [t.tree, t.head], api_visibility="private")
