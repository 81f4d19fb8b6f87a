"""The pull-request comment a comparison renders, as the compare page shows it.

The same Markdown roofwatch posts on GitHub (``service.github.comment.render_comment``), turned
into HTML with markdown-it-py (CommonMark plus GitHub's tables). Raw HTML is let through
because the comment's own ``<details>`` fold needs it; everything the pull request controls is
already fenced in code spans or blocks by the comment renderer, so it arrives escaped.
"""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt

from service.github.comment import ReportContext, render_comment

_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable("table")


def comment_markdown(report: dict[str, Any], repository: str, pr_number: int, base_ref: str, url: str) -> str:
    context = ReportContext(repository=repository, pr_number=pr_number, base_ref=base_ref, dashboard_url=url)
    return render_comment(report, context)


def comment_html(markdown: str) -> str:
    return _MARKDOWN.render(markdown)
