"""Training data for the small parts, built from real documents (H2MT 3.4 "Routing supervision").

Documents come from Debian documentation packages fetched with ``apt-get download`` and unpacked
with ``dpkg-deb -x`` (no root, no install); ``manifest.json`` records each package's name,
version and sha256 and each document's sha256. Evaluation data must never be trained on: every
document is checked against the files of ``../shared/corpus`` and the OpenROAD documentation
(same sha256, or same file name) and refused if it matches.

Queries with a known gold node, three kinds (choices of ours; the paper maps annotated evidence
to nodes, which we do not have for training documents):
- ``heading``: a section's heading in a question template ("{heading}: how does it work?");
  gold = that section (an internal node or a leaf); answer = the opening of its body.
- ``sentence``: one sentence drawn from a leaf's body; gold = that leaf (routing only).
- ``generated``: a question the backbone writes about a passage (one or two sentences of a leaf),
  greedy; the passage is its answer (for L_gen); gold = that leaf.
Gold paths are propagated to ancestors by the training loop (every ancestor of a gold node is on
its path). Queries are drawn with a seeded generator, so the same documents give the same set.
"""
from __future__ import annotations

import json
import random
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.ingest import file_sha256 as sha256_file
from engine.document.builders import FILE_EXTENSIONS
from engine.document.tree import Tree

# The heading comes first: the query vector reads only the first half of a question's tokens
# (H2MT 3.3, n_q = floor(T/2)), so "What does the manual say about {t}?" would hide it.
HEADING_TEMPLATES = ("{t}: what does the manual say about it?", "{t}: how does it work?",
                     "{t}: where is it explained?", "{t}")
