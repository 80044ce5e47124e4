"""The repository stands alone: no test or tool reads files outside it, and every
`api-facts N.N` a comment cites is a section of docs/api-facts.md."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "build", "dist",
             "node_modules"}
TEXT_SUFFIXES = {".py", ".pyi", ".sh", ".md", ".toml", ".yaml", ".yml", ".json", ".txt",
                 ".cfg", ".ini", ".go", ".mod", ".proto", ""}
# Places outside the repository that a machine of ours happens to have; reading any of
# them makes a clone elsewhere fail (or pass for the wrong reason).
OUTSIDE = re.compile(r"/work/|\.\./shared|shared/reference|/home/[a-z]|/root/")
CITATION = re.compile(r"api-facts ((?:\d+(?:\.\d+)?)(?:(?:, |-|/| and )\d+(?:\.\d+)?)*)")


def _files() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        parts = set(path.relative_to(REPO).parts)
        if parts & SKIP_DIRS or any(p.endswith(".egg-info") for p in parts):
            continue
        if path.is_file() and path.suffix in TEXT_SUFFIXES and path.name != "go.sum":
            found.append(path)
    return found


def test_nothing_refers_to_paths_outside_the_repository() -> None:
    me = Path(__file__).resolve()
    offenders = []
    for path in _files():
        if path == me:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


def _sections() -> set[str]:
    text = (REPO / "docs" / "api-facts.md").read_text()
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, flags=re.MULTILINE))


def test_every_cited_api_fact_is_a_section_of_the_document() -> None:
    sections = _sections()
    assert {"1.1", "4.8", "8"} <= sections  # the headings are parsed
    missing = []
    cited = 0
    for path in _files():
        for match in CITATION.finditer(path.read_text(errors="replace")):
            for number in re.findall(r"\d+(?:\.\d+)?", match[1]):
                cited += 1
                if number not in sections:
                    missing.append(f"{path.relative_to(REPO)}: api-facts {number}")
    assert cited > 20
    assert missing == []


def test_no_comment_cites_a_facts_document_the_repository_lacks() -> None:
    bare = re.compile(r"(?<!api-)facts \d")
    offenders = [str(p.relative_to(REPO)) for p in _files()
                 if p.suffix == ".py" and bare.search(p.read_text(errors="replace"))]
    assert offenders == []
