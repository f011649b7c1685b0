#!/usr/bin/env bash
# Start / stop a throwaway PostgreSQL 15 server for the tests (recipe: real-services.md).
#
#   scripts/ci-services.sh start    # idempotent; prints the SQLAlchemy URL on stdout
#   scripts/ci-services.sh url      # prints the URL (no start)
#   scripts/ci-services.sh stop     # idempotent; stops only this checkout's server
#
# Use in .ci/run:
#   export ATTRIBUTION_TEST_PG_URL="$(scripts/ci-services.sh start)"
#   trap 'scripts/ci-services.sh stop' EXIT
#
# Each checkout gets its own server (data dir keyed by the checkout's path), so two clones
# on one machine neither share a database nor stop each other's server. The port is PG_PORT
# if set, else the first free one from 55432; it is kept in $PG_ROOT/port for `url`.
#
# Environment: PG_ROOT (default /tmp/attribution-pg-ci-<checkout hash>), PG_PORT,
# PG_DB (default attrib_test). Logs go to $PG_ROOT/postgres.log; messages to stderr.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd -P)
PG_ROOT=${PG_ROOT:-/tmp/attribution-pg-ci-$(printf '%s' "$REPO" | cksum | cut -d' ' -f1)}
PG_DB=${PG_DB:-attrib_test}
BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

running() { [ -f "$PG_ROOT/data/postmaster.pid" ] && as_pg "$BIN/pg_ctl" -D "$PG_ROOT/data" status >/dev/null 2>&1; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

saved_port() { cat "$PG_ROOT/port" 2>/dev/null || echo "${PG_PORT:-55432}"; }

pick_port() {
  if [ -n "${PG_PORT:-}" ]; then echo "$PG_PORT"; return; fi
  local p
  for p in $(seq 55432 55531); do
    port_busy "$p" || { echo "$p"; return; }
  done
  echo "ci-services: no free port in 55432-55531 (set PG_PORT)" >&2; exit 1
}

url() { echo "postgresql+psycopg://postgres@127.0.0.1:$(saved_port)/${PG_DB}"; }

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
    local port; port=$(pick_port)
    [ "$port" = 55432 ] || echo "ci-services: port 55432 is taken, using $port" >&2
    echo "$port" >"$PG_ROOT/port"
    rm -f "$PG_ROOT/data/postmaster.pid"  # stale after a crash; pg_ctl status said stopped
    as_pg "$BIN/pg_ctl" -D "$PG_ROOT/data" -l "$PG_ROOT/postgres.log" -w -t 30 start \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$PG_ROOT -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      </dev/null >/dev/null 2>&1 || { tail -20 "$PG_ROOT/postgres.log" >&2; exit 1; }
    echo "ci-services: postgres started on 127.0.0.1:$port ($PG_ROOT)" >&2
  fi
  local port; port=$(saved_port)
  if ! as_pg "$BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'" postgres | grep -q 1; then
    as_pg "$BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres "$PG_DB"
  fi
  url
}

stop() {
  if running; then
    as_pg "$BIN/pg_ctl" -D "$PG_ROOT/data" -m fast -w stop >/dev/null
    echo "ci-services: postgres stopped ($PG_ROOT)" >&2
  fi
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  url) url ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
