#!/usr/bin/env bash
# The Dagster UI (webserver + daemon, so the case-directory sensor runs) on 127.0.0.1,
# with a persistent instance under the repository: .dagster/
#
#   scripts/ui.sh [extra `dagster dev` args]
#   PORT=3001 scripts/ui.sh     (or `make ui PORT=3001`)
#
# PORT (default 3000) is where it listens; when that port is taken, the next free one
# above it is used and printed, rather than failing on a busy port.
#
# Configure with ATTRIBUTION_* variables (docs/dagster.md), e.g.
#   ATTRIBUTION_CASE_ROOT=/data/gpu-cases scripts/ui.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV_BIN=${VENV_BIN:-.venv/bin}
export DAGSTER_HOME="$PWD/.dagster"
mkdir -p "$DAGSTER_HOME"
# The port: PORT, or the next free one above it (up to 100 tries).
free_port() {
  "$VENV_BIN/python" - "$1" <<'PY'
import socket, sys
start = int(sys.argv[1])
for port in range(start, start + 100):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(port)
        sys.exit(0)
sys.exit(f"no free port in {start}-{start + 99}")
PY
}
WANT=${PORT:-3000}
case "$WANT" in (''|*[!0-9]*) echo "PORT must be a number, got '$WANT'" >&2; exit 2;; esac
PORT=$(free_port "$WANT")
if [ "$PORT" != "$WANT" ]; then
  echo "port $WANT is taken; using $PORT" >&2
fi
echo "Dagster UI: http://127.0.0.1:$PORT" >&2
if [ "${UI_DRY_RUN:-}" = 1 ]; then echo "$PORT"; exit 0; fi  # for tests: the port only
# A new instance: no telemetry, batched event writes (attribution_dagster/instance/storage.py)
"$VENV_BIN/python" -c 'import sys, pathlib
from attribution_dagster.cli.local_run import write_instance_yaml
write_instance_yaml(pathlib.Path(sys.argv[1]))' "$DAGSTER_HOME"
# The instance's own storage (BatchedSqliteEventLogStorage) answers one planned event per
# asset per run and turns on batched event writes in every process that opens it
# (attribution_dagster/instance/tuning.py): nothing to export here.
# `dagster dev` maps SIGTERM to whatever SIGINT does. A shell starts background jobs
# (`make ui &`, nohup, CI steps) with SIGINT ignored, and that is inherited: SIGTERM would
# then be ignored too and `kill` would leave the webserver, daemon and code servers running.
# Restore the default SIGINT before exec'ing, so Ctrl-C and SIGTERM both shut it all down.
exec "$VENV_BIN/python" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$VENV_BIN/dagster" dev -h 127.0.0.1 -p "$PORT" -w workspace.yaml "$@"
