#!/usr/bin/env bash
# Start / stop a throwaway PostgreSQL 15 server for the tests (recipe: real-services.md).
#
#   scripts/ci-services.sh start    # idempotent; prints the SQLAlchemy URL on stdout
#   scripts/ci-services.sh url      # prints the URL (no start)
#   scripts/ci-services.sh stop     # idempotent
#
# Use in .ci/run:
#   export ATTRIBUTION_TEST_PG_URL="$(scripts/ci-services.sh start)"
#   trap 'scripts/ci-services.sh stop' EXIT
#
# Environment: PG_ROOT (default /tmp/attribution-pg-ci), PG_PORT (default 55432),
# PG_DB (default attrib_test). Logs go to $PG_ROOT/postgres.log; messages to stderr.
set -euo pipefail
PG_ROOT=${PG_ROOT:-/tmp/attribution-pg-ci}
PG_PORT=${PG_PORT:-55432}
PG_DB=${PG_DB:-attrib_test}
BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
URL="postgresql+psycopg://postgres@127.0.0.1:${PG_PORT}/${PG_DB}"

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

running() { [ -f "$PG_ROOT/data/postmaster.pid" ] && as_pg "$BIN/pg_ctl" -D "$PG_ROOT/data" status >/dev/null 2>&1; }

start() {
  if [ ! -x "$BIN/initdb" ]; then
    echo "ci-services: installing postgresql-15" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
  fi
  if ! running; then
    if [ ! -f "$PG_ROOT/data/PG_VERSION" ]; then
      rm -rf "$PG_ROOT"; mkdir -p "$PG_ROOT"
      [ "$(id -u)" = 0 ] && chown postgres:postgres "$PG_ROOT"
      as_pg "$BIN/initdb" -D "$PG_ROOT/data" --auth=trust --username=postgres -E UTF8 \
        --no-locale -N >"$PG_ROOT/initdb.log" 2>&1 || { cat "$PG_ROOT/initdb.log" >&2; exit 1; }
    fi
    rm -f "$PG_ROOT/data/postmaster.pid"  # stale after a crash; pg_ctl status said stopped
    as_pg "$BIN/pg_ctl" -D "$PG_ROOT/data" -l "$PG_ROOT/postgres.log" -w -t 30 start \
      -o "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=$PG_ROOT -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      </dev/null >/dev/null 2>&1 || { tail -20 "$PG_ROOT/postgres.log" >&2; exit 1; }
  fi
  if ! as_pg "$BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'" postgres | grep -q 1; then
    as_pg "$BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres "$PG_DB"
  fi
  echo "$URL"
}

stop() {
  if running; then
    as_pg "$BIN/pg_ctl" -D "$PG_ROOT/data" -m fast -w stop >/dev/null
  fi
  echo "ci-services: postgres stopped" >&2
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
