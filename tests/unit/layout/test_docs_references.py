"""Every reference to a document points into the repository and resolves (docs/architecture.md §2).

Code, comments, help texts, scripts and the chart cite documents as ``docs/<name>.md §N.M``; the
section must exist as a heading (``## N. Title`` / ``### N.M Title``) or a numbered item. Nothing
refers to files outside the repository.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SKIP_DIRS = {".git", ".venv", "__pycache__", "build", "dist", ".mqha", "runs", "bench-results"}
TEXT_SUFFIXES = {
    *(".py", ".md", ".sh", ".toml", ".yaml", ".yml", ".tpl", ".txt", ".json", ".js", ".html", ".c"),
    *(".conf", ".cfg", ".importlinter", ""),
}
REFERENCE = re.compile(r"docs/([\w-]+\.md) §(\d+(?:\.\d+)*)")
# any case: a sentence may start with "Spec §"; "docs/architecture.md §" is the in-repo form
OUTSIDE = re.compile(
    r"\.\./shared|shared/notes|spec/reference|\bspec ?§|\bstyle(\.md)? ?(§|rule)"
    r"|(?<!docs/)\barchitecture(\.md)? ?§",
    re.IGNORECASE,
)


def _text_files() -> list[Path]:
    files = []
    for path in ROOT.rglob("*"):
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in path.relative_to(ROOT).parts):
            continue
        if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name == "Dockerfile"):
            try:
                files.append((path, path.read_text()))
            except UnicodeDecodeError:
                continue
    return files


FILES = _text_files()


def _sections(doc: Path) -> set[str]:
    found = set()
    for line in doc.read_text().splitlines():
        heading = re.match(r"#{1,6} (\d+(?:\.\d+)*)[.\s]", line)
        item = re.match(r"\s*(?:[-*] )?\**(\d+\.\d+(?:\.\d+)*)[.\s*]", line)
        for match in (heading, item):
            if match:
                found.add(match.group(1).rstrip("."))
    return found


def test_nothing_refers_outside_the_repository() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path, text in FILES
        for n, line in enumerate(text.splitlines(), 1)
        if OUTSIDE.search(line) and path.name != Path(__file__).name
    ]
    assert not offenders, "\n".join(offenders[:30])


def test_docs_exist() -> None:
    for name in ("architecture.md", "reference-behaviour.md", "raft.md", "performance.md"):
        assert (ROOT / "docs" / name).is_file(), name


@pytest.mark.parametrize("doc", sorted({m.group(1) for _, t in FILES for m in REFERENCE.finditer(t)}))
def test_section_references_resolve(doc: str) -> None:
    path = ROOT / "docs" / doc
    assert path.is_file(), f"docs/{doc} is cited but does not exist"
    sections = _sections(path)
    missing = sorted(
        {
            f"§{m.group(2)} ({p.relative_to(ROOT)})"
            for p, text in FILES
            for m in REFERENCE.finditer(text)
            if m.group(1) == doc and m.group(2) not in sections
        }
    )
    assert not missing, f"docs/{doc} has no section " + ", ".join(missing[:40])
