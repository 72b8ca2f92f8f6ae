"""Identifiers read as words: a run-together or camel-case name split into the words it is made
of, so that a question in plain words finds the entry whose name says it ("How do I patch a
command?" and ``\\patchcmd``; "at the beginning of an environment" and ``\\AtBeginEnvironment``).

- camel case is cut at its humps (``AtBeginEnvironment`` -> at begin environment);
- a lower-case run of at least ``MIN_RUN`` letters is cut by wordninja (a Zipf-cost dynamic
  program over English word frequencies) with the short forms manuals use in names added to its
  word list first (``ABBREVIATIONS``: ``patchcmd`` -> patch cmd, not patch cm d); a cut that
  leaves a one-letter piece is no cut (``robustify`` stays whole);
- a short form also reads as its word (cmd -> command, env -> environment).

``split_words`` gives the words of one name (or [] when it is one word); ``as_words`` appends
them to a text, for the sentence encoder (the meaning channel) to read; the lexical channel's
tokenizer (``engine.routing.lexical``) adds them as tokens.
"""
from __future__ import annotations

import gzip
import io
import re
from functools import lru_cache
from pathlib import Path

MIN_RUN = 6  # a shorter lower-case run is read as it is ("csdef" stays, "patchcmd" is cut)
# Short forms in names, and the word each stands for.
ABBREVIATIONS = {
    "cmd": "command", "cmds": "commands", "env": "environment", "envs": "environments",
    "arg": "argument", "args": "arguments", "opt": "option", "opts": "options",
    "num": "number", "str": "string", "len": "length", "val": "value", "vals": "values",
    "var": "variable", "vars": "variables", "dir": "directory", "cfg": "config",
    "conf": "config", "bool": "boolean", "ptr": "pointer", "buf": "buffer", "msg": "message",
    "err": "error", "func": "function", "fn": "function", "param": "parameter",
    "params": "parameters", "attr": "attribute", "elem": "element", "idx": "index",
    "pos": "position", "init": "initialize", "del": "delete", "cs": "control sequence",
    "def": "define", "lst": "list", "tmp": "temporary", "doc": "document", "pkg": "package",
}
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[^\W_A-Z]+|[A-Z]+")  # as the lexical channel cuts
_NAME = re.compile(r"[\\@.:_-]*[A-Za-z][\w@.:-]*")
_RUN = re.compile(r"[a-z]+")


@lru_cache(maxsize=1)
def _model():
    """wordninja's language model over its English word list, the short forms first."""
    import wordninja

    # wordninja is one module with its word list in a folder beside it
    path = Path(wordninja.__file__).parent / "wordninja" / "wordninja_words.txt.gz"
    words = gzip.decompress(path.read_bytes()).decode().split()
    listed = list(ABBREVIATIONS) + [w for w in words if w not in ABBREVIATIONS]
    return wordninja.LanguageModel(io.BytesIO(gzip.compress(" ".join(listed).encode())))


@lru_cache(maxsize=1 << 16)
def split_run(run: str) -> tuple[str, ...]:
    """A lower-case run of letters cut into words (module docstring); () when it stays whole."""
    if len(run) < MIN_RUN or not run.isalpha():
        return ()
    parts = [p.lower() for p in _model().split(run)]
    if len(parts) < 2 or any(len(p) < 2 for p in parts):
        return ()
    return tuple(parts)


def split_words(name: str) -> list[str]:
    """The words a name is made of, short forms also spelled out; [] when it is one word."""
    humps = _HUMP.findall(name)
    out: list[str] = []
    for hump in humps:
        low = hump.lower()
        parts = list(split_run(low)) if hump.islower() or hump.istitle() else []
        for part in parts or [low]:
            out.append(part)
            if part in ABBREVIATIONS:
                out.extend(ABBREVIATIONS[part].split())
    return out if len(out) > 1 or (out and out[0] != name.lower().strip("\\@.:_-")) else []


@lru_cache(maxsize=1 << 14)
def as_words(text: str) -> str:
    """``text`` with the words of its run-together and camel-case names appended in brackets
    ("\\\\patchcmd" -> "\\\\patchcmd (patch cmd command)"); unchanged when it has none."""
    extra: list[str] = []
    for name in _NAME.findall(text or ""):
        if not (_RUN.search(name) and (len(name) >= MIN_RUN or re.search(r"[a-z][A-Z]", name))):
            continue
        words = split_words(name)
        if words and " ".join(words) not in extra:
            extra.append(" ".join(words))
    return f"{text} ({'; '.join(extra)})" if extra else text
