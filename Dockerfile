# roofwatch: one image, built twice from this file.
#
#   GPU workers (the default build: torch with CUDA wheels)
#     docker build -t roofwatch:cuda .
#   api, cpu-worker, beat (no kernel ever runs there: CPU-only torch, several GB smaller)
#     docker build -t roofwatch:cpu --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu .
#
# docker-compose.yml builds both. The CUDA wheels carry their own CUDA runtime, so the base
# image needs no CUDA; a GPU host needs only the NVIDIA driver and the NVIDIA Container Toolkit.
FROM python:3.11-slim

# torch 2.13.0 (the version scripts/bootstrap.sh pins) built for CUDA 13.0, which needs an NVIDIA
# driver >= 580. With an older driver (>= 570) build with
#   --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu130
ARG TORCH_SPEC=torch==2.13.0

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    ROOFWATCH_DATA_DIR=/var/lib/roofwatch

# git: mirrors and worktrees. gcc + libc6-dev: Triton compiles its small C launcher at run time.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*

# Two unprivileged users, neither with a login shell:
#  - roofwatch runs the api, the cpu worker and beat and owns the data directory;
#  - suite runs the measured code (ROOFWATCH_SUITE_USER): a GPU worker runs as root only to
#    start suites as this user, who may write only what the worker hands to a run (its worktree,
#    scratch directory and per-repository home), its own home and /tmp.
RUN useradd --system --user-group --create-home --home-dir /home/suite --shell /usr/sbin/nologin suite \
 && chmod 0700 /home/suite \
 && useradd --system --user-group --no-create-home --home-dir /var/lib/roofwatch --shell /usr/sbin/nologin roofwatch \
 && install -d -o roofwatch -g roofwatch -m 0755 /var/lib/roofwatch

# torch first, in its own layer: it is by far the largest and changes least.
RUN pip install --index-url "${TORCH_INDEX_URL}" "${TORCH_SPEC}"

COPY . /opt/roofwatch/src
# The interpreter and site-packages live under /usr/local; suites started as `suite` import
# torch, triton and pytest from there, so all of it must be readable by all (checked below).
RUN pip install /opt/roofwatch/src \
 && chmod -R a+rX /usr/local/lib/python3.11 /usr/local/bin \
 && runuser -u suite -- python -c "import torch, triton, pytest, pytest_benchmark"

WORKDIR /var/lib/roofwatch
USER roofwatch
ENTRYPOINT ["roofwatch"]
CMD ["--help"]
