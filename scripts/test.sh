#!/usr/bin/env bash
# Install what the tests need (Python packages, Debian's chromium for browser tests)
# and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh

if ! command -v chromium >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    if command -v apt-get >/dev/null 2>&1; then
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
    else
        echo "chromium is not installed and apt-get is unavailable: browser tests will skip" >&2
    fi
fi

exec .venv/bin/python -m pytest "$@"
