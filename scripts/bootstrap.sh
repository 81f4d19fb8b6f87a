#!/usr/bin/env bash
# Create .venv and install roofwatch with everything its suites and tests need.
# Idempotent: a second call only installs what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
# A GPU host brings its own torch + triton; elsewhere pin the CPU build so pip never
# pulls the newest torch with gigabytes of CUDA wheels.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    echo "bootstrap: installing the CPU build of torch into .venv (the first time only; minutes)" >&2
    .venv/bin/pip install --quiet "torch==2.13.0"
fi
# Quiet when nothing is left to do; a fresh .venv says what it is doing (several minutes on two cores).
if ! .venv/bin/python -c "import roofwatch, playwright, schemathesis" 2>/dev/null; then
    echo "bootstrap: installing roofwatch and its test tools into .venv (the first time only; minutes)" >&2
fi
.venv/bin/pip install --quiet -e ".[test]"
