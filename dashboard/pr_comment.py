"""The pull-request comment a comparison renders, as the compare page shows it.

The Markdown is the same roofwatch posts on GitHub. Its renderer lives with the GitHub code,
which the dashboard does not import; the application hands it over when it mounts the pages
(``roofwatch.dashboard.routes.mount(app, render_comment=...)``), and the page turns the Markdown into HTML
with markdown-it-py (CommonMark plus GitHub's tables). Everything a pull request controls is
fenced in code spans or blocks by the renderer, so it arrives escaped. Raw HTML is let through
only for what the comment itself writes (its ``<details>`` fold and its hidden marker); any other
raw HTML, should suite text ever reach the Markdown unfenced, is shown as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from html import escape

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

from roofwatch.service.core.reports import ComparisonReport

# (report, repository full name, pull request number or 0, target branch, compare page URL) → Markdown
CommentRenderer = Callable[[ComparisonReport, str, int, str, str], str]

_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable("table")
# The raw HTML service/github/comment.py writes: the fold around the full table and the marker.
_COMMENT_HTML = re.compile(r"</?details>|</?summary>|<!-- [\w:.-]+ -->")


def _raw_html(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """A raw HTML token: the comment's own tags kept, anything else escaped."""
    content, kept, last = tokens[idx].content, [], 0
    for match in _COMMENT_HTML.finditer(content):
        kept += [escape(content[last:match.start()], quote=False), match.group()]
        last = match.end()
    return "".join(kept) + escape(content[last:], quote=False)


def _alignment_classes(state: StateCore) -> None:
    """Table cells aligned by class (``align-right``) instead of a style attribute, which the CSP blocks."""
    for token in state.tokens:
        style = token.attrs.pop("style", None) if token.type in ("th_open", "td_open") else None
        if isinstance(style, str) and style.startswith("text-align:"):
            token.attrSet("class", "align-" + style.removeprefix("text-align:"))


_MARKDOWN.add_render_rule("html_block", _raw_html)
_MARKDOWN.add_render_rule("html_inline", _raw_html)
_MARKDOWN.core.ruler.push("alignment_classes", _alignment_classes)


@lru_cache(maxsize=32)
def comment_html(markdown: str) -> Markup:
    """The comment as HTML. Cached by its Markdown: a finished comparison's comment never changes, and
    parsing the table of a thousand benchmarks costs a few hundred ms each time the page is opened."""
    return Markup(_MARKDOWN.render(markdown))
