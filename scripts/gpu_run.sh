#!/usr/bin/env bash
# On the GPU machine, in the repository root, with the pieces of scripts/gpu_bundle.sh in
# PIECES (default /tmp/gpu): reassemble and install them, run issue 64's check
# (`bench.gpu_check`), then the go/no-go training run with the time left (it resumes from the
# committed run folder). Logs and the run's new state go to OUT_DIR.
#   LIMIT=520 OUT_DIR=/tmp/out bash scripts/gpu_run.sh
set -uo pipefail
START=$(date +%s)
LIMIT=${LIMIT:-520}
PIECES=${PIECES:-/tmp/gpu}
OUT_DIR=${OUT_DIR:-${OUT:-/tmp/gpu-out}}
mkdir -p "$OUT_DIR"
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
ROOTDIR=$PWD
if [ ! -d "$PIECES/site" ]; then
  (cd "$PIECES" && cat part.* | tar x) || { echo "the pieces do not make a bundle"; exit 3; }
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$PIECES"/whl/*.whl || { echo "pip failed"; exit 3; }
cp -r "$PIECES"/site/* /tmp/site/
export PYTHONPATH=/tmp/site:$ROOTDIR PYTHONUNBUFFERED=1
mkdir -p ../shared/bench && rm -rf ../shared/bench/ordqa && cp -r "$PIECES/ordqa" ../shared/bench/ordqa
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c "import torch, transformers, sqlalchemy, bm25s, Stemmer, gguf, wordninja, \
bench.gpu_check, engine.training.train; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'cuda', torch.cuda.is_available())" || { echo "imports failed"; exit 4; }
echo "=== bench.gpu_check ($(left) s left)"
timeout "${CHECK_S:-330}" python3 -m bench.gpu_check --questions "${QUESTIONS:-30}" 2>&1 \
  | grep -v "Loading weights" | tee "$OUT_DIR/gpu_check.log"
T=$(( $(left) - 45 ))
echo "=== training (${T} s)"
RUN=assets/training-runs/gpu-go
if [ "$T" -gt 60 ] && [ -f "$PIECES/run/data.pt" ]; then
  cp "$PIECES/run/data.pt" "$RUN/"
  timeout "$T" python3 -m engine.training --config configs/train_gpu_go.toml 2>&1 \
    | tr '\r' '\n' | grep -v "it/s\|Loading weights" | tee "$OUT_DIR/train.log" | tail -20
  # the run's new state, small enough to bring back (the memory cache and data.pt stay)
  (cd "$RUN" && cp parts.safetensors "$OUT_DIR/" && gzip -c optim.pt > "$OUT_DIR/optim.pt.gz" \
    && tar cf "$OUT_DIR/state.tar" $(ls state.json log.jsonl router_best.pt snapshot-stage*.json \
       summary.json final.safetensors 2>/dev/null))
fi
ls -la "$OUT_DIR"
echo "done in $(( $(date +%s) - START )) s"
