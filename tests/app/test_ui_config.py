"""The page as built (the Blocks config a browser receives): settings in a person's words, the
advanced ones folded away, one progress bar for an upload, and the Ask tab's chain of events
registered once (on the Ask button and the question's Enter, with /ask's inputs in order)."""
from __future__ import annotations

import re

import pytest

JARGON = re.compile(r"aggregation|hier|gate|policy|\bk\b|budget|depth cap", re.I)
ADVANCED = ("Sections followed per level", "Deepest level", "Most sections selected",
            "Re-read memories", "Tell the model where", "memory sums up")


@pytest.fixture(scope="module")
def config(tiny_backbone, tiny_parts, tmp_path_factory):
    from app.ui import build_app
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage import Library

    settings = Settings(data_dir=tmp_path_factory.mktemp("ui"))
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    try:
        yield build_app(rt).config
    finally:
        rt.library.close()


def _inside(layout: dict, target: int) -> set[int] | None:
    """Ids of the components below ``target`` in the layout tree (None: target not found)."""
    if layout.get("id") == target:
        out: set[int] = set()
        stack = list(layout.get("children", []))
        while stack:
            node = stack.pop()
            out.add(node["id"])
            stack.extend(node.get("children", []))
        return out
    for child in layout.get("children", []):
        found = _inside(child, target)
        if found is not None:
            return found
    return None


def _accordion(config: dict, label: str) -> tuple[dict, set[int]]:
    acc = next(c for c in config["components"]
               if c["type"] == "accordion" and c["props"].get("label", "").startswith(label))
    return acc, _inside(config["layout"], acc["id"])


def test_settings_speak_plainly_with_help_and_fold_the_advanced_ones(config):
    by_id = {c["id"]: c for c in config["components"]}
    # the settings a person changes sit beside the question (no "Settings" fold any more: the
    # Ask tab's first screen holds the answer, its page and the tree); the rest under Advanced
    advanced_acc, advanced = _accordion(config, "Advanced")
    shown = {c["id"] for c in config["components"]
             if c["props"].get("elem_id") in ("ask-mode", "ask-router", "ask-max-new")}
    assert len(shown) == 3
    settings = shown | advanced
    inputs = [by_id[i] for i in settings
              if by_id[i]["type"] in ("radio", "dropdown", "slider", "number", "checkbox")]
    assert len(inputs) >= 8
    for c in inputs:
        label, info = c["props"].get("label") or "", c["props"].get("info") or ""
        assert info.strip(), f"{label!r} has no help line"
        assert not JARGON.search(label), f"{label!r} speaks the paper's jargon"
    folded = {by_id[i]["props"].get("label") for i in advanced}
    for name in ADVANCED:
        assert any(name in (f or "") for f in folded), f"{name!r} is not under Advanced"
    assert advanced_acc["props"].get("open") is False


def test_an_upload_shows_one_progress_bar_on_the_indexing_status(config):
    dep = next(d for d in config["dependencies"] if d.get("api_name") == "ingest")
    status = next(c["id"] for c in config["components"]
                  if c["props"].get("elem_id") == "index-status")
    assert len(dep["outputs"]) > 1  # it updates the library and the pickers too ...
    assert dep["show_progress_on"] == [status]  # ... but shows its bar on the status alone


def _ids(config) -> dict[str, int]:
    return {c["props"]["elem_id"]: c["id"] for c in config["components"]
            if c["props"].get("elem_id")}


def test_the_ask_chain_is_registered_once_on_two_triggers(config):
    ids = _ids(config)
    asked = {(ids["ask-button"], "click"), (ids["ask-question"], "submit")}
    on_ask = [d for d in config["dependencies"]
              if {tuple(x) for x in d["targets"]} & asked]
    # one event clears the last answer's notes, one answers (/ask); nothing else listens
    assert len(on_ask) == 2 and all({tuple(x) for x in d["targets"]} == asked for d in on_ask)
    (answer,) = [d for d in on_ask if d["api_name"] == "ask"]
    assert [d["api_name"] for d in config["dependencies"]].count("ask") == 1
    assert answer["inputs"][:10] == [ids[e] for e in (
        "ask-doc", "ask-question", "ask-mode", "ask-k", "ask-depth", "ask-budget", "ask-gate",
        "ask-hier-pos", "ask-max-new", "ask-router")]
    assert answer["outputs"][:3] == [ids["answer-text"], ids["answer-metrics"], ids["cited-table"]]


def test_text_mode_instead_asks_through_the_ask_buttons_click(config):
    ids = _ids(config)
    on_text = [d for d in config["dependencies"]
               if (ids["text-instead-button"], "click") in {tuple(x) for x in d["targets"]}]
    assert len(on_text) == 1 and on_text[0]["outputs"] == [ids["ask-mode"]]
    follow = [d for d in config["dependencies"] if d.get("trigger_after") == on_text[0]["id"]]
    assert len(follow) == 1 and "#ask-button" in (follow[0].get("js") or "")
