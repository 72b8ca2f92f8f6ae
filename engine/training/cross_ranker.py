"""Training the cross-encoder passage ranker: the bundled all-MiniLM-L6-v2 read as a
cross-encoder (question and passage in one input, one relevance logit), adapted with LoRA
(peft) on the real question-passage pairs of ``engine.training.faq_pairs``. The loss is
listwise: each question's positive against its negatives (softmax cross-entropy), so the model
learns to rank a question's candidates, as the quote stage uses it.

Validation leaves one FAQ out at a time: a model trained on the others reranks the held-out
FAQ's BM25 candidates (``pool``), against the BM25 order and the bi-encoder cosine of the same
MiniLM. The shipped adapter is then trained on every FAQ (``--final``).

Run (a GPU if there is one): ``python -m engine.training.cross_ranker --data FILE --base DIR
--out DIR [--folds] [--final]``; it writes ``report.json`` and, with ``--final``, the adapter
(``adapter_config.json``, ``adapter_model.safetensors``).
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

MAX_LENGTH = 256
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.1,
        "target_modules": ["query", "key", "value", "dense"], "modules_to_save": ["classifier"]}


def load(path: str) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def model_and_tokenizer(base: str, device: str, adapter: str | None = None, lora: bool = True):
    """MiniLM with a one-logit head: LoRA-wrapped for training (or whole, ``lora=False``), or
    with ``adapter`` merged."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1,
                                                               dtype=torch.float32)
    if adapter:
        model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    elif lora:
        model = get_peft_model(model, LoraConfig(task_type="SEQ_CLS", **LORA))
    return model.to(device), tok


def scores(model, tok, device: str, question: str, passages: list[str],
           batch: int = 64) -> np.ndarray:
    """The model's logit for each (question, passage)."""
    out = []
    model.eval()
    with torch.no_grad(), torch.autocast(device_type=device.split(":")[0],
                                         dtype=torch.bfloat16, enabled=device != "cpu"):
        for i in range(0, len(passages), batch):
            enc = tok([question] * len(passages[i:i + batch]), passages[i:i + batch],
                      truncation="only_second", max_length=MAX_LENGTH, padding=True,
                      return_tensors="pt").to(device)
            out.append(model(**enc).logits.float()[:, 0].cpu())
    return torch.cat(out).numpy() if out else np.zeros(0, np.float32)


