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
# One pytest worker per core (at most four; H2MT_TEST_WORKERS overrides, 0 runs in one process),
# each with its share of the cores for torch, so two workers never fight over one core's threads.
# A test's slow parts (a browser waiting, a subprocess starting) then overlap with another's work.
# loadgroup hands the tests out one by one as workers free up, and the tests of one xdist_group
# (those sharing a session fixture too costly to build twice: tests/conftest.py) to one worker.
cores=$(nproc 2>/dev/null || echo 1)
workers=${H2MT_TEST_WORKERS:-$(( cores < 4 ? cores : 4 ))}
xdist=()
if [ "$workers" -gt 1 ]; then
  xdist=(-n "$workers" --dist loadgroup)
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( cores / workers > 0 ? cores / workers : 1 ))}
fi
rc=0
.venv/bin/python -m pytest "${xdist[@]}" "$@" || rc=$?
exit $rc
