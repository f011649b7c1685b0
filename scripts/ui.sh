#!/usr/bin/env bash
# The Dagster UI (webserver + daemon, so the case-directory sensor runs) on 127.0.0.1,
# with a persistent instance under the repository: .dagster/
#
#   scripts/ui.sh [extra `dagster dev` args, e.g. -p 3001]
#
# Configure with ATTRIBUTION_* variables (docs/dagster.md), e.g.
#   ATTRIBUTION_CASE_ROOT=/data/gpu-cases scripts/ui.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV_BIN=${VENV_BIN:-.venv/bin}
export DAGSTER_HOME="$PWD/.dagster"
mkdir -p "$DAGSTER_HOME"
if [ ! -f "$DAGSTER_HOME/dagster.yaml" ]; then
  printf '# Local instance for `make ui` (SQLite under .dagster/). Production: dagster.yaml.example\ntelemetry:\n  enabled: false\n' \
    > "$DAGSTER_HOME/dagster.yaml"
fi
exec "$VENV_BIN/dagster" dev -h 127.0.0.1 -w workspace.yaml "$@"