def train(records: list[dict], base: str, device: str, epochs: int, group: int, questions: int,
          lr: float, lora: bool = True, seed: int = 0):
    """Train on ``records`` (listwise loss, module docstring): LoRA, or every weight with
    ``lora=False``; the model and loss trace."""
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model, tok = model_and_tokenizer(base, device, lora=lora)
    if not lora:  # the word embeddings stay the base's, so what is saved is the rest
        model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr,
                            weight_decay=0.01)
    steps = epochs * ((len(records) + questions - 1) // questions)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps,
                                                pct_start=0.1, anneal_strategy="linear")
    losses = []
    model.train()
    for _ in range(epochs):
        order = list(range(len(records)))
        rng.shuffle(order)
        for s in range(0, len(order), questions):
            qs, ps = [], []
            for i in order[s:s + questions]:
                r = records[i]
                negs = rng.sample(r["negatives"], min(group - 1, len(r["negatives"])))
                negs += [rng.choice(r["negatives"])] * (group - 1 - len(negs))
                qs += [r["question"]] * group
                ps += [r["positive"]] + negs
            enc = tok(qs, ps, truncation="only_second", max_length=MAX_LENGTH, padding=True,
                      return_tensors="pt").to(device)
            with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16,
                                enabled=device != "cpu"):
                logits = model(**enc).logits.float().view(-1, group)
            loss = torch.nn.functional.cross_entropy(
                logits, torch.zeros(len(logits), dtype=torch.long, device=device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
    return model, tok, losses


def _rank_metrics(order_scores: list[np.ndarray], labels: list[list[int]]) -> dict:
    top1, rr, n = 0, 0.0, 0
    for sc, lab in zip(order_scores, labels):
        if not any(lab):
            continue
        n += 1
        order = np.argsort(-np.asarray(sc), kind="stable")
        ranks = [k for k, j in enumerate(order) if lab[j]]
        top1 += ranks[0] == 0
        rr += 1.0 / (1 + ranks[0])
    return {"questions": n, "top1": round(top1 / max(1, n), 4), "mrr": round(rr / max(1, n), 4)}


def evaluate(model, tok, device: str, records: list[dict], bi=None) -> dict:
    """Top-1 and MRR over each record's BM25 pool: BM25 order, bi-encoder cosine, the model."""
    labels = [r["pool_labels"] for r in records]
    bm25 = [np.arange(len(r["pool"]), 0, -1, dtype=np.float32) for r in records]
    out = {"bm25": _rank_metrics(bm25, labels)}
    if bi is not None:
        cos = []
        for r in records:
            v = bi.encode([r["question"]] + r["pool"], normalize_embeddings=True)
            cos.append(v[1:] @ v[0])
        out["bi_encoder"] = _rank_metrics(cos, labels)
    t0 = time.perf_counter()
    ce = [scores(model, tok, device, r["question"], r["pool"]) for r in records]
    out["cross_encoder"] = _rank_metrics(ce, labels)
    out["pairs_per_second"] = round(sum(len(r["pool"]) for r in records)
                                    / (time.perf_counter() - t0), 1)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--base", required=True, help="the all-MiniLM-L6-v2 folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--folds", action="store_true", help="leave each FAQ out in turn")
    ap.add_argument("--final", action="store_true", help="train on every FAQ and save")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--group", type=int, default=12, help="passages per question (1 positive)")
    ap.add_argument("--questions", type=int, default=32, help="questions per step")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--limit", type=int, default=0, help="records per FAQ (a quick check)")
    ap.add_argument("--min-eval", type=int, default=40, help="least questions of a held-out FAQ")
    ap.add_argument("--variants", default="",
                    help='JSON list of {"name", "lora", "lr", "epochs"}; the folds pick the best')
    ap.add_argument("--held-out", default="", help="comma-separated FAQs to leave out (default all)")
    args = ap.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    records = load(args.data)
    if args.limit:
        records = [r for faq in dict.fromkeys(r["faq"] for r in records)
                   for r in [x for x in records if x["faq"] == faq][:args.limit]]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    faqs = sorted({r["faq"] for r in records})
    report = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
              "torch": torch.__version__, "records": len(records), "faqs": faqs,
              "settings": {k: getattr(args, k) for k in ("epochs", "group", "questions", "lr")},
              "lora": LORA, "max_length": MAX_LENGTH, "folds": {}}
    variants = json.loads(args.variants) if args.variants else [
        {"name": "default", "lora": True, "lr": args.lr, "epochs": args.epochs}]
    held_out = [f for f in faqs if not args.held_out or f in args.held_out.split(",")]
    report["variants"] = variants

    def fit(recs, v):
        return train(recs, args.base, device, v["epochs"], args.group, args.questions, v["lr"],
                     v["lora"])

    best = variants[0]
    if args.folds:
        from sentence_transformers import SentenceTransformer
        bi = SentenceTransformer(args.base, device=device)
        mean = {}
        for v in variants:
            got = []
            for held in held_out:
                test = [r for r in records if r["faq"] == held]
                if len(test) < args.min_eval and not args.limit:
                    continue
                t0 = time.perf_counter()
                model, tok, losses = fit([r for r in records if r["faq"] != held], v)
                res = evaluate(model, tok, device, test, bi)
                res.update(train_seconds=round(time.perf_counter() - t0, 1),
                           loss_first10=round(float(np.mean(losses[:10])), 4),
                           loss_last10=round(float(np.mean(losses[-10:])), 4))
                report["folds"][f"{v['name']}/{held}"] = res
                got.append(res["cross_encoder"]["mrr"])
                print(v["name"], held, json.dumps(res), flush=True)
                (out / "report.json").write_text(json.dumps(report, indent=1))
            mean[v["name"]] = float(np.mean(got)) if got else 0.0
        best = max(variants, key=lambda v: mean[v["name"]])
        report["fold_mean_mrr"] = mean
    if args.final:
        t0 = time.perf_counter()
        model, tok, losses = fit(records, best)
        if best["lora"]:
            model.save_pretrained(out / "adapter")
        else:
            from safetensors.torch import save_file
            state = {k: v.detach().half().contiguous() for k, v in model.state_dict().items()
                     if "word_embeddings" not in k}
            keys = sorted(state)
            (out / "model").mkdir(exist_ok=True)
            for part, ks in enumerate((keys[:len(keys) // 2], keys[len(keys) // 2:])):
                save_file({k: state[k] for k in ks}, out / "model" / f"part{part}.safetensors")
        report["final"] = {"variant": best, "seconds": round(time.perf_counter() - t0, 1),
                           "steps": len(losses),
                           "loss_first10": round(float(np.mean(losses[:10])), 4),
                           "loss_last10": round(float(np.mean(losses[-10:])), 4)}
        print("final", json.dumps(report["final"]), flush=True)
    (out / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
