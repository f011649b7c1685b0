#!/usr/bin/env bash
# Start / stop a throwaway Prometheus holding exactly the bundled cases' metric samples
# (recipe: real-services.md section 1). No scraping: the TSDB is backfilled from an
# OpenMetrics fixture that scripts/prom_fixture.py writes from samples/*/metrics and
# tests/heldout/*/metrics (each series labelled attribution_case="<case>").
#
#   scripts/ci-prometheus.sh start   # prints ONLY `export ATTRIBUTION_TEST_PROM_URL=...`
#   scripts/ci-prometheus.sh url     # prints the URL of a running server
#   scripts/ci-prometheus.sh stop    # idempotent; stops only this checkout's server
#
# `.ci/run` evals the output of `start`, so every message goes to stderr and every daemon's
# stdio is detached. The blocks are rebuilt into a fresh directory on every start (a second
# create-blocks-from into the same dir duplicates blocks, and Prometheus writes wal/ etc.
# into its data dir). Retention is 100y: retention counts back from the newest block and
# would DELETE older fixture blocks from disk.
#
# Environment: PROM_ROOT (default /tmp/attribution-prom-ci-<checkout hash>), PROM_PORT
# (default: first free port from 19090), PYTHON (default .venv/bin/python, else python3).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd -P)
PROM_ROOT=${PROM_ROOT:-/tmp/attribution-prom-ci-$(printf '%s' "$REPO" | cksum | cut -d' ' -f1)}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x "$REPO/.venv/bin/python" ]; then PY="$REPO/.venv/bin/python"; else PY=python3; fi
fi

log() { echo "ci-prometheus: $*" >&2; }
alive() { [ -n "${1:-}" ] && [ -n "$(ps -o stat= -p "$1" 2>/dev/null | grep -v Z)" ]; }
pid() { cat "$PROM_ROOT/prometheus.pid" 2>/dev/null || true; }
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
url() { echo "http://127.0.0.1:$(cat "$PROM_ROOT/port")"; }
ready() {  # curl when present, else the Python that wrote the fixture
  if command -v curl >/dev/null; then curl -sf "$1/-/ready" >/dev/null 2>&1
  else "$PY" -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1] + "/-/ready", timeout=2)' "$1" >/dev/null 2>&1
  fi
}

pick_port() {
  if [ -n "${PROM_PORT:-}" ]; then echo "$PROM_PORT"; return; fi
  local p
  for p in $(seq 19090 19189); do port_busy "$p" || { echo "$p"; return; }; done
  log "no free port in 19090-19189 (set PROM_PORT)"; exit 1
}

stop() {
  local p; p=$(pid)
  if alive "$p"; then
    kill "$p"
    for _ in $(seq 1 100); do alive "$p" || break; sleep 0.1; done
    alive "$p" && kill -9 "$p" 2>/dev/null || true
    log "prometheus stopped ($PROM_ROOT)"
  fi
  rm -f "$PROM_ROOT/prometheus.pid"
}

start() {
  if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
    log "installing prometheus (apt)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus \
      </dev/null >&2
  fi
  stop
  rm -rf "$PROM_ROOT"; mkdir -p "$PROM_ROOT"
  "$PY" "$REPO/scripts/prom_fixture.py" "$PROM_ROOT/fixture.om" </dev/null >&2
  promtool tsdb create-blocks-from openmetrics -q "$PROM_ROOT/fixture.om" "$PROM_ROOT/data" \
    </dev/null >"$PROM_ROOT/promtool.log" 2>&1 || { cat "$PROM_ROOT/promtool.log" >&2; exit 1; }
  printf 'global:\n  scrape_interval: 1m\nscrape_configs: []\n' >"$PROM_ROOT/prometheus.yml"
  local port; port=$(pick_port); echo "$port" >"$PROM_ROOT/port"
  prometheus --config.file="$PROM_ROOT/prometheus.yml" --storage.tsdb.path="$PROM_ROOT/data" \
    --storage.tsdb.retention.time=100y --web.listen-address="127.0.0.1:$port" \
    </dev/null >"$PROM_ROOT/prometheus.log" 2>&1 &
  echo $! >"$PROM_ROOT/prometheus.pid"
  for _ in $(seq 1 300); do
    if ready "http://127.0.0.1:$port"; then
      log "prometheus ready on 127.0.0.1:$port ($PROM_ROOT)"
      echo "export ATTRIBUTION_TEST_PROM_URL=$(url)"
      return 0
    fi
    alive "$(pid)" || break
    sleep 0.1
  done
  log "prometheus did not become ready; last log lines:"; tail -20 "$PROM_ROOT/prometheus.log" >&2
  stop; exit 1
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  url) url ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
