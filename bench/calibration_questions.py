"""Question sets for fitting the answer check's confidence, made from Debian manuals.

    python -m bench.calibration_questions --out data/calib/questions.jsonl [--per-manual 70]

Each question carries a Python regular expression for its key fact (``regex``), as the dev
probe's do, so that an answer is labelled right or wrong without a person. Three templates, on
the manuals' own tables (choices of ours, where the issue only says "template questions from
option tables"):

- ``option``: an option table row (one or more option lines, then the sentence that describes
  them; read as one entry unit where the splitter joins them): "Which option should I use to
  <description>?"; key fact: any of the row's options.
- ``variable``: a configuration-variable entry ("3.1. name / Type: / Default: / description"):
  "Which configuration variable <description>?"; key fact: the variable's name.
- ``default``: the same entry: "What is the default value of the <name> variable?"; key fact:
  its default (only defaults that are not yes/no, which an answer names by chance).

The manuals (``MANUALS``) come from Debian bookworm packages (``apt-get download``, ``dpkg-deb
-x``, as ``engine.training.data.fetch_packages`` does); none is an evaluation manual
(``engine.training.data.check_not_evaluation`` refuses them) nor one of the dev probe's.
Questions are drawn with a seeded generator.
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import re
from pathlib import Path

from engine.answer.passages.units import split_units

# (package, file under the unpacked root, name): options of an editor, of a media tool, and the
# configuration variables of a mail client
MANUALS = (("nano", "usr/share/doc/nano/nano.html", "nano"),
           ("ffmpeg-doc", "usr/share/doc/ffmpeg/manual/ffmpeg.html", "ffmpeg"),
           ("mutt", "usr/share/doc/mutt/manual.txt.gz", "mutt"))
_OPTION_LINE = re.compile(r"^\s*(--?[A-Za-z][\w-]*)")
_ENTRY = re.compile(r"\n\d+\.\d+\.[ \xa0](\w+)\n\nType:[ \xa0]([^\n]+)\nDefault:[ \xa0]([^\n]*)\n\n"
                    r"(.+?)(?:\n\n|$)", re.S)
_FIRST_SENTENCE = re.compile(r"^(.+?(?<!\bi\.e)(?<!\be\.g)[.!?])(?:\s|$)", re.S)
_VERB_START = re.compile(r"^(?!The |This |If |When |In |For |A |An |Note |See |Use this |By |Only "
                         r"|Also |Useful |Default |Currently |It |Each |Since |Like )[A-Z][a-z]+"
                         r"(?:s)?\b")


def _clause(description: str) -> str | None:
    """The description as the end of a question ("Make the Home key smarter." -> "make the
    Home key smarter"); None when it is no imperative or third-person verb phrase."""
    m = _FIRST_SENTENCE.match(" ".join(description.split()))
    if not m or not _VERB_START.match(m.group(1)):
        return None
    words = m.group(1).rstrip(".!?").split()
    if not 4 <= len(words) <= 25:
        return None
    verb = words[0].lower()
    if verb.endswith("s") and not verb.endswith("ss"):  # "Specifies" -> "specify", "Sets" -> "set"
        verb = verb[:-3] + "y" if verb.endswith("ies") else verb[:-1]
    return " ".join([verb, *words[1:]])


def option_questions(tree, manual: str) -> list[dict]:
    """``option`` questions from the option tables of a built tree (module docstring)."""
    out = []

    def ask(names: list[str], description: str) -> None:
        clause = _clause(description)
        if clause:
            alts = "|".join(re.escape(n) for n in dict.fromkeys(names))
            out.append({"manual": manual, "kind": "option",
                        "question": f"Which option should I use to {clause}?",
                        "regex": rf"(?<![\w-])(?:{alts})(?![\w-])", "fact": names[0]})

    for node in tree.preorder():
        units = split_units(node.text, node.title or "")
        i = 0
        while i < len(units):
            if units[i].kind == "entry":  # the option lines with their description's first sentence
                *head, description = units[i].text.split("\n")
                names = [_OPTION_LINE.match(ln).group(1) for ln in head if _OPTION_LINE.match(ln)]
                if names:
                    ask(names, description)
                i += 1
                continue
            names = []
            while i < len(units) and units[i].kind != "sentence" and \
                    _OPTION_LINE.match(units[i].text):
                names += [_OPTION_LINE.match(ln).group(1) for ln in units[i].text.split("\n")
                          if _OPTION_LINE.match(ln)]
                i += 1
            if names and i < len(units) and units[i].kind == "sentence":
                ask(names, units[i].text)
            i += 1 if not names else 0
    return out


def variable_questions(text: str, manual: str) -> list[dict]:
    """``variable`` and ``default`` questions from configuration-variable entries."""
    out = []
    for name, _kind, default, desc in _ENTRY.findall(text):
        clause = _clause(desc)
        if clause:
            out.append({"manual": manual, "kind": "variable",
                        "question": f"Which configuration variable should I set to {clause}?",
                        "regex": rf"(?<![\w-]){re.escape(name)}(?![\w-])", "fact": name})
        value = " ".join(default.replace("\xa0", " ").split()).strip("“”\"")
        if value and value.lower() not in ("yes", "no", "ask-yes", "ask-no", "unset", "set") \
                and len(value) <= 30:
            out.append({"manual": manual, "kind": "default",
                        "question": f"What is the default value of the {name} variable?",
                        "regex": r"(?<![\w-])" + r"\s+".join(map(re.escape, value.split()))
                        + r"(?![\w-])", "fact": value})
    return out


def informative(q: dict) -> bool:
    """Whether the question's regex can label an answer: not where the question itself holds
    the key fact ("... how to sort messages" for the variable ``sort``), which an answer that
    only repeats the question would then hold too. A row without its regex (the dev probe's,
    whose questions were written by hand) counts as informative."""
    return not q.get("regex") or re.search(q["regex"], q["question"]) is None


def manual_path(root: Path, rel: str) -> Path:
    """The manual as the library ingests it (a gzipped text is unpacked beside itself)."""
    path = root / rel
    if path.suffix == ".gz":
        plain = path.with_suffix("")
        if not plain.exists():
            plain.write_bytes(gzip.decompress(path.read_bytes()))
        return plain
    return path


def build(root: Path, per_manual: int, seed: int = 0) -> list[dict]:
    """Up to ``per_manual`` questions from each of ``MANUALS`` (unpacked under ``root``)."""
    from engine.document.builders import build_raw_tree

    rng = random.Random(seed)
    out = []
    for _package, rel, name in MANUALS:
        path = manual_path(root, rel)
        if path.suffix == ".txt":
            found = variable_questions(path.read_text(errors="replace"), name)
        else:
            found = option_questions(build_raw_tree(path), name)
        seen, unique = set(), []
        for q in filter(informative, found):
            if q["question"].lower() not in seen:
                seen.add(q["question"].lower())
                unique.append({**q, "doc": str(path)})
        rng.shuffle(unique)
        out += unique[:per_manual]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("data/calib"),
                    help="folder with debs/ and root/ (engine.training.data.fetch_packages)")
    ap.add_argument("--out", type=Path, default=Path("data/calib/questions.jsonl"))
    ap.add_argument("--per-manual", type=int, default=70)
    ap.add_argument("--shared", type=Path, default=Path("../shared"))
    args = ap.parse_args(argv)
    from engine.training.data import check_not_evaluation, fetch_packages

    fetch_packages([p for p, _, _ in MANUALS], args.data)
    check_not_evaluation([manual_path(args.data / "root", rel) for _, rel, _ in MANUALS],
                         args.shared)
    rows = build(args.data / "root", args.per_manual)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    kinds: dict[str, int] = {}
    for r in rows:
        kinds[f"{r['manual']}/{r['kind']}"] = kinds.get(f"{r['manual']}/{r['kind']}", 0) + 1
    print(f"{len(rows)} questions -> {args.out}: {kinds}")


if __name__ == "__main__":
    main()
