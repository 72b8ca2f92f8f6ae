"""A visitor's first answer from an empty data folder (issue 26): start the app, wait for the
example manual to be indexed, click an example question, see the answer and its quote.

    python -m bench.first_answer [--runs N] [--question-index I] [--out DIR] [--script]
                                 [--cold-cache] [--max-new-tokens N] [--chromium PATH]

Each run starts ``app.py`` (the Space's entry; ``--script``: ``bash scripts/app.sh``, the quick
start) on a new, empty data folder, with this machine's backbone cache (``--cold-cache``: an
empty one, so the backbone is dequantized first, as on a first start ever), and drives a real
headless Chromium (Playwright) the way a visitor does: open the page, wait until the first-page
line says the example is ready, click an example question (it fills the question box, picks the
example manual and asks), wait for the answer box (or its fold) to hold the final answer
(its evidence line shown) and the quote block. Times are seconds from the process start: server
answering, page loaded, example indexed (the line says so), the final answer shown, the quote
shown (it comes with the route, before the answer). Prints one JSON line per run and their
medians; ``--out`` also keeps each run's server log and a screenshot of the answered page.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
READY_TEXT = "Try it"  # app/shared/examples.py hint(): the example manual is ready
INDEXING_TEXT = "being indexed"
# The final answer is in: the answer box (or, for an answer the check does not support, its
# fold) holds text and the evidence note (emptied by the click, written right after the final
# answer) says something. (The metrics that say TTFT are
# folded away under "Metrics", not shown until opened.)
ANSWER_JS = """() => {
  const v = (document.querySelector('#answer-text textarea')?.value || '').trim()
    || (document.querySelector('#answer-fold')?.innerText || '').trim();
  return v.length > 0
    && (document.querySelector('#evidence-note')?.innerText || '').trim().length > 0; }"""
# The answer as shown: in the answer box, or folded under the line saying why (the answer check
# does not support it; the box is then hidden and not on the page).
SHOWN_JS = """() => (document.querySelector('#answer-text textarea')?.value || '').trim()
  || (document.querySelector('#answer-fold')?.innerText || '').trim()"""
QUOTE_JS = """() => (document.querySelector('#quote-view')?.innerText || '')
  .includes('Where the manual answers')"""
ERRORS_JS = """() => Array.from(document.querySelectorAll(
  "[data-testid='toast-body'].error, [data-testid='status-tracker'] .error"))
  .map(e => (e.closest("[data-testid='toast-body']") || e).innerText.trim())"""


@dataclass
class Walk:
    """One visitor's walk: seconds from the app's start, and what the page showed."""
    up_s: float = 0.0
    page_s: float = 0.0
    indexed_s: float = 0.0
    answer_s: float = 0.0
    quote_s: float = 0.0
    hints: list[str] = field(default_factory=list)  # the first-page line, each value seen
    examples: list[str] = field(default_factory=list)  # the example questions shown
    question: str = ""  # the question box after the click
    picked: str = ""  # the Ask tab's manual picker after the click
    answer: str = ""
    quote: str = ""
    errors: list[str] = field(default_factory=list)  # red badges
    outside: list[str] = field(default_factory=list)  # requests to anything but the app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(data_dir: Path, port: int, log: Path, *, script: bool = False,
              cache_dir: Path | None = None, extra_env: dict | None = None
              ) -> subprocess.Popen:
    """``app.py`` (``script``: ``bash scripts/app.sh``, the quick start) on ``data_dir`` and
    ``port``, examples on (unless ``extra_env`` says otherwise), its output in ``log``;
    ``cache_dir``: the backbone cache (default: this machine's)."""
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", PYTHONUNBUFFERED="1")
    if cache_dir is not None:
        env["H2MT_CACHE_DIR"] = str(cache_dir)
    env.pop("H2MT_EXAMPLES", None)
    env.pop("H2MT_DB_URL", None)
    env.update(extra_env or {})
    cmd = (["bash", "scripts/app.sh"] if script else [sys.executable, "app.py"])
    return subprocess.Popen([*cmd, "--data-dir", str(data_dir), "--port", str(port)], cwd=ROOT,
                            env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop_app(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def wait_up(proc: subprocess.Popen, url: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"the app did not answer in {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def walk(browser, data_dir: Path, log: Path, *, question_index: int = 0,
         timeout_s: float = 300.0, screenshot: Path | None = None,
         max_new_tokens: int | None = None, script: bool = False,
         cache_dir: Path | None = None) -> Walk:
    """Start the app on ``data_dir`` (empty for a first start) and walk a visitor's first
    answer in ``browser`` (a Playwright Chromium); the app is stopped afterwards.
    ``max_new_tokens``: typed into "Longest answer" before the click (default: the app's)."""
    from urllib.parse import urlparse

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    w = Walk()
    t0 = time.monotonic()
    proc = start_app(data_dir, port, log, script=script, cache_dir=cache_dir)
    page = None
    try:
        wait_up(proc, url, log, timeout_s)
        w.up_s = time.monotonic() - t0
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.on("request", lambda r: w.outside.append(r.url)
                if urlparse(r.url).scheme in ("http", "https")
                and urlparse(r.url).netloc != urlparse(url).netloc else None)
        page.set_default_timeout(timeout_s * 1000)
        page.goto(url)
        hint = page.locator("#start-hint [data-testid='markdown']")
        hint.wait_for()
        w.page_s = time.monotonic() - t0
        while READY_TEXT not in (text := " ".join(hint.inner_text().split())):
            if text and (not w.hints or w.hints[-1] != text):
                w.hints.append(text)
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"the example was not indexed in {timeout_s:.0f} s: {text}")
            time.sleep(0.1)
        w.hints.append(text)
        w.indexed_s = time.monotonic() - t0
        if max_new_tokens is not None:
            page.locator("#ask-max-new input").fill(str(max_new_tokens))
            page.locator("#ask-max-new input").press("Tab")
        samples = page.locator("#example-questions button")
        w.examples = [" ".join(samples.nth(i).inner_text().split())
                      for i in range(samples.count())]
        samples.nth(question_index).click()
        while not (w.answer_s and w.quote_s):  # the quote comes with the route, before the answer
            now = time.monotonic() - t0
            if not w.quote_s and page.evaluate(QUOTE_JS):
                w.quote_s = now
            if not w.answer_s and page.evaluate(ANSWER_JS):
                w.answer_s = now
            if now > timeout_s:
                raise TimeoutError(f"no answer and quote in {timeout_s:.0f} s")
            time.sleep(0.05)
        w.question = page.locator("#ask-question textarea").input_value()
        w.picked = page.locator("#ask-doc input").input_value()
        w.answer = " ".join(page.evaluate(SHOWN_JS).split())
        w.quote = " ".join(page.locator("#quote-view").inner_text().split())
        w.errors = page.evaluate(ERRORS_JS)
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=False)
    finally:
        if page is not None:
            page.close()
        stop_app(proc)
    return w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--question-index", type=int, default=0,
                    help="which example question to click (0: the first)")
    ap.add_argument("--out", type=Path, default=None,
                    help="folder for each run's server log and screenshot")
    ap.add_argument("--chromium", type=Path, default=CHROMIUM)
    ap.add_argument("--timeout-s", type=float, default=300.0)
    ap.add_argument("--script", action="store_true",
                    help="start the app with bash scripts/app.sh (the quick start), not app.py")
    ap.add_argument("--cold-cache", action="store_true",
                    help="an empty backbone cache too (H2MT_CACHE_DIR): the first start ever, "
                         "which dequantizes the installed GGUF (a Space also fetches it first)")
    ap.add_argument("--max-new-tokens", type=int, default=None,
                    help="typed into \"Longest answer\" before the click (default: the app's)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    out = args.out or Path(tempfile.mkdtemp(prefix="first-answer-"))
    out.mkdir(parents=True, exist_ok=True)
    walks = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(args.chromium), args=CHROMIUM_ARGS)
        try:
            for i in range(args.runs):
                with tempfile.TemporaryDirectory(prefix="first-answer-data-") as data, \
                        tempfile.TemporaryDirectory(prefix="first-answer-cache-") as cache:
                    w = walk(browser, Path(data), out / f"server-{i}.log",
                             question_index=args.question_index, timeout_s=args.timeout_s,
                             screenshot=out / f"answer-{i}.png",
                             max_new_tokens=args.max_new_tokens, script=args.script,
                             cache_dir=Path(cache) if args.cold_cache else None)
                walks.append(w)
                print(json.dumps({"run": i, **asdict(w)}, ensure_ascii=False), flush=True)
        finally:
            browser.close()
    keys = ("up_s", "page_s", "indexed_s", "answer_s", "quote_s")
    med = {k: round(statistics.median(getattr(w, k) for w in walks), 1) for k in keys}
    print(json.dumps({"runs": len(walks), "median": med, "load": os.getloadavg(),
                      "out": str(out)}))


if __name__ == "__main__":
    main()
