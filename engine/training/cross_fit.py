"""Fitting the quote's cross-encoder on a CPU (issue 66): the bundled all-MiniLM-L6-v2 read as a
cross-encoder (question and entry in one input, one logit from its pooler), its embeddings and
lower layers frozen, its top ``TRAINED`` layers, pooler and a new one-logit head trained on the
real pairs of ``engine.training.man_pairs`` (man-page items and NAME lines) and
``engine.training.faq_pairs`` (people's questions over FAQ answers). Listwise loss: each
question's positive against ``GROUP - 1`` of its negatives, the BM25-nearest of the same page
first (softmax cross-entropy), so the model learns to order one question's candidates, as the
quote's second stage uses it.

What is saved is small: the trained tensors only (fp16 safetensors), loaded over the bundled
weights (``engine.answer.passages.cross_encoder``). Validation: the records of packages left
out of training (``--held-out``), the model's top-1 against the frozen bi-encoder's cosine
(the meaning channel of the linear score) over each record's positive and negatives.

Run (one thread, in the background; about 40 minutes on this CPU):
``OMP_NUM_THREADS=1 python -m engine.training.cross_fit --man data/man/man_pairs.jsonl.gz
--faq data/faq/faq_pairs.jsonl.gz --out runs/cross``; then copy ``runs/cross/cross_encoder.
safetensors`` to ``assets/``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from pathlib import Path

import numpy as np
import torch

TRAINED = 2  # top encoder layers trained (with the pooler and the head)
GROUP = 8  # candidates per question (1 positive)
MAX_LENGTH = 96  # word pieces of question and entry (as the stage reads them)


def load(path: str) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def model_and_tokenizer(trained: int = TRAINED):
    """The bundled MiniLM with a one-logit head; only the top ``trained`` layers, the pooler
    and the head require gradients."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from engine.routing.dense import model_path

    path = str(model_path())
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    layers = model.config.num_hidden_layers
    top = {f"bert.encoder.layer.{i}." for i in range(layers - trained, layers)}
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(("bert.pooler.", "classifier."))
                         or any(name.startswith(t) for t in top))
    return model, AutoTokenizer.from_pretrained(path)


def trained_state(model) -> dict[str, torch.Tensor]:
    """The tensors the fit changed, in fp16 (what ships)."""
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    return {k: v.detach().half().contiguous() for k, v in model.state_dict().items()
            if k in names}


def logits(model, tok, questions: list[str], entries: list[str]) -> torch.Tensor:
    enc = tok(questions, entries, truncation="only_second", max_length=MAX_LENGTH,
              padding=True, return_tensors="pt")
    return model(**enc).logits[:, 0]


def validate(model, tok, records: list[dict]) -> dict:
    """Top-1 and MRR of the model and of the frozen bi-encoder's cosine over each record's
    positive (index 0) and negatives."""
    from engine.routing.dense import load_encoder

    enc = load_encoder("cpu")
    model.eval()
    got = {"cross": [], "cosine": []}
    with torch.inference_mode():
        for r in records:
            cands = [r["positive"]] + r["negatives"][:GROUP * 2 - 1]
            ce = logits(model, tok, [r["question"]] * len(cands), cands).numpy()
            v = enc.encode([r["question"]] + cands)
            for name, sc in (("cross", ce), ("cosine", v[1:] @ v[0])):
                got[name].append(int((np.asarray(sc) > sc[0]).sum()))  # the positive's rank
    model.train()
    return {name: {"top1": round(float(np.mean([k == 0 for k in ranks])), 4),
                   "mrr": round(float(np.mean([1 / (1 + k) for k in ranks])), 4)}
            for name, ranks in got.items()} | {"records": len(records)}


