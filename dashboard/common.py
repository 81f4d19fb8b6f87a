"""What every dashboard page shares: templates, figure serialisation."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.templating import Jinja2Templates
from plotly.utils import PlotlyJSONEncoder

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")


def figure_json(figure: dict[str, object]) -> str:
    return json.dumps(figure, cls=PlotlyJSONEncoder)


def script_json(data: object) -> str:
    """JSON to place inside ``<script type="application/json">``: ``</`` (say, in a commit title) is
    written ``<\\/`` so it cannot close the script element; JSON parsers read it back as ``</``."""
    return json.dumps(data, cls=PlotlyJSONEncoder).replace("</", "<\\/")
