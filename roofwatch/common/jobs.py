"""What the service asks a GPU worker to do: plain data that travels through Celery as JSON.

The service builds these (``service/records``, ``service/flows``) and a worker reads them back
(``workers/tasks.py``); neither side needs the other's code to do it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    """What a worker needs to measure one commit. Plain data: it travels through Celery."""

    run_id: int
    idempotency_key: str
    repository: str
    clone_url: str
    sha: str
    data_dir: str
    suite_timeout_s: float = 1800.0
    output_limit: int = 1_000_000
    # The repository's own switch (set by its operator, never by its pyproject): suites reach
    # the network. Setup always may (it installs things).
    suite_network: bool = False
    # Suites kept outside the repository (TOML text) and what to call them in the run's record;
    # suites_from: a SHA whose suite files every suite with suite_paths runs with (backfill).
    suites_toml: str = ""
    suites_label: str = ""
    suites_from: str = ""
    # Whether this commit's setup may fill (and use) the repository's shared setup cache: only
    # commits the repository's own branches hold. A pull request's head gets caches of its own.
    shared_setup_cache: bool = False


@dataclass(frozen=True)
class ABJob:
    """What a worker needs to run an interleaved A/B of two commits. Plain data: it travels through Celery."""

    comparison_id: int
    idempotency_key: str
    repository: str
    clone_url: str
    base_sha: str
    head_sha: str
    data_dir: str
    min_rounds: int  # rounds before a verdict may be given (the service's ab_min_rounds)
    max_rounds: int = 10
    # Whether these were asked for (``roofwatch compare --min-rounds/--max-rounds``) rather than the
    # service's defaults: an asked-for count is kept over the repository's ab_min_rounds/ab_max_rounds,
    # and an asked-for cap is measured up to for every undecided benchmark, however many rounds the
    # first few noisy ones project it to need.
    min_rounds_asked: bool = False
    max_rounds_asked: bool = False
    suite_timeout_s: float = 1800.0
    output_limit: int = 1_000_000
    suite_network: bool = False  # the repository's operator switch, as on Job
    run_id: int | None = None  # the pull-request run this comparison decides, marked started with it
    # As on Job: the repository's stored suites (TOML text) and their label; a backfill REF's SHA.
    suites_toml: str = ""
    suites_label: str = ""
    suites_from: str = ""
    # Wall time for rounds after the first (seconds): no round is started that would end past it.
    budget_s: float | None = None
    # A confirmation's candidates (the base's suite::name): only these are measured and decided.
    only: tuple[str, ...] = ()
    # What rounds after the first measure: "open", the benchmarks still undecided, or "all" of them.
    later_rounds: str = "open"
