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

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from mqha.history.ack_journal import unimported_rows
from mqha.history.database import HISTORY_FILE_NAME
from mqha.history.pages import select_rows
from mqha.history.schema import (
    ACKS,
    BOOLEAN,
    LONG,
    LONG_ARRAY,
    STRING,
    TABLES,
    columns,
    export_columns,
    schema_document,
    typed_row,
)

SCHEMA_FILE = "schema.json"
MANIFEST_FILE = "manifest.json"
JSONL, PARQUET, AUTO = "jsonl", "parquet", "auto"
FORMATS = (AUTO, JSONL, PARQUET)
AUTO_PARQUET_ROWS = 500_000
"""``auto``: a table is written as JSON Lines until it passes this many rows, then as Parquet."""
PARQUET_BATCH = 50_000


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


@dataclass
class ExportSummary:
    """What an export wrote: tables, row counts, the sources read and what could not be read."""

    out_dir: Path
    sources: list[dict[str, Any]] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        counts = ", ".join(f"{t}={n}" for t, n in self.rows.items())
        text = f"exported {len(self.sources)} source(s) to {self.out_dir}: {counts}"
        parquet = [t for t, f in self.formats.items() if f == PARQUET]
        if parquet:
            text += f" (Parquet: {', '.join(parquet)})"
        return "\n".join(
            [text, *(f"problem: {p}" for p in self.problems), *(f"note: {n}" for n in self.notes)]
        )

    def write_manifest(self) -> None:
        """``schema.json`` and ``manifest.json`` (sources, row counts, problems, notes)."""
        (self.out_dir / SCHEMA_FILE).write_text(json.dumps(schema_document(), indent=2) + "\n")
        manifest = {
            "sources": self.sources,
            "rows": self.rows,
            "problems": self.problems,
            "notes": self.notes,
        }
        (self.out_dir / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")


def export(
    paths: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str], fmt: str = JSONL
) -> ExportSummary:
    """Write every table of every database found under ``paths`` into ``out_dir`` (see module doc)."""
    databases = find_databases(paths)
    summary = ExportSummary(Path(out_dir), rows=dict.fromkeys(TABLES, 0))
    with TableSinks(summary, fmt) as sinks:
        for path in databases:
            # Only SELECTs: exporting a live node's database takes no write lock (WAL readers don't block).
            db = sqlite_utils.Database(path)
            try:
                source: dict[str, Any] = {"path": str(path), "rows": {}}
                for table in TABLES:
                    if not db[table].exists():
                        continue
                    count = 0
                    for row in select_rows(db.conn, table):
                        sinks.write(table, row)
                        count += 1
                    source["rows"][table] = count
                journalled = [
                    typed_row(ACKS, dict(zip(columns(ACKS), r, strict=True)), with_seq=True)
                    for r in unimported_rows(str(path), db.conn)
                ]
                for row in journalled:
                    sinks.write(ACKS, row)
                if journalled:  # acks a stopped master answered but never imported (its ack journal)
                    source["rows"][ACKS] = source["rows"].get(ACKS, 0) + len(journalled)
                    source["journalAcks"] = len(journalled)
                summary.sources.append(source)
            finally:
                db.close()
    summary.write_manifest()
    return summary


def _arrow_schema(table: str) -> Any:
    import pyarrow as pa

    kinds = {STRING: pa.string(), LONG: pa.int64(), BOOLEAN: pa.bool_(), LONG_ARRAY: pa.list_(pa.int64())}
    return pa.schema([(name, kinds[kind]) for name, kind in export_columns(table)])


