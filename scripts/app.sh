#!/usr/bin/env bash
# Run the app in the browser at http://127.0.0.1:7860 (installs what it needs first).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python app.py "$@"
