#!/usr/bin/env bash
# Source this file (from scripts/test.sh): start a throwaway PostgreSQL cluster for the tests.
#
#   source scripts/postgres.sh && pg_test_start   # exports H2MT_TEST_PG_URL on success
#   pg_test_stop                                  # stops it and removes its folder
#
# Installs Debian's postgresql quietly when running as root and it is missing. The cluster lives
# in a temp folder, listens on a free localhost port and runs as the `postgres` user when we are
# root (PostgreSQL refuses to run as root). Any failure prints one line and returns 0 with
# H2MT_TEST_PG_URL unset: the PostgreSQL tests then skip with their visible reason.

_pg_bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
  return 1
}

_pg_free_port() {
  "${PYTHON:-python3}" - <<'PY'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

pg_test_start() {
  [ -n "${H2MT_TEST_PG_URL:-}" ] && return 0  # the caller brought its own server
  local bindir
  if ! bindir=$(_pg_bindir); then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) \
        >/dev/null 2>&1 || true
    fi
    if ! bindir=$(_pg_bindir); then
      echo "PostgreSQL is not installed (and could not be installed); its tests will be skipped" >&2
      return 0
    fi
  fi
  local run=()
  if [ "$(id -u)" = "0" ]; then
    if ! id postgres >/dev/null 2>&1; then
      useradd --system --no-create-home postgres >/dev/null 2>&1 || true
    fi
    run=(runuser -u postgres --)
  fi
  PG_TEST_DIR=$(mktemp -d /tmp/h2mt-pg.XXXXXX)
  chmod 755 "$PG_TEST_DIR"
  [ "$(id -u)" = "0" ] && chown postgres "$PG_TEST_DIR"
  local port
  port=$(_pg_free_port) || port=54329
  if ! "${run[@]}" "$bindir/initdb" -D "$PG_TEST_DIR/data" -U h2mt --auth=trust -E UTF8 \
        >"$PG_TEST_DIR/initdb.log" 2>&1; then
    echo "PostgreSQL initdb failed (see $PG_TEST_DIR/initdb.log); its tests will be skipped" >&2
    return 0
  fi
  if ! "${run[@]}" "$bindir/pg_ctl" -D "$PG_TEST_DIR/data" -l "$PG_TEST_DIR/server.log" -w \
        -o "-p $port -c listen_addresses=127.0.0.1 -k $PG_TEST_DIR -c fsync=off" start \
        >/dev/null 2>&1; then
    echo "PostgreSQL did not start (see $PG_TEST_DIR/server.log); its tests will be skipped" >&2
    return 0
  fi
  PG_TEST_BINDIR=$bindir
  PG_TEST_RUN=("${run[@]}")
  if ! "$bindir/createdb" -h 127.0.0.1 -p "$port" -U h2mt h2mt_test >/dev/null 2>&1; then
    echo "PostgreSQL: could not create the test database; its tests will be skipped" >&2
    return 0
  fi
  export H2MT_TEST_PG_URL="postgresql+psycopg://h2mt@127.0.0.1:$port/h2mt_test"
  echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') test server on 127.0.0.1:$port" >&2
}

pg_test_stop() {
  [ -n "${PG_TEST_DIR:-}" ] || return 0
  if [ -n "${PG_TEST_BINDIR:-}" ]; then
    "${PG_TEST_RUN[@]}" "$PG_TEST_BINDIR/pg_ctl" -D "$PG_TEST_DIR/data" -m immediate stop \
      >/dev/null 2>&1 || true
  fi
  rm -rf "$PG_TEST_DIR"
  PG_TEST_DIR=
}
