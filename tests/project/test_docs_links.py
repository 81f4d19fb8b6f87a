"""Every relative link in README.md, docs/*.md and bench/**/README.md leads somewhere.

A link ``[text](path)`` must name a file or folder that exists, relative to the file that links;
``[text](path#anchor)`` and ``[text](#anchor)`` must also name a heading of the target, spelled
the way GitHub spells heading anchors. The README stays one page (≤ 200 lines) and its index
names every page under docs/. Each case is one file and one link, so a failure says which.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200
INDEX_HEADING = "Documentation"

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [label](target) or ![alt](target); the label may hold one level of brackets ([`[tool.x]`](y)).
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s+.*)?$")
EMPHASIS = re.compile(r"\*+|(?<!\w)_+|_+(?!\w)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")


def markdown_files() -> list[Path]:
    files = [README, *sorted(DOCS.glob("*.md")), *sorted((ROOT / "bench").rglob("README.md"))]
    return [path for path in files if path.is_file()]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lowercased, punctuation but - and _ dropped,
    each space a hyphen."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = re.sub(r"<[^>]+>", "", text)                                            # inline HTML tags
    parts, last = [], 0
    for span in CODE_SPAN.finditer(text):                                         # code keeps its _ and *
        parts += [EMPHASIS.sub("", text[last:span.start()]), span.group(2)]
        last = span.end()
    text = "".join([*parts, EMPHASIS.sub("", text[last:])]).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, duplicates numbered -1, -2, … as GitHub numbers them."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link outside code: inline links, images and reference definitions."""
    found = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        reference = REFERENCE.match(line)
        if reference:
            found.append((number, reference.group(2)))
            continue
        spans_blanked = CODE_SPAN.sub(lambda m: "code", line)
        found.extend((number, match.group(2)) for match in LINK.finditer(spans_blanked))
    return found


def broken(source: Path, target: str) -> str | None:
    """Why ``target``, linked from ``source``, leads nowhere; None when it resolves."""
    if EXTERNAL.match(target):
        return None
    path_part, _, anchor = target.partition("#")
    destination = (source.parent / unquote(path_part)).resolve() if path_part else source
    if not destination.exists():
        return f"{shown(destination)} does not exist"
    if not anchor:
        return None
    if destination.is_dir() or destination.suffix.lower() != ".md":
        return f"#{anchor} points into {destination.name}, which has no Markdown headings"
    if unquote(anchor) not in anchors(destination):
        return f"#{anchor} is no heading of {shown(destination)}"
    return None


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def shown(path: Path) -> str:
    return rel(path) if path.is_relative_to(ROOT) else str(path)


CASES = [(source, line, target) for source in markdown_files() for line, target in links(source)
         if not EXTERNAL.match(target)]


@pytest.mark.parametrize(("source", "line", "target"), CASES,
                         ids=[f"{rel(source)}:{line}:{target}" for source, line, target in CASES])
def test_relative_link_resolves(source: Path, line: int, target: str) -> None:
    problem = broken(source, target)
    assert problem is None, f"{rel(source)}:{line}: [{target}] {problem}"


def test_there_are_links_to_check() -> None:
    assert len({source for source, _, _ in CASES}) >= 3 and len(CASES) >= 30


def test_readme_fits_on_a_page() -> None:
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= README_MAX_LINES, f"README.md has {count} lines, more than {README_MAX_LINES}"


def index_targets() -> set[Path]:
    """The files the README's index section (## Documentation) links to."""
    targets, inside = set(), False
    for _, line in prose_lines(README.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if heading:
            inside = heading.group(2).strip() == INDEX_HEADING
            continue
        if inside:
            for match in LINK.finditer(CODE_SPAN.sub(lambda m: "code", line)):
                path_part = match.group(2).partition("#")[0]
                if path_part and not EXTERNAL.match(path_part):
                    targets.add((ROOT / unquote(path_part)).resolve())
    return targets


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda page: rel(page))
def test_docs_page_is_in_the_readme_index(page: Path) -> None:
    assert page.resolve() in index_targets(), f"{rel(page)} is not linked from README.md § {INDEX_HEADING}"


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda page: rel(page))
def test_docs_page_opens_with_a_title_and_what_it_holds(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].startswith("# "), f"{rel(page)} does not start with a '# Title'"
    assert len(lines) > 2 and lines[1] == "" and lines[2].strip(), \
        f"{rel(page)}: the title is not followed by a line saying what the page holds"


@pytest.mark.parametrize(("heading", "expected"), [
    ("Tracking a repository: `[tool.roofwatch]`", "tracking-a-repository-toolroofwatch"),
    ("Measuring: `kernel_benchmark` (roofwatch/harness.py, roofwatch/timing.py)",
     "measuring-kernel_benchmark-roofwatchharnesspy-roofwatchtimingpy"),
    ("The demo: what roofwatch catches, in a few minutes", "the-demo-what-roofwatch-catches-in-a-few-minutes"),
    ("Results (2 shared cores, other engineers' jobs running; 2026-11-27)",
     "results-2-shared-cores-other-engineers-jobs-running-2026-11-27"),
    ("Dashboard at 20 M measurements", "dashboard-at-20-m-measurements"),
    ("A/B verdicts on a real GPU: `bench.gpu_ab_check` on an NVIDIA H200",
     "ab-verdicts-on-a-real-gpu-benchgpu_ab_check-on-an-nvidia-h200"),
    ("**Bold** and [a link](x.md) — dash", "bold-and-a-link--dash"),
])
def test_slug_follows_github(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_duplicate_headings_are_numbered(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Results\n\n## Results\n\n```\n# Results\n```\n\n### Results\n", encoding="utf-8")
    assert anchors(page) == {"results", "results-1", "results-2"}


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## Part one\n", encoding="utf-8")
    page.write_text("# Page\n\n[ok](other.md#part-one) [gone](missing.md) [bad](other.md#part-two) "
                    "[self](#page) [`x`](#nowhere)\n\n```\n[in code](missing.md)\n```\n", encoding="utf-8")
    found = dict((target, broken(page, target)) for _, target in links(page))
    assert found["other.md#part-one"] is None and found["#page"] is None
    assert "does not exist" in found["missing.md"]
    assert "no heading" in found["other.md#part-two"] and "no heading" in found["#nowhere"]
    assert len(found) == 5