def fit(records: list[dict], steps: int, questions: int, lr: float, head_lr: float,
        minutes: float, log, seed: int = 0):
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model, tok = model_and_tokenizer()
    body = [p for n, p in model.named_parameters() if p.requires_grad
            and n.startswith("bert.encoder.")]
    head = [p for n, p in model.named_parameters() if p.requires_grad
            and not n.startswith("bert.encoder.")]
    opt = torch.optim.AdamW([{"params": body, "lr": lr}, {"params": head, "lr": head_lr}],
                            weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=[lr, head_lr], total_steps=steps,
                                                pct_start=0.06, anneal_strategy="linear")
    order = list(range(len(records)))
    rng.shuffle(order)
    t0, losses, done = time.perf_counter(), [], 0
    model.train()
    for step in range(steps):
        qs, es = [], []
        for j in range(questions):
            r = records[order[(step * questions + j) % len(order)]]
            negs = r["negatives"][:GROUP * 2]
            negs = rng.sample(negs, min(GROUP - 1, len(negs)))
            negs += [rng.choice(r["negatives"])] * (GROUP - 1 - len(negs))
            qs += [r["question"]] * GROUP
            es += [r["positive"]] + negs
        out = logits(model, tok, qs, es).view(-1, GROUP)
        loss = torch.nn.functional.cross_entropy(out, torch.zeros(len(out), dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        done = step + 1
        if done % 20 == 0:
            el = time.perf_counter() - t0
            log(f"step {done}/{steps} loss(last 20) {np.mean(losses[-20:]):.4f} "
                f"{el / 60:.1f} min")
        if time.perf_counter() - t0 > minutes * 60:
            log(f"time budget reached after {done} steps")
            break
    return model, tok, losses, done, time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--man", required=True)
    ap.add_argument("--faq", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--questions", type=int, default=4, help="questions per step")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--minutes", type=float, default=40.0, help="stop after this long")
    ap.add_argument("--faq-share", type=float, default=0.3, help="FAQ records' share")
    ap.add_argument("--held-out", default="coreutils,openssh-client,systemd,cvs-faq",
                    help="packages / FAQs left out of training, for validation")
    ap.add_argument("--validate", type=int, default=300, help="held-out records read")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / "train.log", "a")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    held = set(args.held_out.split(","))
    man = load(args.man)
    faq = [dict(r, source=r["faq"], kind="faq") for r in load(args.faq)]

    def pkg(r):
        return (r.get("source") or r["faq"]).split("/")[0]

    rng = random.Random(0)
    train_man = [r for r in man if pkg(r) not in held and len(r["negatives"]) >= 3]
    train_faq = [r for r in faq if pkg(r) not in held and len(r["negatives"]) >= 3]
    want = args.steps * args.questions
    n_faq = min(len(train_faq), int(want * args.faq_share))
    records = rng.sample(train_man, min(len(train_man), want - n_faq)) + train_faq[:n_faq]
    held_out = [r for r in man + faq if pkg(r) in held and len(r["negatives"]) >= 3]
    held_out = rng.sample(held_out, min(args.validate, len(held_out)))
    log(f"training records {len(records)} ({n_faq} FAQ) of {len(train_man)} man + "
        f"{len(train_faq)} FAQ; held out {sorted(held)}: {len(held_out)} records read")
    model, tok, losses, steps, seconds = fit(records, args.steps, args.questions, args.lr,
                                             args.head_lr, args.minutes, log)
    from safetensors.torch import save_file

    state = trained_state(model)
    meta = {"base": "all-MiniLM-L6-v2", "trained_layers": str(TRAINED),
            "max_length": str(MAX_LENGTH)}
    save_file(state, out / "cross_encoder.safetensors", metadata=meta)
    t = time.perf_counter()
    val = validate(model, tok, held_out)
    report = {"records": len(records), "faq_records": n_faq, "steps": steps,
              "planned_steps": args.steps, "questions_per_step": args.questions,
              "group": GROUP, "lr": args.lr, "head_lr": args.head_lr,
              "train_seconds": round(seconds, 1), "trained_layers": TRAINED,
              "max_length": MAX_LENGTH, "held_out": sorted(held),
              "loss_first20": round(float(np.mean(losses[:20])), 4),
              "loss_last20": round(float(np.mean(losses[-20:])), 4),
              "validation": val, "validation_seconds": round(time.perf_counter() - t, 1),
              "parameters_saved": int(sum(v.numel() for v in state.values()))}
    (out / "report.json").write_text(json.dumps(report, indent=1))
    log(json.dumps(report))


if __name__ == "__main__":
    main()
