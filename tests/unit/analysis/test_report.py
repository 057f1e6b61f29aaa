"""Report rendering and the schema's typing: pure values in, strings and rows out."""

from __future__ import annotations

import json

from mqha.analysis import invariants as inv
from mqha.analysis.report import build_timelines, render_html, render_timeline_svg, summary_text
from mqha.history.schema import TABLES, schema_document, typed_row
from tests.unit.analysis import histories as h


def test_typed_row_keeps_64_bit_integers_and_reads_arrays_from_json_text() -> None:
    row = typed_row("controller_events", {"raftIndex": "7", "syncStateSet": "[3, 1]", "accepted": 1, "x": 5})
    assert row["raftIndex"] == 7 and row["syncStateSet"] == [1, 3] and row["accepted"] is True
    assert "x" not in row and row["node"] is None
    assert typed_row("acks", {"offset": 2**63 - 1}, with_seq=True)["offset"] == 2**63 - 1
    assert set(typed_row("acks", {}, with_seq=True)) == {*(c for c, _ in TABLES["acks"]), "seq"}


def test_schema_document_names_every_table_and_kind() -> None:
    doc = schema_document()
    assert set(doc["tables"]) == set(TABLES)
    assert {"name": "offset", "type": "long"} in doc["tables"]["final_logs"]
    assert {"name": "syncStateSet", "type": "array<long>"} in doc["tables"]["controller_events"]
    json.dumps(doc)


def test_timelines_keep_one_row_per_master_change() -> None:
    t = h.CLEAN
    timelines = build_timelines(t["controller_events"], t["roles"], t["epochs"], t["truncations"])
    b1 = timelines["b1"]
    # Three nodes x 8 entries collapse to the changes of (master, masterEpoch, syncStateSetEpoch).
    assert [(r["raftIndex"], r["masterBrokerId"], r["masterEpoch"]) for r in b1.controller] == [
        (2, None, 0),
        (5, 1, 1),
        (6, 1, 1),
        (7, 2, 2),
        (8, 2, 2),
    ]
    assert b1.broker_ids() == [1, 2, 3]
    svg = render_timeline_svg(b1)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "e1 m1" in svg and "e2 m2" in svg and "truncated 400 -&gt; 300 (divergent tail)" in svg
    assert "epoch 2 starts at offset 300" in svg


def test_summary_and_html_name_each_violation_with_its_rows() -> None:
    verdict = inv.check_all(h.two_masters_in_epoch())
    text = summary_text(verdict)
    assert text.startswith("mqha analyze: FAILED -- violated: two_masters_in_epoch\n")
    assert "masterIds=[2, 3]" in text and "duplicate" in text
    page = render_html(verdict, {}, source="x", engine="python")
    assert "FAILED: two_masters_in_epoch" in page and "<table>" in page
    ok = summary_text(inv.check_all(h.CLEAN))
    assert ok.startswith("mqha analyze: OK")
