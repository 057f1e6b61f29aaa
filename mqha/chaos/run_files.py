"""The files a chaos run reads back and writes beside its history (shell).

``exported_rows``: a table of the run's export (JSON Lines or Parquet). ``write_fault_rows``: one JSON
line per injected fault with its final recovery figures (``mqha.chaos.verdict.fault_rows``), so that
tables across runs -- a soak's recovery p50/p99 per fault kind and configuration -- are computed from
the faults themselves, not from the printed percentiles.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mqha.analysis.export import table_rows

FAULTS_FILE = "faults.jsonl"


def exported_rows(export_dir: Path, table: str) -> list[dict[str, Any]]:
    """The rows of an exported table, JSON Lines or Parquet (none when the export did not run)."""
    try:
        return list(table_rows(export_dir, table))
    except OSError:
        return []


def write_fault_rows(run_dir: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """``run_dir/faults.jsonl``: one JSON object per line."""
    path = run_dir / FAULTS_FILE
    path.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    return path
