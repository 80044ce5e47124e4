"""The documentation holds together: every relative link in README.md and docs/*.md
reaches a file of the repository (and, with a #anchor into a markdown file, one of its
headings, by GitHub's slug rules), and README.md stays a short front page with the two
set-up commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
README_MAX_LINES = 120
SETUP_COMMANDS = ("./hack/demo.sh", "./hack/test.sh")
# The pages the front page sends each reader to.
NEXT_PAGES = ("docs/operator.md", "docs/ci.md", "docs/driver-authors.md",
              "docs/architecture.md", "docs/api-facts.md")

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?:.|\n)*?\1")
# [text](target) and [text](target "title"); the text may wrap across lines.
_INLINE_LINK = re.compile(
    r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]"  # the text, one level of brackets inside
    r"\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:


def prose(markdown: str) -> str:
    """The text outside fenced code blocks and code spans, where links are links."""
    return _CODE_SPAN.sub("", _FENCE.sub("", markdown))


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text (links reduced to their text, code
    spans to their content) lower-cased, everything but letters, digits, '_', '-' and
    spaces dropped, spaces turned into '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for match in _HEADING.finditer(_FENCE.sub("", markdown)):
        slug = github_slug(match[2])
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    """The page's link targets that point into the repository."""
    text = prose(page.read_text())
    targets = _INLINE_LINK.findall(text) + _REFERENCE_LINK.findall(text)
    return [t for t in targets if not _EXTERNAL.match(t)]


def link_problem(page: Path, target: str) -> str | None:
    """Why `target`, a link of `page`, leads nowhere (None: it leads somewhere)."""
    path_part, _, anchor = target.partition("#")
    file = (page.parent / path_part).resolve() if path_part else page
    where = f"{page.relative_to(REPO)}: link {target!r}"
    if not file.exists():
        return f"{where}: no file {path_part}"
    if REPO not in file.parents and file != REPO:
        return f"{where}: {path_part} is outside the repository"
    if anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
        return f"{where}: {file.relative_to(REPO)} has no heading with anchor #{anchor}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    problems = [p for t in relative_links(page) if (p := link_problem(page, t))]

    assert problems == []


def test_the_front_page_links_each_reader_to_their_page() -> None:
    linked = {t.partition("#")[0] for t in relative_links(REPO / "README.md")}

    assert set(NEXT_PAGES) <= linked


def test_the_front_page_is_short_and_has_the_setup_commands() -> None:
    text = (REPO / "README.md").read_text()
    setup_blocks = re.findall(r"^```sh\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    first_words = {line.split()[0] for block in setup_blocks for line in block.splitlines()
                   if line.strip()}

    assert len(text.splitlines()) <= README_MAX_LINES
    assert set(SETUP_COMMANDS) <= first_words


@pytest.mark.parametrize(("heading", "slug"), [
    ("Reconciliation: leaked claims are reported, and freed only when the kubelet agrees",
     "reconciliation-leaked-claims-are-reported-and-freed-only-when-the-kubelet-agrees"),
    ("1. The backend: `simdra/_driver/devices/examples/vpu.py`",
     "1-the-backend-simdra_driverdevicesexamplesvpupy"),
    ("4.8 Request policy rules", "48-request-policy-rules"),
    ("A prepare's path", "a-prepares-path"),
    ("Adding a kind, end to end: simulated VPUs", "adding-a-kind-end-to-end-simulated-vpus"),
])
def test_slugs_follow_github(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_a_broken_link_and_a_missing_heading_are_found() -> None:
    page = REPO / "docs" / "ci.md"

    assert link_problem(page, "operator.md#deploy-to-a-cluster") is None
    assert link_problem(page, "#the-real-cluster-e2e") is None
    assert "no file" in (link_problem(page, "no-such-page.md") or "")
    assert "no heading" in (link_problem(page, "operator.md#no-such-heading") or "")
    assert "no heading" in (link_problem(page, "#no-such-heading") or "")
    assert "outside the repository" in (link_problem(page, "../../") or "")


def test_links_in_code_are_not_links() -> None:
    text = "see [a](a.md)\n```sh\necho [b](b.md)\n```\nand `[c](c.md)`, [d\ne](d.md)\n"

    assert _INLINE_LINK.findall(prose(text)) == ["a.md", "d.md"]


# `tests/x/test_y.py` or `tests/x/test_y.py::test_name`, as docs name their evidence.
_TEST_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def test_every_test_the_threat_model_cites_exists() -> None:
    """docs/security.md says which test proves each stop: a test renamed or removed
    would leave a boundary claimed but unproved, so each cited file and test exists."""
    text = (REPO / "docs" / "security.md").read_text()
    cited = _TEST_REFERENCE.findall(text)
    missing = [f"{path}::{name}" if name else path for path, name in cited
               if not (REPO / path).is_file()
               or (name and f"def {name}(" not in (REPO / path).read_text())]

    assert len(cited) > 20
    assert missing == []
