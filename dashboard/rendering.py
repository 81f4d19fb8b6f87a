"""What every dashboard page shares: templates, the chart payload."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import plotly
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from roofwatch.common.vocabulary import UNREAD_ANALYSIS_STATES, AnalysisState
from roofwatch.dashboard.escaping import script_json
from roofwatch.dashboard.figures import PLOT_CONFIG
from roofwatch.dashboard.metrics import human
from roofwatch.service.analysis.failure_groups import parametrization
from roofwatch.service.core.reports import failing_tests
from roofwatch.service.core.requests import csp_nonce
from roofwatch.service.core.units import change_text, interval_text, level_text

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def plotly_style_ids(source: str) -> list[str]:
    """Ids of the ``<style>`` elements plotly.js fills with CSS text when it loads, unless one exists.

    plotly.js 4 bundles MapLibre and injects its stylesheet that way; the CSP blocks inline CSS
    text, and the dashboard draws no maps, so base.html provides the (empty) elements instead.
    """
    return re.findall(r'if\(!document\.getElementById\("([\w-]+)"\)\)\{var \w+=document\.createElement\("style"\)',
                      source)


TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")
# base.html names the response's CSP nonce on the <style> elements plotly.js writes to.
TEMPLATES.env.globals["csp_nonce"] = csp_nonce
TEMPLATES.env.globals["plotly_style_ids"] = plotly_style_ids(PLOTLY_JS.read_text())
# Human units everywhere a page prints a value: ``{{ m.median|seconds }}`` reads "11.4 ms", never
# "1.145e+04 µs"; bandwidths and FLOP/s pick their prefix the same way ("250 MB/s", "1 GFLOP/s").
TEMPLATES.env.filters["seconds"] = lambda value: human("time", value)
TEMPLATES.env.filters["bandwidth"] = lambda value: human("bytes", value)
TEMPLATES.env.filters["flop_rate"] = lambda value: human("flops", value)
# A detected change in the metric its benchmark's chart plots, with that line's sign.
TEMPLATES.env.globals["change_said"] = change_text
TEMPLATES.env.globals["interval_said"] = interval_text
TEMPLATES.env.globals["level_said"] = level_text  # a confidence as its label says it: "99 %"
# A new failure or a correctness change stands for its test function's failing parametrizations.
TEMPLATES.env.globals["failing_tests"] = failing_tests
TEMPLATES.env.globals["parametrization"] = parametrization
# a run page and the overview say "analysis failed" or "changes not known yet" by the vocabulary's words
TEMPLATES.env.globals["ANALYSIS_FAILED"] = AnalysisState.FAILED
TEMPLATES.env.globals["UNREAD_ANALYSIS_STATES"] = UNREAD_ANALYSIS_STATES


def chart_json(figure: dict[str, Any]) -> Markup:
    """A figure with its plot config, for ``<script type="application/json">``: static/dashboard.js draws it."""
    return script_json({**figure, "config": PLOT_CONFIG})
