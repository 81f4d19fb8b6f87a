#!/usr/bin/env bash
# Prepare what a GPU host without network needs to run `python -m bench.gpu_session`, in the
# git-ignored folders .whl/ and .gpuhost/ of a checkout (default: this one):
#
#   .whl/                      wheels of roofwatch's dependencies that a CUDA image lacks
#                              (CPython 3.12, manylinux x86-64; never torch, triton or numpy)
#   .gpuhost/bin/redis-server  this host's Redis, with .gpuhost/lib/ the shared libraries it
#                              needs beyond glibc and libstdc++ (it needs glibc >= 2.34)
#   .gpuhost/kernels-before/   rmsnorm.py and layernorm.py as they were before the latest
#                              change of the RMSNorm kernels (or at BEFORE_REV), for
#                              bench.norm_backward --before
#
# Usage: scripts/gpu_host_prepare.sh [CHECKOUT]; then carry .whl and .gpuhost. Needs pip and
# network here, and redis-server installed here (apt-get install redis-server).
set -euo pipefail
checkout=$(cd "${1:-$(dirname "$0")/..}" && pwd)
cd "$checkout"

# Worktrees share one exclude file: the common git dir's.
exclude="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
for ignored in /.whl/ /.gpuhost/; do
    grep -qxF "$ignored" "$exclude" 2>/dev/null || echo "$ignored" >> "$exclude"
done

# What roofwatch's service, workers and dashboard import that a CUDA image with torch, triton,
# numpy, scipy, httpx, jinja2, typer, rich, pytest(-benchmark, -xdist), nvidia-ml-py, psutil,
# pyyaml and requests does not have; the versions this project is tested with. Recent typer
# needs neither click nor, before 0.26, pydantic, so both come along (Celery's CLI needs click).
WHEELS=(
    "alembic==1.20.1" "amqp==5.4.2" "annotated-doc==0.0.7" "annotated-types==0.8.0" "billiard==4.3.2"
    "celery==5.7.0" "click==8.5.1" "click-didyoumean==0.3.1" "click-plugins==1.1.1.2" "click-repl==0.4.1"
    "fastapi==0.165.0" "fastapi-offline==1.7.7" "greenlet==3.5.6" "ijson==3.6.0" "kombu==5.7.0"
    "Mako==1.4.3" "narwhals==2.29.0" "plotly==7.1.0" "prometheus-client==0.26.0"
    "prompt-toolkit==3.0.53" "pydantic==2.14.4" "pydantic-core==2.50.5" "pydantic-settings==2.16.3"
    "PyJWT==2.15.1" "python-dateutil==2.9.0.post0" "python-dotenv==1.2.4" "python-json-logger==4.2.0"
    "redis==8.1.0" "six==1.17.0" "SQLAlchemy==2.1.9" "sqlmodel==0.0.50" "starlette==1.10.0"
    "tenacity==9.2.1" "typing-inspection==0.4.5" "tzlocal==5.4.5" "uvicorn==0.54.0"
    "vine==5.1.0" "wcwidth==0.9.4" "opentelemetry-api==1.45.2"
)
mkdir -p .whl
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "${WHEELS[@]}"

mkdir -p .gpuhost/bin .gpuhost/lib .gpuhost/kernels-before
cp -L "$(command -v redis-server)" .gpuhost/bin/redis-server
ldd "$(command -v redis-server)" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so.*|libm.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) ;;  # the host's own
        *) cp -L "$lib" .gpuhost/lib/ ;;
    esac
done

before=${BEFORE_REV:-$(git log -n1 --format=%H -- kernels/rmsnorm.py)^}
for name in rmsnorm layernorm; do
    git show "$before:kernels/$name.py" > ".gpuhost/kernels-before/$name.py"
done
echo "$before" > .gpuhost/kernels-before/REVISION
du -sh .whl .gpuhost
