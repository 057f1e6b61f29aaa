"""``mqha export``: gather history databases into JSON Lines with an explicit schema (shell).

Input: run directories (searched recursively for ``history.db``) and/or database files. Output, in
``out_dir``: one ``<table>.jsonl`` per §5 table (always written, empty when no source has rows), each
line an object with exactly the columns of ``mqha.history.schema.export_columns`` (values typed: 64-bit
integers as JSON integers, SyncStateSets as arrays), plus ``schema.json`` (the column kinds Spark reads
the files with) and ``manifest.json`` (which database gave how many rows of what).

Spark never opens SQLite: this module reads the databases with sqlite-utils (Python integers are
unbounded, so an offset beyond 2^53 or 2^31 arrives whole), and Spark reads the text files with a
declared ``LongType``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from mqha.history.database import HISTORY_FILE_NAME
from mqha.history.schema import TABLES, columns, schema_document, typed_row

SCHEMA_FILE = "schema.json"
MANIFEST_FILE = "manifest.json"


def table_file(out_dir: str | os.PathLike[str], table: str) -> Path:
    return Path(out_dir) / f"{table}.jsonl"


def find_databases(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every history database under ``paths`` (a directory is searched recursively), sorted, unique."""
    found: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.update(p for p in path.rglob(HISTORY_FILE_NAME) if p.is_file())
        elif path.is_file():
            found.add(path)
        else:
            raise FileNotFoundError(f"no such file or directory: {path}")
    return sorted(p.resolve() for p in found)


def _rows(db: sqlite_utils.Database, table: str) -> Iterator[dict[str, Any]]:
    present = set(db[table].columns_dict)  # type: ignore[union-attr]
    wanted = [c for c in columns(table) if c in present]
    select = ", ".join(["rowid AS seq", *(f"[{c}]" for c in wanted)])
    cursor = db.execute(f"SELECT {select} FROM [{table}] ORDER BY rowid")
    names = [d[0] for d in cursor.description]
    for values in cursor:
        yield typed_row(table, dict(zip(names, values, strict=True)), with_seq=True)


@dataclass
class ExportSummary:
    """What an export wrote: tables, row counts and the sources read."""

    out_dir: Path
    sources: list[dict[str, Any]] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        counts = ", ".join(f"{t}={n}" for t, n in self.rows.items())
        return f"exported {len(self.sources)} database(s) to {self.out_dir}: {counts}"


def export(paths: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str]) -> ExportSummary:
    """Write every table of every database found under ``paths`` into ``out_dir`` (see module doc)."""
    databases = find_databases(paths)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = ExportSummary(out, rows=dict.fromkeys(TABLES, 0))
    with contextlib.ExitStack() as stack:
        handles = {
            table: stack.enter_context(open(table_file(out, table), "w", encoding="utf-8"))
            for table in TABLES
        }
        for path in databases:
            # Only SELECTs: exporting a live node's database takes no write lock (WAL readers don't block).
            db = sqlite_utils.Database(path)
            try:
                source: dict[str, Any] = {"path": str(path), "rows": {}}
                for table in TABLES:
                    if not db[table].exists():
                        continue
                    count = 0
                    write = handles[table].write
                    for row in _rows(db, table):
                        write(json.dumps(row, separators=(",", ":")) + "\n")
                        count += 1
                    source["rows"][table] = count
                    summary.rows[table] += count
                summary.sources.append(source)
            finally:
                db.close()
    (out / SCHEMA_FILE).write_text(json.dumps(schema_document(), indent=2) + "\n")
    manifest = {"sources": summary.sources, "rows": summary.rows}
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return summary


def write_tables(out_dir: str | os.PathLike[str], tables: Mapping[str, Iterable[Mapping[str, Any]]]) -> Path:
    """Write plain rows (e.g. a hand-made history) as an export directory, typed like ``export``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for table in TABLES:
        with open(table_file(out, table), "w", encoding="utf-8") as handle:
            for row in tables.get(table, ()):
                handle.write(json.dumps(typed_row(table, row, with_seq=True), separators=(",", ":")) + "\n")
    (out / SCHEMA_FILE).write_text(json.dumps(schema_document(), indent=2) + "\n")
    return out


def _jsonl_files(path: Path) -> list[Path]:
    if path.is_dir():  # a directory of part files, as Spark writes them
        return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(("_", ".")))
    return [path] if path.exists() else []


def read_tables(in_dir: str | os.PathLike[str]) -> dict[str, list[dict[str, Any]]]:
    """An export directory's JSON Lines back as typed rows (the pure checker's input; small data)."""
    base = Path(in_dir)
    if not base.is_dir():
        raise FileNotFoundError(f"not a directory: {base}")
    tables: dict[str, list[dict[str, Any]]] = {}
    for table in TABLES:
        rows: list[dict[str, Any]] = []
        for path in _jsonl_files(table_file(base, table)):
            with open(path, encoding="utf-8") as handle:
                rows.extend(
                    typed_row(table, json.loads(line), with_seq=True) for line in handle if line.strip()
                )
        tables[table] = rows
    return tables
