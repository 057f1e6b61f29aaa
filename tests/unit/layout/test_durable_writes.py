"""One durable-write path (docs/architecture.md §2, ``durable``): only ``mqha/durable.py`` renames files
or fsyncs by hand, so hand-written copies of "temp file, fsync, rename, fsync the directory" cannot
drift back (three had, and one had lost its directory fsync).

Read with ``ast`` only, so no module is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MODULES = sorted((ROOT / "mqha").rglob("*.py"))
THE_HELPER = "mqha/durable.py"

# Calls (and names) that belong in the helper: renames, moves, directory opens, fsync.
_FORBIDDEN_ATTRIBUTES = {
    ("os", "replace"): "os.replace",
    ("os", "rename"): "os.rename",
    ("os", "renames"): "os.renames",
    ("shutil", "move"): "shutil.move",
    ("os", "O_DIRECTORY"): "os.O_DIRECTORY",
    ("os", "fsync"): "os.fsync",
}
_FORBIDDEN_IMPORTS = {("os", n) for n in ("replace", "rename", "renames", "fsync", "O_DIRECTORY")} | {
    ("shutil", "move")
}

# (module, what) -> why it may stay. An entry nothing matches any more fails the test, so the list
# stays honest.
ALLOWED: dict[tuple[str, str], str] = {
    ("mqha/broker/commitlog/segment.py", "os.rename"): (
        "Segment.adopt names the preallocated spare file as the new segment: not a content replace, and "
        "its directory fsync is batched into the log's next flush (group commit, commitlog/flushing.py) "
        "instead of one per roll-over on the append path; a spare whose rename did not survive a crash "
        "is deleted at open"
    ),
    ("mqha/broker/confirm_checkpoint.py", "os.fsync"): (
        "ConfirmOffsetCheckpoint rewrites one record in place on a file descriptor it keeps open "
        "(docs/architecture.md §9.3: a rename per save cost ms on the event loop); no rename, no directory"
    ),
    ("mqha/controller/raft/journal.py", "os.replace"): (
        "ChecksummedMetaStorer writes the Raft .meta of a member run with controllerJournalFsync=false, "
        "which by design fsyncs nothing (docs/raft.md P8, §7.3); the durable mode's DurableMetaStorer "
        "uses mqha.durable.write_atomically"
    ),
    ("mqha/chaos/controller_stores.py", "<path>.rename"): (
        "moves a wiped controller's history database aside inside the chaos run's directory, for the "
        "analysis after the run: test tooling, nothing there must survive a power loss"
    ),
    ("mqha/cluster/tmpfs.py", "<path>.rename"): (
        "puts a test store's copy back where its tmpfs was unmounted (chaos and test tooling, after the "
        "processes stopped): nothing there must survive a power loss"
    ),
    ("mqha/cluster/checking.py", "<path>.rename"): (
        "gives a staged history database its final name in a stopped check run's directory: test "
        "tooling, nothing there must survive a power loss"
    ),
}


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _uses(path: Path) -> list[tuple[str, int]]:
    """(what, line) for each forbidden attribute or import in the module."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            what = _FORBIDDEN_ATTRIBUTES.get((node.value.id, node.attr))
            if what:
                found.append((what, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil"):
            found += [
                (f"{node.module}.{alias.name}", node.lineno)
                for alias in node.names
                if (node.module, alias.name) in _FORBIDDEN_IMPORTS
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("rename", "replace")
            and len(node.args) == 1
            and not node.keywords
        ):
            # pathlib's Path.rename(target) / Path.replace(target); str.replace takes two arguments.
            found.append((f"<path>.{node.func.attr}", node.lineno))
    return found


def test_the_scan_sees_the_helper_itself() -> None:
    """A guard that finds nothing anywhere would pass for the wrong reason."""
    assert {what for what, _ in _uses(ROOT / THE_HELPER)} >= {"os.replace", "os.fsync", "os.O_DIRECTORY"}


def test_only_the_durable_helper_renames_files_or_fsyncs_directories() -> None:
    misplaced = []
    allowed_and_used = set()
    for path in MODULES:
        name = _name(path)
        if name == THE_HELPER:
            continue
        for what, line in _uses(path):
            if (name, what) in ALLOWED:
                allowed_and_used.add((name, what))
            else:
                misplaced.append(f"{name}:{line}: {what}")
    assert not misplaced, (
        "write files that must survive a crash with mqha.durable (write_atomically, fsync_directory, "
        "fsync_file, remove_durably), or add an ALLOWED entry saying why this one cannot:\n  "
        + "\n  ".join(misplaced)
    )
    stale = set(ALLOWED) - allowed_and_used
    assert not stale, f"ALLOWED entries that match nothing any more (drop them): {sorted(stale)}"
    assert all(why.strip() for why in ALLOWED.values())
