"""Time every dashboard page and JSON endpoint on a seeded database, against a 300 ms p95 target.

    python -m bench.dashboard.pages --database-url postgresql://postgres@127.0.0.1:5432/roofwatch_scale \\
        [--requests 30] [--budget 60] [--markdown FILE]

The real app (``roofwatch.service.api.app.create_app``) is served by uvicorn on loopback in a thread and
requested over HTTP with keep-alive, one request at a time, so a time is what one user's browser
would wait for the HTML or JSON: routing, queries, figure building, templating and the transfer.
The URLs come from the data (a benchmark with changes, the newest run, a comparison with a
verdict, the device class, filter combinations). Each page gets two warm-up requests, then
``--requests`` timed ones; a page slower than ``--budget`` seconds in all is cut short and
reported on the requests it got. A route that does not exist (yet) is reported as missing.

Exit status 1 when a page misses the target or does not answer 200.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlencode

import httpx
import numpy as np
import uvicorn
from fastapi import FastAPI
from rich.console import Console
from rich.table import Table
from sqlalchemy import func
from sqlmodel import Session, col, select
from starlette.routing import Match

from roofwatch.service.core.models import Benchmark, Change, Comparison, Repository, Run

TARGET_MS = 300.0
WARMUPS = 2


@dataclass(frozen=True)
class Page:
    label: str
    url: str

    @property
    def path(self) -> str:
        return self.url.split("?", 1)[0]


@dataclass(frozen=True)
class Timing:
    page: Page
    status: str  # pass | FAIL | missing | error <code>
    times_ms: tuple[float, ...] = ()
    size: int = 0

    def quantile(self, q: float) -> float:
        return float(np.percentile(self.times_ms, q)) if self.times_ms else float("nan")

    @property
    def failed(self) -> bool:
        return self.status not in ("pass", "missing")


def _query(*pairs: tuple[str, str], **params: str) -> str:
    """``?a=1&b=2``; ``pairs`` for parameters that repeat (``state=new&state=acknowledged``)."""
    return "?" + urlencode([*pairs, *params.items()])


def discover(session: Session) -> list[Page]:
    """The URLs worth timing in this database: the heaviest of each kind, and filtered views."""
    repo = session.exec(select(Repository.full_name).order_by(col(Repository.id))).first() or ""
    # The series with the most changes: the most markers, and a step to show.
    benchmark_id = session.exec(
        select(Change.benchmark_id).where(col(Change.benchmark_id).is_not(None))
        .group_by(col(Change.benchmark_id)).order_by(func.count().desc(), col(Change.benchmark_id))).first() \
        or session.exec(select(Benchmark.id).order_by(col(Benchmark.id))).first()
    bench = session.get(Benchmark, benchmark_id) if benchmark_id else None
    run_id = session.exec(select(func.max(Run.id))).one()
    failed_run = session.exec(select(func.max(Run.id)).where(Run.state == "failed")).one()
    comparison_id = session.exec(select(Comparison.id).order_by(
        col(Comparison.verdict) != "regression", col(Comparison.id))).first()
    device, dtype = (bench.device_class, bench.dtype) if bench else ("", "")
    kernel = bench.name.split("[", 1)[0].removeprefix("test_") if bench else ""
    pages = [
        Page("overview", "/"),
        Page("overview, repo", "/" + _query(repo=repo)),
        Page("overview, kernel+dtype", "/" + _query(kernel=kernel, dtype=dtype)),
        Page("benchmark", f"/benchmarks/{benchmark_id}"),
        Page("benchmark + baselines", f"/benchmarks/{benchmark_id}" + _query(("impl", "torch"), ("impl", "torch.compile"))),
        Page("roofline", "/roofline"),
        Page("roofline, device", "/roofline" + _query(device=device)),
        Page("roofline, device+dtype", "/roofline" + _query(device=device, dtype=dtype)),
        Page("changes", "/changes"),
        Page("changes, open regressions", "/changes" + _query(("state", "new"), ("state", "acknowledged"),
                                                             kind="perf-regression")),
        Page("compare", f"/compare/{comparison_id}"),
        Page("run", f"/runs/{run_id}"),
    ]
    if failed_run:
        pages.append(Page("run, failed", f"/runs/{failed_run}"))
    return pages + [
        Page("api runs", "/api/runs"),
        Page("api runs, 1000", "/api/runs?limit=1000"),
        Page("api run", f"/api/runs/{run_id}"),
        Page("api benchmarks", "/api/benchmarks"),
        Page("api series", f"/api/benchmarks/{benchmark_id}/series"),
        Page("api changes", "/api/changes"),
        Page("api comparison", f"/api/comparisons/{comparison_id}"),
    ]


def route_exists(app: FastAPI, path: str) -> bool:
    """Whether a GET route matches ``path`` (a 404 from a route that exists is an error, not 'missing')."""
    scope = {"type": "http", "path": path, "method": "GET", "root_path": ""}
    return any(route.matches(scope)[0] == Match.FULL for route in app.router.routes)


def make_app(database_url: str) -> FastAPI:
    """The production app over ``database_url``: settings and engine are cached, so clear them first."""
    os.environ["ROOFWATCH_DATABASE_URL"] = database_url
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.config import get_settings
    from roofwatch.service.core.db import forget_engine

    get_settings.cache_clear()
    forget_engine()
    return create_app()


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port; yields the base URL.

    uvicorn binds the port itself, as in production: a socket handed in from outside would
    miss TCP_NODELAY (asyncio sets it only on sockets created with IPPROTO_TCP), and every
    response would then wait ~40 ms for a delayed ACK between its header and body writes.
    """
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _get(client: httpx.Client, url: str) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = client.get(url)
    return (time.perf_counter() - started) * 1000, response


