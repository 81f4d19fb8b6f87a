"""Roofline: where every kernel × shape sits under its device's roofs, and where it moved from.

``/roofline?device=NVIDIA+H200&against=1a2b3c4`` (plus the shared filters): each benchmark's newest
measurement on the device, drawn against the roofs ``roofwatch calibrate`` measured there (or the
datasheet's, marked as such), with an arrow from where it stood at an earlier run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from roofwatch.dashboard import reads as dq
from roofwatch.dashboard.filters import FiltersDep, choices
from roofwatch.dashboard.rendering import TEMPLATES, chart_json
from roofwatch.dashboard.roofline_chart import KernelPoint, fraction, moved, ridge_points, roofline_figure
from roofwatch.dashboard.roofline_reads import (
    AgainstError,
    RunRef,
    default_device,
    latest_points,
    resolve_against,
    roofs,
    runs_back,
    unplottable,
)
from roofwatch.roofline import Peaks
from roofwatch.service.core.requests import SessionDep

DEFAULT_BACK = 10  # runs between the latest and the default earlier point: a few days of pushes
MOVES_SHOWN = 15


@dataclass(frozen=True)
class Move:
    """One benchmark between the earlier run and the latest: time change and roofline fractions."""

    before: KernelPoint
    after: KernelPoint
    change_pct: float
    fraction_before: float | None
    fraction_after: float | None
    confirmed: str | None = None  # the kind of a confirmed change in between: only then is the move coloured


def _moves(pairs: list[tuple[KernelPoint, KernelPoint]], peaks: Peaks | None,
           confirmed: dict[int, str]) -> list[Move]:
    """The benchmarks whose time moved most between the two runs, largest move first.

    Two runs' medians differ by noise alone; a move is shown red or green only when a confirmed
    change of that benchmark lies between them, grey otherwise.
    """
    rows = [Move(before, after, 100 * (after.median / before.median - 1), fraction(before, peaks),
                 fraction(after, peaks), confirmed.get(after.benchmark_id)) for before, after in pairs]
    return sorted(rows, key=lambda m: -abs(m.change_pct))[:MOVES_SHOWN]


def _earlier_run(session: SessionDep, device_class: str, repo: str, against: str | None,
                 default: RunRef | None) -> RunRef | None:
    if not against:
        return default
    try:
        return resolve_against(session, device_class, repo, against)
    except AgainstError as exc:
        raise HTTPException(exc.status, str(exc)) from exc


def register(app: FastAPI) -> None:
    @app.get("/roofline", response_class=HTMLResponse, include_in_schema=False)
    def roofline_page(
        request: Request, session: SessionDep, filters: FiltersDep,
        against: Annotated[str | None, Query(max_length=40, pattern=r"^[0-9A-Fa-f]+$",
                                             description="run id or commit SHA prefix")] = None,
        back: Annotated[int, Query(ge=1, le=100_000, description="runs back for the default comparison")]
        = DEFAULT_BACK,
    ) -> HTMLResponse:
        context: dict[str, Any] = {"filters": filters, "choices": choices(session), "against": against or "",
                                   "back": back}
        device_class = filters.device or default_device(session, filters.repo)
        context["device_class"] = device_class
        if device_class is None:
            return TEMPLATES.TemplateResponse(request, "roofline.html", context)
        device_roofs = roofs(session, device_class)
        latest_run, default_earlier = runs_back(session, device_class, filters.repo, back)
        earlier_run = _earlier_run(session, device_class, filters.repo, against, default_earlier)
        latest = latest_points(session, filters, device_class)
        earlier = latest_points(session, filters, device_class, upto=earlier_run.id) if earlier_run else []
        pairs = moved(latest, earlier)
        confirmed = dq.confirmed_between(session, dq.repository_id(session, filters.repo) if filters.repo else None,
                                      {a.benchmark_id: (b.sha, a.sha) for b, a in pairs})
        context.update({
            "roofs": device_roofs, "latest_run": latest_run, "earlier_run": earlier_run,
            "ridges": ridge_points(device_roofs.peaks) if device_roofs.peaks else [],
            "points": len(latest), "moved": len(pairs), "moves": _moves(pairs, device_roofs.peaks, confirmed),
            "unplottable": unplottable(session, filters, device_class),
            "figure": chart_json(roofline_figure(latest, earlier, device_roofs.peaks)),
        })
        return TEMPLATES.TemplateResponse(request, "roofline.html", context)
