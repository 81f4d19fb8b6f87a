#!/usr/bin/env bash
# roofwatch's main job on the embedded default (SQLite, no broker): measure this
# repository's recent commits, then serve the dashboard that shows them.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh

COMMITS=${ROOFWATCH_DEMO_COMMITS:-3}
PORT=${ROOFWATCH_PORT:-8000}
# A candidate change is confirmed by an interleaved A/B before it is reported; on a CPU the
# interpreted Triton benchmarks make each round slow, so the demo caps the rounds lower.
export ROOFWATCH_AB_MAX_ROUNDS=${ROOFWATCH_AB_MAX_ROUNDS:-4}
# A failing commit is a result, not a reason to stop before the dashboard.
.venv/bin/roofwatch run --repo . --last "$COMMITS" || true
.venv/bin/roofwatch regressions || true
URL="http://127.0.0.1:${PORT}/"
if command -v xdg-open >/dev/null 2>&1 && [ -n "${DISPLAY:-}" ]; then
    (sleep 2 && xdg-open "$URL" >/dev/null 2>&1) &
fi
exec .venv/bin/roofwatch serve --host 127.0.0.1 --port "$PORT"