class _ParquetTable:
    """Writes one table as ``<out>/<table>/part-00000.parquet``, ``PARQUET_BATCH`` rows per row group."""

    def __init__(self, out_dir: Path, table: str) -> None:
        import pyarrow.parquet as pq

        directory = out_dir / table
        directory.mkdir(parents=True, exist_ok=True)
        self.schema = _arrow_schema(table)
        self.writer = pq.ParquetWriter(directory / "part-00000.parquet", self.schema)
        self.buffer: list[dict[str, Any]] = []

    def write(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= PARQUET_BATCH:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self.buffer:
            self.writer.write_table(pa.Table.from_pylist(self.buffer, schema=self.schema))
            self.buffer = []

    def close(self) -> None:
        self._flush()
        self.writer.close()


class TableSinks:
    """Writes exported rows table by table, as JSON Lines, Parquet, or ``auto`` (see ``AUTO_PARQUET_ROWS``).

    Memory stays bounded: JSON Lines go straight to the file, Parquet is buffered ``PARQUET_BATCH`` rows
    at a time, and an ``auto`` table that grows past the threshold is converted by streaming its file.
    Every table gets a file (empty when no source has rows), as ``read_tables`` and Spark expect."""

    def __init__(self, summary: ExportSummary, fmt: str = JSONL) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}")
        self.summary, self.fmt, self.out = summary, fmt, summary.out_dir
        self.out.mkdir(parents=True, exist_ok=True)
        self.jsonl: dict[str, Any] = {}
        self.parquet: dict[str, _ParquetTable] = {}
        for table in TABLES:
            summary.rows.setdefault(table, 0)
            if fmt == PARQUET:
                self.parquet[table] = _ParquetTable(self.out, table)
            else:
                self.jsonl[table] = open(table_file(self.out, table), "w", encoding="utf-8")  # noqa: SIM115

    def write(self, table: str, row: dict[str, Any]) -> None:
        self.summary.rows[table] += 1
        sink = self.parquet.get(table)
        if sink is not None:
            sink.write(row)
            return
        self.jsonl[table].write(json.dumps(row, separators=(",", ":")) + "\n")
        if self.fmt == AUTO and self.summary.rows[table] > AUTO_PARQUET_ROWS:
            self._to_parquet(table)

    def _to_parquet(self, table: str) -> None:
        self.jsonl.pop(table).close()
        path = table_file(self.out, table)
        sink = self.parquet[table] = _ParquetTable(self.out, table)
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                sink.write(json.loads(line))
        path.unlink()

    def close(self) -> None:
        for handle in self.jsonl.values():
            handle.close()
        for sink in self.parquet.values():
            sink.close()
        self.summary.formats = {t: (PARQUET if t in self.parquet else JSONL) for t in TABLES}

    def __enter__(self) -> TableSinks:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


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


def _parquet_rows(directory: Path) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    for path in sorted(directory.glob("*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches():
            yield from batch.to_pylist()


def table_rows(in_dir: str | os.PathLike[str], table: str) -> Iterator[dict[str, Any]]:
    """One table of an export directory as stored: its JSON Lines, or its ``<table>/`` Parquet (the
    export writes a large table as Parquet, ``--format auto``); nothing when the table is absent."""
    base = Path(in_dir)
    for path in _jsonl_files(table_file(base, table)):
        with open(path, encoding="utf-8") as handle:
            yield from (json.loads(line) for line in handle if line.strip())
    if not table_file(base, table).exists() and (base / table).is_dir():
        yield from _parquet_rows(base / table)


def read_tables(in_dir: str | os.PathLike[str]) -> dict[str, list[dict[str, Any]]]:
    """An export directory's tables (JSON Lines, or ``<table>/`` Parquet) back as typed rows (the pure
    checker's input; small data)."""
    base = Path(in_dir)
    if not base.is_dir():
        raise FileNotFoundError(f"not a directory: {base}")
    return {
        table: [typed_row(table, row, with_seq=True) for row in table_rows(base, table)] for table in TABLES
    }


def export_problems(in_dir: str | os.PathLike[str]) -> list[str]:
    """The ``problems`` an export's ``manifest.json`` lists (none without a manifest)."""
    path = Path(in_dir) / MANIFEST_FILE
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    problems = doc.get("problems") if isinstance(doc, dict) else None
    return [str(p) for p in problems] if isinstance(problems, list) else []
