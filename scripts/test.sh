#!/usr/bin/env bash
# Run the test suite (installs what it needs first). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The browser tests drive Debian's Chromium (the browser automation library cannot download its
# own browser here); install it once when missing and allowed to (root). Quiet, idempotent.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 \
    || echo "chromium could not be installed; the browser tests will be skipped" >&2
fi
# The storage, concurrency and ingest tests also run against a throwaway PostgreSQL server
# (H2MT_TEST_PG_URL); without one they skip and say why.
# shellcheck source=scripts/postgres.sh
source scripts/postgres.sh
PYTHON=.venv/bin/python pg_test_start
trap pg_test_stop EXIT
rc=0
.venv/bin/python -m pytest "$@" || rc=$?
exit $rc
