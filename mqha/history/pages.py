"""Reading a history database page by page (shell): what ``mqha export`` reads from run directories and
what a node serves on ``GET /v1/history/rows`` (docs/architecture.md §5).

A page is the rows of one table with ``seq`` (the SQLite rowid) above ``after_seq``, in rowid order, at
most ``limit`` of them, each typed by ``mqha.history.schema.typed_row`` (64-bit integers whole,
SyncStateSets as arrays). Readers open the database read-only: a live node's writer is never blocked
(WAL), and a table that does not exist yet reads as empty.

The HTTP form (the controller's and the broker's handlers call ``page_query`` and ``page_ndjson``):
query ``table``, ``afterSeq`` (default 0), ``limit`` (default and maximum ``PAGE_MAX``); the answer is
NDJSON, one typed row per line, so a client streams it to disk and asks for the next page after the
last ``seq`` it got (a page shorter than ``limit`` is the last); an interrupted export restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from mqha.errors import MqhaError
from mqha.history.database import history_path
from mqha.history.schema import TABLES, columns, typed_row

PAGE_MAX = 50_000
NDJSON = "application/x-ndjson"


class PageRequestError(MqhaError, ValueError):
    """A bad ``table`` / ``afterSeq`` / ``limit`` (the caller's mistake: a 400)."""


def select_rows(
    conn: sqlite3.Connection, table: str, after_seq: int = 0, limit: int | None = None
) -> Iterator[dict[str, Any]]:
    """The typed rows of ``table`` after ``after_seq`` (see the module docstring); missing columns null."""
    present = {row[1] for row in conn.execute(f"PRAGMA table_info([{table}])")}
    if not present:
        return
    wanted = [c for c in columns(table) if c in present]
    select = ", ".join(["rowid AS seq", *(f"[{c}]" for c in wanted)])
    sql = f"SELECT {select} FROM [{table}] WHERE rowid > ? ORDER BY rowid"
    params: tuple[int, ...] = (after_seq,)
    if limit is not None:
        sql += " LIMIT ?"
        params = (after_seq, limit)
    cursor = conn.execute(sql, params)
    names = [d[0] for d in cursor.description]
    for values in cursor:
        yield typed_row(table, dict(zip(names, values, strict=True)), with_seq=True)


@contextlib.contextmanager
def read_only(path: str | os.PathLike[str]) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection to ``path``, or None when the file does not exist."""
    if not os.path.exists(path):
        yield None
        return
    conn = sqlite3.connect(f"file:{os.fspath(path)}?mode=ro", uri=True, timeout=5.0)
    try:
        yield conn
    finally:
        conn.close()


def page_query(query: Mapping[str, str]) -> tuple[str, int, int]:
    """``(table, after_seq, limit)`` from a request's query, validated (``PageRequestError``)."""
    unknown = set(query) - {"table", "afterSeq", "limit"}
    if unknown:
        raise PageRequestError(f"unknown query parameter(s): {', '.join(sorted(unknown))}")
    table = query.get("table", "")
    if table not in TABLES:
        raise PageRequestError(f"table must be one of {', '.join(TABLES)}; got {table!r}")
    try:
        after_seq = int(query.get("afterSeq", "0"))
        limit = int(query.get("limit", str(PAGE_MAX)))
    except ValueError:
        raise PageRequestError("afterSeq and limit must be integers") from None
    if after_seq < 0 or not 1 <= limit <= PAGE_MAX:
        raise PageRequestError(f"afterSeq must be >= 0 and limit within 1..{PAGE_MAX}")
    return table, after_seq, limit


def page_ndjson(path: str | os.PathLike[str], table: str, after_seq: int, limit: int) -> bytes:
    """One page of ``path``'s ``table`` as NDJSON bytes (empty when the database does not exist)."""
    with read_only(path) as conn:
        if conn is None:
            return b""
        lines = [json.dumps(row, separators=(",", ":")) for row in select_rows(conn, table, after_seq, limit)]
    return ("\n".join(lines) + "\n").encode() if lines else b""


async def serve_page(
    store_dir: str | os.PathLike[str], query: Mapping[str, str], bad_request: Callable[[str], Exception]
) -> bytes:
    """The HTTP handlers' part: one page of ``<store_dir>/history.db`` as NDJSON, read in a worker
    thread; a bad query raises ``bad_request(remark)`` (each API's own 400)."""
    try:
        table, after_seq, limit = page_query(query)
    except PageRequestError as exc:
        raise bad_request(str(exc)) from None
    return await asyncio.to_thread(page_ndjson, history_path(store_dir), table, after_seq, limit)
