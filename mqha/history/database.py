"""The history database (shell): where a node's ``history.db`` lives, and its SQLite file with the
tables of ``mqha.history.schema`` (docs/architecture.md §5), typed rows and one transaction per batch.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

import sqlite_utils

from mqha.history.schema import BOOLEAN, LONG, LONG_ARRAY, PRIMARY_KEYS, STRING, TABLES

HISTORY_FILE_NAME = "history.db"
_SQL_TYPES = {STRING: str, LONG: int, BOOLEAN: int, LONG_ARRAY: str}


def history_path(store_dir: str | os.PathLike[str]) -> str:
    """Where a node keeps its history: ``<store_dir>/history.db``."""
    return os.path.join(os.fspath(store_dir), HISTORY_FILE_NAME)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _sql_value(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == LONG_ARRAY:
        return json.dumps(sorted(int(v) for v in value))
    if kind == BOOLEAN:
        return 1 if value else 0
    if kind == LONG:
        return int(value)
    return str(value)


def sql_row(table: str, row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(_sql_value(kind, row.get(name)) for name, kind in TABLES[table])


def create_tables(db: sqlite_utils.Database) -> None:
    """Every §5 table, if missing (columns typed, primary keys where rows are keyed); a table of an older
    database gains the columns added since (§5: columns are added, never renamed)."""
    for table, cols in TABLES.items():
        pk = PRIMARY_KEYS.get(table)
        handle = db[table]
        if handle.exists():
            present = set(handle.columns_dict)  # type: ignore[union-attr]
            for name, kind in cols:
                if name not in present:
                    handle.add_column(name, _SQL_TYPES[kind])  # type: ignore[union-attr]
            continue
        handle.create(  # type: ignore[union-attr]
            {name: _SQL_TYPES[kind] for name, kind in cols},
            pk=pk if pk is None else (pk[0] if len(pk) == 1 else pk),
            if_not_exists=True,
        )


def open_database(path: str | os.PathLike[str], *, durable: bool = False) -> sqlite_utils.Database:
    """A sqlite-utils database in WAL mode with the §5 tables (created if missing)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # SQLite gives its -wal and -shm files the same mode
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    db = sqlite_utils.Database(os.fspath(path))
    db.conn.isolation_level = None  # transactions are explicit (BEGIN ... COMMIT per batch)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
    db.execute("PRAGMA busy_timeout=5000")
    create_tables(db)
    return db


@contextlib.contextmanager
def transaction(db: sqlite_utils.Database) -> Iterator[None]:
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.conn.execute("ROLLBACK")
        raise
    db.conn.execute("COMMIT")
