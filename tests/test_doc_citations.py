"""Citations of the documentation point at pages and sections that exist.

Code and pages cite a rule by page and section heading, ``docs/formats.md, 'Meaning of a step'``
(inside docs/ the page alone, ``formats.md, 'Meaning of a step'``), and link to pages and anchors
(``[executors](executors.md#buffer-layout)``). A heading renamed or a section dropped would leave
such citations pointing nowhere; this test finds every one in the library, the tests, the
benchmarks and the pages, and checks that its page exists and has a heading of that name (backticks
and runs of white space are ignored, so a citation may be wrapped across lines).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import REPO

#: ``page.md, 'Section'`` or ``page.md, "Section"``, the page with or without its folder; a
#: section name starts with a capital letter, as every heading here does.
CITATION = re.compile(r"""(?P<page>(?:[\w-]+/)*[\w-]+\.md),\s+(?P<quote>['"])(?P<section>[A-Z][^'"]*?)(?P=quote)""")
#: A markdown link to a page (and maybe an anchor) in the repository.
LINK = re.compile(r"\]\((?P<page>[^)#:\s]*\.md)?(?:#(?P<anchor>[^)\s]+))?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _sources() -> list[Path]:
    files = [REPO / "README.md", REPO / "benchmarks" / "README.md"]
    files += sorted((REPO / "docs").glob("*.md"))
    for folder in ("synth", "tests", "benchmarks"):
        files += sorted((REPO / folder).rglob("*.py"))
    return [f for f in files if f != Path(__file__).resolve()]  # this file's examples are not citations


def _normalize(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def _headings(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))  # a '#' line in a code block is not a heading
    return {_normalize(h) for h in HEADING.findall(text)}


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    slug = re.sub(r"[^\w\- ]", "", heading.lower())
    return slug.replace(" ", "-")


def _resolve(page: str, cited_from: Path) -> Path | None:
    """The file a cited page names: a path from the repository root (``docs/formats.md``), or one
    relative to the citing file (``formats.md`` inside docs/)."""
    for base in (REPO, cited_from.parent):
        candidate = (base / page).resolve()
        if candidate.is_file() and REPO in candidate.parents:
            return candidate
    return None


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def citations() -> list[tuple[str, str, str]]:
    """Every (where, page, section) citation in the repository's text."""
    found = []
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        for m in CITATION.finditer(text):
            where = f"{path.relative_to(REPO)}:{_line(text, m.start())}"
            found.append((where, m.group("page"), _normalize(m.group("section"))))
    return found


def test_citations_are_found():
    """The pattern sees the citations this project writes (a broken pattern would pass vacuously)."""
    cited = {(page, section) for _, page, section in citations()}
    assert ("docs/formats.md", "Meaning of a step") in cited
    assert ("docs/formats.md", "Step-synchronous cost") in cited
    assert ("formats.md", "Message size") in cited  # from docs/ itself
    assert len(cited) >= 10


@pytest.mark.parametrize(("where", "page", "section"), citations(), ids=lambda v: v if ":" in str(v) else "")
def test_cited_section_exists(where, page, section):
    cited_from = REPO / where.rsplit(":", 1)[0]
    target = _resolve(page, cited_from)
    assert target is not None, f"{where}: cites {page}, which is not a file of the repository"
    headings = _headings(target)
    assert section in headings, (
        f"{where}: cites {page}, {section!r}, but {target.relative_to(REPO)} has no such heading "
        f"(its headings: {sorted(headings)})"
    )


def test_links_to_pages_and_anchors_exist():
    problems = []
    for path in [REPO / "README.md", REPO / "benchmarks" / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for m in LINK.finditer(text):
            where = f"{path.relative_to(REPO)}:{_line(text, m.start())}"
            target = (path.parent / m.group("page")).resolve() if m.group("page") else path
            if not target.is_file():
                problems.append(f"{where}: links to {m.group('page')}, which does not exist")
                continue
            anchor = m.group("anchor")
            if anchor and anchor not in {_anchor(h) for h in _headings(target)}:
                problems.append(f"{where}: links to {m.group(0)[2:-1]}, but {target.name} has no such heading")
    assert not problems, "\n".join(problems)


def test_no_citation_of_a_file_outside_the_repository():
    """The file formats are described in docs/formats.md; nothing cites the text they were first
    written in, which is not part of the repository."""
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for path in _sources()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "FORMATS.md" in line
    ]
    assert not offenders, f"cite docs/formats.md instead: {offenders}"


# ====================================================================== the repository stands alone
SKIP_DIRS = {".git", ".venv", "out", "__pycache__", ".pytest_cache", ".ruff_cache", "build", "dist"}
TEXT_SUFFIXES = {".py", ".md", ".json", ".toml", ".txt", ".xml", ".cfg", ".ini", ".yml", ".yaml", ".sh", ""}
MD_MENTION = re.compile(r"(?<![\w\\])[\w./-]*\.md\b")  # not glued to a word or an escape (\n)


def _repository_text_files() -> list[Path]:
    """Every text file of the checkout that people read or tools install (the schedules in
    generated/ are written by code and hold no prose, so they are skipped)."""
    files = []
    for path in sorted(REPO.rglob("*")):
        rel = path.relative_to(REPO)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts) or not path.is_file():
            continue
        if rel.parts[0] == "generated" and path.suffix == ".json":
            continue
        if path.suffix in TEXT_SUFFIXES and path != Path(__file__).resolve():
            files.append(path)
    return files


def _allowed_shared_mention(path: Path, line: str, text: str) -> bool:
    """Real NCCL dumps and MSCCL files are read (never copied) from ../shared/reference/realdata,
    which CI has beside the clone: tests and benchmarks may read them there if they skip, saying so,
    where it is absent, and a page may say where they come from; a page may say that CI has it."""
    rel = path.relative_to(REPO)
    if "../shared/reference/realdata" in line:
        if rel.parts[0] == "tests":
            return "skip" in text
        if rel.name == "README.md":  # README.md, benchmarks/README.md: where the figures' files come from
            return True
        if rel.parts[0] == "benchmarks":
            return "absent" in text or "skip" in text
        return rel.parts[0] == "docs"
    return rel.parts[0] in ("docs", "tests") and "CI" in line


def test_nothing_points_outside_the_repository():
    offenders = []
    for path in _repository_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if "../shared" in line and not _allowed_shared_mention(path, line, text):
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:100]}")
    assert not offenders, "carry the fact with its public source instead:\n" + "\n".join(offenders)


def test_every_mentioned_page_is_in_the_repository():
    """A `NAME.md` mentioned anywhere (a built-in's description, a docstring, a page) is a file of
    the repository: not a note kept elsewhere."""
    tracked = {p.name for p in _repository_text_files()} | {"INDEX.md"}  # generated/INDEX.md
    offenders = []
    for path in _repository_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in MD_MENTION.finditer(text):
            token = m.group(0)
            before = text[max(0, m.start() - 8) : m.start()]
            if "//" in token or before.endswith(("http:", "https:", "path `")):
                continue  # part of a URL, or another repository's file in a provenance record
            name = token.rsplit("/", 1)[-1]
            if not name[:-3] or name in tracked or (REPO / token).is_file() or (path.parent / token).is_file():
                continue
            offenders.append(f"{path.relative_to(REPO)}:{_line(text, m.start())}: {token}")
    assert not offenders, "mentions of pages that are not in the repository:\n" + "\n".join(offenders)
