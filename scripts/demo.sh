#!/usr/bin/env bash
# What roofwatch catches, in a few minutes on the embedded default (SQLite, no broker): write the
# demo kernel repository (a slowdown, a correctness bug fixed later, a speedup, a pull-request
# branch that regresses one kernel), measure its history, compare the pull request with main,
# then serve the dashboard. `./scripts/demo.sh --self` measures this repository's own recent
# commits instead (ROOFWATCH_DEMO_COMMITS of them, default 3; tens of minutes on a CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
# Pytest plugins installed beside roofwatch load in every suite process the demo starts and no
# demo suite needs them: schemathesis and hypothesis (the test tools bootstrap.sh installs) cost
# about 2 s of CPU each time, anyio and platformdirs another 0.35 s.
export ROOFWATCH_SUITE_PYTEST_ADDOPTS=${ROOFWATCH_SUITE_PYTEST_ADDOPTS:-"-p no:schemathesis -p no:hypothesispytest -p no:anyio -p no:platformdirs"}

PORT=${ROOFWATCH_PORT:-8000}
URL="http://127.0.0.1:${PORT}/"
# Every link the CLI prints (compare's page, a run's) points at the dashboard this script serves.
export ROOFWATCH_PUBLIC_URL=${ROOFWATCH_PUBLIC_URL:-"http://127.0.0.1:${PORT}"}
serve() {
    if command -v xdg-open >/dev/null 2>&1 && [ -n "${DISPLAY:-}" ]; then
        (sleep 2 && xdg-open "$URL" >/dev/null 2>&1) &
    fi
    exec .venv/bin/roofwatch serve --host 127.0.0.1 --port "$PORT"
}

if [ "${1:-}" = "--self" ]; then
    # A candidate change is confirmed by an interleaved A/B; on a CPU the interpreted Triton
    # benchmarks make each round slow, so rounds are capped lower.
    export ROOFWATCH_AB_MAX_ROUNDS=${ROOFWATCH_AB_MAX_ROUNDS:-4}
    .venv/bin/roofwatch run --repo . --last "${ROOFWATCH_DEMO_COMMITS:-3}" || true  # a failing commit is a result
    .venv/bin/roofwatch regressions || true
    serve
fi

DEMO=$(realpath -m "${ROOFWATCH_DEMO_DIR:-.demo}")
# The demo keeps its own database and mirrors, apart from what roofwatch tracks for you.
export ROOFWATCH_DATA_DIR=${ROOFWATCH_DATA_DIR:-$DEMO/data}
# The dashboard's triage buttons need the server's API token: the demo makes one, once.
mkdir -p "$DEMO"
[ -s "$DEMO/api-token" ] || .venv/bin/python -c "import secrets; print(secrets.token_urlsafe(24))" > "$DEMO/api-token"
export ROOFWATCH_API_TOKEN=${ROOFWATCH_API_TOKEN:-$(cat "$DEMO/api-token")}
REPO="$DEMO/kernels"
started=$SECONDS
[ -d "$REPO/.git" ] || .venv/bin/roofwatch demo init "$REPO"
# Commits already measured are skipped, so running the demo again goes straight to the dashboard.
.venv/bin/roofwatch run --repo "$REPO" --last 15 || true              # the buggy commits fail: exit 1
.venv/bin/roofwatch compare main layernorm-two-pass --repo "$REPO" || true  # a regression: exit 1
.venv/bin/roofwatch regressions --repo "$REPO" || true
cat <<DONE
demo measured in $((SECONDS - started)) s.
The demo keeps its own database: in another shell, to use the CLI on it,
  export ROOFWATCH_DATA_DIR=$ROOFWATCH_DATA_DIR
  .venv/bin/roofwatch regressions --repo $REPO      # the id column is what triage takes
  .venv/bin/roofwatch triage ID acknowledged --note "seen"
Dashboard: $URL (the pull request's comparison is listed there, under "Recent comparisons")
Triage buttons on ${URL}changes: paste the API token $ROOFWATCH_API_TOKEN
DONE
serve
