"""Filters that live in the URL, so every dashboard view is a link someone can share.

``?repo=acme/kernels&suite=benchmarks&kernel=softmax&dtype=bf16&shape=4096x4096&device=NVIDIA+H200``:
each is optional; ``kernel`` matches a substring of the benchmark name, the others match exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, Query
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from roofwatch.service.core.models import Benchmark, Repository

FIELDS = ("repo", "suite", "kernel", "dtype", "shape", "device")


@dataclass(frozen=True)
class Filters:
    repo: str = ""
    suite: str = ""
    kernel: str = ""
    dtype: str = ""
    shape: str = ""
    device: str = ""

    def apply(self, query: SelectOfScalar[Any]) -> SelectOfScalar[Any]:
        """Narrow a query that selects from ``Benchmark``."""
        if self.repo:
            query = query.where(col(Benchmark.repository_id).in_(
                select(Repository.id).where(Repository.full_name == self.repo)))
        if self.suite:
            query = query.where(Benchmark.suite == self.suite)
        if self.kernel:
            query = query.where(col(Benchmark.name).contains(self.kernel, autoescape=True))
        if self.dtype:
            query = query.where(Benchmark.dtype == self.dtype)
        if self.shape:
            query = query.where(Benchmark.shape == self.shape)
        if self.device:
            query = query.where(Benchmark.device_class == self.device)
        return query

    def query_string(self, **overrides: str) -> str:
        """``?…`` for a link to a view with these filters (and ``overrides``), empty values left out."""
        values = {k: v for k, v in {**asdict(self), **overrides}.items() if v}
        return "?" + urlencode(values) if values else ""

    @property
    def active(self) -> dict[str, str]:
        return {k: v for k, v in asdict(self).items() if v}

    def __getitem__(self, field: str) -> str:  # templates read filters[field]
        return str(getattr(self, field))


def choices(session: Session) -> dict[str, list[str]]:
    """The values each filter can take, from the benchmarks that exist."""
    query = sa_select(col(Repository.full_name), col(Benchmark.suite), col(Benchmark.dtype), col(Benchmark.shape),
                      col(Benchmark.device_class)).join(Repository, col(Benchmark.repository_id) == col(Repository.id))
    rows = session.execute(query.distinct()).all()
    fields = ("repo", "suite", "dtype", "shape", "device")
    return {field: sorted({str(row[i]) for row in rows if row[i]}) for i, field in enumerate(fields)}


def _filters(repo: Annotated[str, Query(max_length=200)] = "", suite: Annotated[str, Query(max_length=200)] = "",
             kernel: Annotated[str, Query(max_length=200)] = "", dtype: Annotated[str, Query(max_length=50)] = "",
             shape: Annotated[str, Query(max_length=200)] = "",
             device: Annotated[str, Query(max_length=200)] = "") -> Filters:
    return Filters(repo, suite, kernel, dtype, shape, device)


FiltersDep = Annotated[Filters, Depends(_filters)]
