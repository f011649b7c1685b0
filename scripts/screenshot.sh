#!/usr/bin/env bash
# Screenshot of the asset graph in the Dagster UI, by headless Chromium: docs/asset-graph.png
#
#   scripts/screenshot.sh [OUT.png]
#   SCREENSHOT_PATH="/assets/attribution?partition=<key>" scripts/screenshot.sh docs/x.png
#
# Starts dagster-webserver on a free loopback port with a throwaway DAGSTER_HOME in which
# the bundled samples were attributed (so the graph shows materialized partitions), takes
# the screenshot, and stops what it started. Needs `chromium` (apt-get install -y chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs/asset-graph.png}
VENV_BIN=${VENV_BIN:-.venv/bin}
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$CHROMIUM" ] || { echo "screenshot: chromium not found (apt-get install -y chromium)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/attribution-screenshot.XXXXXX)
PID=""
cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill "$PID"; for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

export DAGSTER_HOME="$WORK/home" ATTRIBUTION_SINK_URL="sqlite:///$WORK/results.db"
export ATTRIBUTION_CASE_ROOT="${CASES:-$PWD/samples}" ATTRIBUTION_SENSOR_ENABLED=0
mkdir -p "$DAGSTER_HOME"
printf 'telemetry:\n  enabled: false\n' > "$DAGSTER_HOME/dagster.yaml"

# Attribute the samples into this instance, so partitions show as materialized.
"$VENV_BIN/python" - <<PY
from pathlib import Path
import os
from attribution_dagster.local_run import run_cases_report
r = run_cases_report(Path(os.environ["ATTRIBUTION_CASE_ROOT"]), os.environ["ATTRIBUTION_SINK_URL"],
                     instance_dir=Path(os.environ["DAGSTER_HOME"]))
print(f"screenshot: {len(r.results)} jobs attributed into the instance")
PY

PORT=$("$VENV_BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$VENV_BIN/dagster-webserver" -h 127.0.0.1 -p "$PORT" -w workspace.yaml </dev/null >"$WORK/webserver.log" 2>&1 &
PID=$!
for _ in $(seq 1 240); do
  curl -sf "http://127.0.0.1:$PORT/server_info" >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || { tail -30 "$WORK/webserver.log" >&2; exit 1; }
  sleep 0.5
done

# The UI greets a new local instance with a community dialog; mark it seen.
curl -sf -X POST -H 'Content-Type: application/json' --data '{"query":"mutation { setNuxSeen }"}' \
  "http://127.0.0.1:$PORT/graphql" >/dev/null
URL="http://127.0.0.1:$PORT${SCREENSHOT_PATH:-/locations/attribution_dagster/asset-groups/attribution}"
"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$WORK/chromium" --hide-scrollbars --window-size=1600,900 \
  --virtual-time-budget=20000 --screenshot="$PWD/$OUT" "$URL" >"$WORK/chromium.log" 2>&1 \
  || { tail -20 "$WORK/chromium.log" >&2; exit 1; }
echo "screenshot: wrote $OUT from $URL"
