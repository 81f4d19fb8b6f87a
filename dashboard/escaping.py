"""What suite-controlled text goes through on its way into a page.

Benchmark names, params, dtypes, suite names, test ids, error messages and commit titles come from
the repository under test, which may be hostile. Two places would read them as markup:

- JSON in a ``<script type="application/json">`` element. The HTML parser, not the JSON parser,
  decides where that element ends: ``</script>`` closes it, and ``<!--<script>`` puts the parser
  in a state where the real ``</script>`` no longer does, so the rest of the page disappears.
  :func:`script_json` writes ``<``, ``>`` and ``&`` (and U+2028/U+2029, which older JavaScript
  parsers take for line ends) as ``\\uXXXX`` escapes: plain JSON, read back unchanged.
- Plotly's labels. Trace names, hover text, annotations, axis and tick titles accept a subset of
  HTML (``<a href>``, ``<span style>``, ``<b>``, ``<br>``) and decode entities. :func:`plotly_text`
  turns a string into text that Plotly shows as written.
"""

from __future__ import annotations

import json
from html import escape

from jinja2.utils import htmlsafe_json_dumps
from markupsafe import Markup
from plotly.utils import PlotlyJSONEncoder

# Jinja's ``tojson`` escaping covers ``<``, ``>``, ``&`` and ``'``; JSON's own ``\u`` escapes do the line separators.
_LINE_SEPARATORS = {0x2028: "\\u2028", 0x2029: "\\u2029"}


def script_json(data: object) -> Markup:
    """``data`` as JSON to place verbatim inside ``<script type="application/json">``.

    Returned as :class:`~markupsafe.Markup`, so templates need no ``|safe``. Never for an
    attribute value: there the template's own escaping of a plain string is what is safe.
    """
    text = htmlsafe_json_dumps(data, dumps=json.dumps, cls=PlotlyJSONEncoder)
    return Markup(str(text).translate(_LINE_SEPARATORS))


def plotly_text(text: object) -> str:
    """``text`` as Plotly shows it literally in a name, hover text, annotation or axis title.

    Entity-escaped: Plotly decodes ``&lt;`` back to ``<`` for display but never parses it as a tag.
    """
    return escape(str(text), quote=False)
