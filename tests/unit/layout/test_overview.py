"""docs/overview.md stays a short map that answers "where is X decided?" and points at files that exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OVERVIEW = ROOT / "docs" / "overview.md"
# every file and directory under mqha/, relative to it: "controller/election.py", "broker/commitlog"
UNDER_MQHA = {
    p.relative_to(ROOT / "mqha").as_posix()
    for p in (ROOT / "mqha").rglob("*")
    if "__pycache__" not in p.parts
}
# `a/b.py`, `a/b` (a module or a package) or `a/b/`: a path under mqha/, or its tail (`commitlog/codec.py`)
PATH = re.compile(r"`((?:[a-z_0-9]+/)+[a-z_0-9]*(?:\.(?:py|c))?)`")
OUTSIDE_MQHA = ("mqha/", "tests/", "docs/", "scripts/", "conf/", "helm/")
DECISIONS = ("election", "SyncStateSet", "truncation", "ack", "retention", "authorization")


def test_the_overview_is_short() -> None:
    assert len(OVERVIEW.read_text().splitlines()) <= 300


def test_the_overview_says_where_each_decision_lives() -> None:
    table = OVERVIEW.read_text().split("## Where each decision lives", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    for decision in DECISIONS:
        assert any(re.match(rf"\| \**{decision}\b", row) for row in rows), decision


def _exists(path: str) -> bool:
    names = {path.rstrip("/"), path.rstrip("/") + ".py"}
    return any(found in names or found.endswith(tuple("/" + name for name in names)) for found in UNDER_MQHA)


def test_every_path_in_the_overview_exists() -> None:
    named = set(PATH.findall(OVERVIEW.read_text()))
    missing = sorted(path for path in named if not path.startswith(OUTSIDE_MQHA) and not _exists(path))
    assert not missing, f"docs/overview.md names paths under mqha/ that do not exist: {missing}"