def time_page(client: httpx.Client, page: Page, requests: int, budget_s: float) -> Timing:
    """Warm up, then time ``requests`` GETs, fewer when the page eats its whole budget (never none)."""
    deadline = time.perf_counter() + budget_s
    for _ in range(WARMUPS):
        _, response = _get(client, page.url)
        if response.status_code != 200:
            return Timing(page, f"error {response.status_code}")
        if time.perf_counter() > deadline:
            break
    times: list[float] = []
    size = 0
    while len(times) < requests and (not times or time.perf_counter() < deadline):
        elapsed, response = _get(client, page.url)
        if response.status_code != 200:
            return Timing(page, f"error {response.status_code}")
        times.append(elapsed)
        size = len(response.content)
    p95 = float(np.percentile(times, 95))
    return Timing(page, "pass" if p95 < TARGET_MS else "FAIL", tuple(times), size)


def measure(app: FastAPI, pages: list[Page], requests: int, budget_s: float, console: Console) -> list[Timing]:
    results = []
    with serve(app) as base_url, httpx.Client(base_url=base_url, timeout=900) as client:
        for page in pages:
            if not route_exists(app, page.path):
                results.append(Timing(page, "missing"))
                continue
            with console.status(f"{page.label}: {page.url}"):
                results.append(time_page(client, page, requests, budget_s))
    return results


def _ms(value: float) -> str:
    return "–" if value != value else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _row(t: Timing) -> list[str]:
    return [t.page.label, t.page.url, str(len(t.times_ms)), _ms(t.quantile(50)), _ms(t.quantile(95)),
            _ms(max(t.times_ms, default=float("nan"))), f"{t.size:,}" if t.size else "–", t.status]


HEADERS = ["page", "url", "n", "p50 ms", "p95 ms", "max ms", "bytes", "result"]


def print_table(results: list[Timing], console: Console) -> None:
    table = Table(title=f"Dashboard pages (target: p95 < {TARGET_MS:.0f} ms)")
    for header in HEADERS:
        table.add_column(header, no_wrap=True, justify="left" if header in ("page", "url") else "right")
    for t in results:
        style = "red" if t.failed else "dim" if t.status == "missing" else ""
        table.add_row(*_row(t), style=style)
    console.print(table)


def markdown(results: list[Timing]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    for t in results:
        cells = _row(t)
        cells[1] = f"`{cells[1]}`"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True, help="PostgreSQL URL of a seeded database")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per page, after 2 warm-ups")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per page before it is cut short")
    parser.add_argument("--only", default="", help="time only pages whose label contains this text")
    parser.add_argument("--markdown", help="also write the table as Markdown to this file")
    args = parser.parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 160)  # a log keeps whole URLs
    app = make_app(args.database_url)
    from roofwatch.service.core.db import get_engine

    with Session(get_engine()) as session:
        pages = [p for p in discover(session) if args.only in p.label]
    results = measure(app, pages, args.requests, args.budget, console)
    print_table(results, console)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as handle:
            handle.write(markdown(results))
    return 1 if any(t.failed for t in results) else 0


if __name__ == "__main__":
    sys.exit(main())
