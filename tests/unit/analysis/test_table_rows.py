"""``table_rows``: one exported table, whichever format the export chose for it (a large table is
Parquet): the chaos verdict reads the reads and controller events through it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mqha.analysis.export import table_rows

ROWS = [
    {"brokerName": "broker-a", "offset": 0, "msgId": "A"},
    {"brokerName": "broker-a", "offset": 278, "msgId": "B"},
]


def test_json_lines_and_parquet_read_alike(tmp_path: Path) -> None:
    (tmp_path / "reads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert list(table_rows(tmp_path, "reads")) == ROWS
    parquet = tmp_path / "parquet"
    (parquet / "reads").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(ROWS), parquet / "reads" / "part-00000.parquet")
    assert list(table_rows(parquet, "reads")) == ROWS


def test_an_absent_table_has_no_rows(tmp_path: Path) -> None:
    assert list(table_rows(tmp_path, "controller_events")) == []
