"""The pull-request comment a comparison renders, as the compare page shows it.

The Markdown is the same roofwatch posts on GitHub. Its renderer lives with the GitHub code,
which the dashboard does not import; the application hands it over when it mounts the pages
(``roofwatch.dashboard.routes.mount(app, render_comment=...)``), and the page turns the Markdown into HTML
with markdown-it-py (CommonMark plus GitHub's tables). Raw HTML is let through because the
comment's own ``<details>`` fold needs it; everything a pull request controls is already fenced
in code spans or blocks by the renderer, so it arrives escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from markdown_it import MarkdownIt

# (report, repository full name, pull request number or 0, target branch, compare page URL) → Markdown
CommentRenderer = Callable[[dict[str, Any], str, int, str, str], str]

_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable("table")


def comment_html(markdown: str) -> str:
    return _MARKDOWN.render(markdown)
