#!/usr/bin/env bash
# Install what the tests need (Python packages, Debian's chromium for browser tests and
# bubblewrap for the sandbox) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages install while pip fills .venv: pip spends most of its time on one core, so
# on a fresh two-core machine the two installs take about as long as the longer of them.
# Suites run in bubblewrap (the hostile-repository tests fail loudly without it); the browser
# tests need chromium.
debian=()
command -v chromium >/dev/null 2>&1 || debian+=(chromium)
command -v bwrap >/dev/null 2>&1 || debian+=(bubblewrap)
apt_pid=""
if [ ${#debian[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1; then
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO="sudo"
        ( $SUDO apt-get update -qq \
            && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${debian[@]}" >/dev/null ) &
        apt_pid=$!
    else
        echo "apt-get is unavailable, so ${debian[*]} cannot be installed: browser or sandbox tests will skip or fail" >&2
    fi
fi

./scripts/bootstrap.sh
# tests/project/test_compose.py validates docker-compose.yml against the Compose Specification schema,
# which ships inside this wheel; it is downloaded once (offline, those tests skip; under CI they fail).
if ! compgen -G ".cache/compose-spec/docker_compose-*.whl" >/dev/null; then
    .venv/bin/pip download --no-deps --only-binary=:all: docker-compose==1.29.2 -d .cache/compose-spec -q \
        || echo "could not download docker-compose==1.29.2: tests/project/test_compose.py cannot validate the schema" >&2
fi

if [ -n "$apt_pid" ] && ! wait "$apt_pid"; then
    echo "apt-get could not install ${debian[*]}" >&2
    exit 1
fi

# One worker per core plus one (pytest-xdist): many end-to-end tests spend their time waiting on
# a suite's sleeps, a subprocess or a server, not on a core. Idle workers steal queued tests, so
# a long test started late does not leave the others waiting. The 15 slowest tests are printed
# at the end so slow ones are seen.
WORKERS=${ROOFWATCH_TEST_WORKERS:-$(( $(nproc) + 1 ))}
exec .venv/bin/python -m pytest -n "$WORKERS" --dist worksteal --durations=15 "$@"