QUESTION_PROMPT = ("Here is a passage from a technical manual.\n\n{passage}\n\n"
                   "Write one question that this passage answers. Reply with the question only.")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`'\"])")


@dataclass
class Query:
    doc: str  # document key (its path relative to the data folder)
    kind: str  # heading | sentence | generated
    question: str
    gold: list[int]  # node ids in that document's tree
    answer: str | None = None  # the target of L_gen, when there is one


# -- documents -----------------------------------------------------------------------------------

def evaluation_fingerprints(shared_dir: Path) -> tuple[set[str], set[str]]:
    """(sha256s, lower-case file names) of every evaluation file under ``shared_dir``."""
    shas, names = set(), set()
    for sub in ("corpus", "bench"):
        for p in (shared_dir / sub).rglob("*"):
            if p.is_file() and p.suffix.lower() in FILE_EXTENSIONS:
                shas.add(sha256_file(p))
                names.add(p.name.lower())
    return shas, names


def fetch_packages(packages: list[str], dest: Path) -> list[dict]:
    """``apt-get download`` each package into ``dest/debs`` and unpack it under ``dest/root``.

    Returns one record per package: name, version, file, sha256. Already-downloaded packages
    are reused (their recorded version is read from the .deb itself).
    """
    debs, root = dest / "debs", dest / "root"
    debs.mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    records = []
    for name in packages:
        found = sorted(debs.glob(f"{name}_*.deb"))
        if not found:
            subprocess.run(["apt-get", "download", name], cwd=debs, check=True,
                           stdout=subprocess.DEVNULL)
            found = sorted(debs.glob(f"{name}_*.deb"))
        deb = found[-1]
        version = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True,
                                 capture_output=True, text=True).stdout.strip()
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        records.append({"package": name, "version": version, "file": deb.name,
                        "sha256": sha256_file(deb)})
    return records


def check_not_evaluation(paths: list[Path], shared_dir: Path) -> None:
    """Refuse any training document that is (or is named like) an evaluation file."""
    if not shared_dir.is_dir():
        raise FileNotFoundError(f"cannot check training documents against {shared_dir}: missing")
    shas, names = evaluation_fingerprints(shared_dir)
    for p in paths:
        if p.name.lower() in names or sha256_file(p) in shas:
            raise ValueError(f"{p} is evaluation data (it matches a file in {shared_dir})")


# -- queries -------------------------------------------------------------------------------------

def sentences(text: str) -> list[str]:
    """Sentences of a body of text, whitespace collapsed (a plain regex: good enough for manuals,
    whose sentences mostly end with a full stop before a capital)."""
    flat = " ".join(text.split())
    return [s.strip() for s in _SENTENCE.split(flat) if s.strip()]


def _useful(sentence: str, lo: int = 6, hi: int = 40) -> bool:
    words = sentence.split()
    letters = sum(c.isalpha() for c in sentence)
    return lo <= len(words) <= hi and letters >= 0.6 * len(sentence)


def heading_queries(doc: str, tree: Tree, rng: random.Random) -> list[Query]:
    out = []
    for n in tree.preorder():
        title = " ".join((n.title or "").split())
        if n.parent is None or len(title) < 4 or not any(c.isalpha() for c in title):
            continue
        title = re.sub(r"^[\d.]+\s+", "", title)  # "3.2 Pointers" -> "Pointers"
        template = rng.choice(HEADING_TEMPLATES)
        out.append(Query(doc, "heading", template.format(t=title), [n.id],
                         answer=lead(n.text, n.title or "")))
    return out


def lead(text: str, title: str = "", min_words: int = 25, max_sentences: int = 3) -> str | None:
    """The opening of a section's own body, the printed heading removed: whole sentences until
    ``min_words`` words (at most ``max_sentences``), or None when the body is too short. The
    answer L_gen trains on for a heading query (long enough to teach answers that explain)."""
    body = " ".join(text.split())
    bare = re.sub(r"^[\d.]+\s+", "", " ".join(title.split()))
    body = re.sub(r"^[\d.]*\s*", "", body)
    if bare and body.startswith(bare):
        body = body[len(bare):].lstrip(" :.-")
    taken: list[str] = []
    for sent in sentences(body)[:max_sentences]:
        if not _useful(sent, lo=3, hi=60):
            break
        taken.append(sent)
        if sum(len(t.split()) for t in taken) >= min_words:
            return " ".join(taken)
    return None


def passages(tree: Tree, rng: random.Random) -> list[tuple[int, str]]:
    """(leaf id, one useful sentence) for every leaf that has one."""
    out = []
    for leaf in tree.leaves():
        cands = [s for s in sentences(leaf.text) if _useful(s)]
        if cands:
            out.append((leaf.id, rng.choice(cands)))
    return out


def sentence_queries(doc: str, tree: Tree, rng: random.Random) -> list[Query]:
    # No answer: the question is the sentence itself, so L_gen would only teach copying it.
    return [Query(doc, "sentence", s, [leaf_id]) for leaf_id, s in passages(tree, rng)]


def _clean_question(text: str) -> str | None:
    q = " ".join(text.split()).strip().strip('"')
    q = re.sub(r"^(question|q)\s*[:.]\s*", "", q, flags=re.I)
    if "?" in q:
        q = q[: q.index("?") + 1]
    if not q.endswith("?") or not 4 <= len(q.split()) <= 30:
        return None
    return q


def generated_queries(doc: str, tree: Tree, backbone, rng: random.Random, n: int,
                      batch_size: int = 16, max_new_tokens: int = 40,
                      progress=None) -> list[Query]:
    """Questions the backbone writes about ``n`` passages of ``tree`` (greedy, batched)."""
    import torch

    chosen = passages(tree, rng)
    rng.shuffle(chosen)
    chosen = chosen[:n]
    tok = backbone.tokenizer
    side = tok.padding_side
    tok.padding_side = "left"  # decoder-only batched generation pads on the left
    out: list[Query] = []
    try:
        for i in range(0, len(chosen), batch_size):
            batch = chosen[i:i + batch_size]
            prompts = [tok.apply_chat_template(
                [{"role": "user", "content": QUESTION_PROMPT.format(passage=p)}],
                tokenize=False, add_generation_prompt=True) for _, p in batch]
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                gen = backbone.model.generate(
                    input_ids=enc.input_ids.to(backbone.device),
                    attention_mask=enc.attention_mask.to(backbone.device),
                    max_new_tokens=max_new_tokens, do_sample=False,
                    pad_token_id=tok.pad_token_id)
            texts = tok.batch_decode(gen[:, enc.input_ids.shape[1]:], skip_special_tokens=True)
            for (leaf_id, passage), text in zip(batch, texts):
                q = _clean_question(text)
                if q is not None:
                    out.append(Query(doc, "generated", q, [leaf_id], answer=passage))
            if progress is not None:
                progress(min(i + batch_size, len(chosen)), len(chosen))
    finally:
        tok.padding_side = side
    return out


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_]+", text.lower()) if len(w) >= 4}


def usable_queries(queries: list[Query]) -> list[Query]:
    """Drop generated questions that say nothing about their passage: those asked of more than
    one passage ("What is the answer to this question?") and those sharing no content word
    (4+ letters) with it. The 135M backbone writes many of both."""
    counts: dict[str, int] = {}
    for q in queries:
        if q.kind == "generated":
            key = q.question.lower()
            counts[key] = counts.get(key, 0) + 1
    out = []
    for q in queries:
        if q.kind == "generated":
            if counts[q.question.lower()] > 1:
                continue
            if not _content_words(q.question) & _content_words(q.answer or ""):
                continue
        out.append(q)
    return out


def save_queries(queries: list[Query], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    with open(tmp, "w") as f:
        for q in queries:
            f.write(json.dumps(asdict(q)) + "\n")
    tmp.rename(path)


def load_queries(path: Path) -> list[Query]:
    with open(path) as f:
        return [Query(**json.loads(line)) for line in f if line.strip()]
