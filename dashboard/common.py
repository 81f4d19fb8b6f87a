"""What every dashboard page shares: templates, figure serialisation."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.templating import Jinja2Templates
from plotly.utils import PlotlyJSONEncoder

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")


def figure_json(figure: dict[str, object]) -> str:
    return json.dumps(figure, cls=PlotlyJSONEncoder)
