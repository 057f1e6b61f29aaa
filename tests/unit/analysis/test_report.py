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


def test_axis_steps_are_round_and_few() -> None:
    from mqha.analysis.timeline_svg import axis_ticks

    assert [axis_ticks(span) for span in (1, 900, 14_500, 3_600_000)] == [1, 200, 2000, 500_000]
    assert all(span / axis_ticks(span) <= 8 for span in (7, 1234, 98_765, 10**9))


def test_timeline_labels_each_tenure_once_and_marks_stale_master_rows() -> None:
    import re

    t = h.CLEAN
    svg = render_timeline_svg(
        build_timelines(t["controller_events"], t["roles"], t["epochs"], t["truncations"])["b1"]
    )
    labels = re.findall(r'class="bar">([^<]+)</text>', svg)
    # Controller lane: the elections come within 60 ms of a 3 s picture, so only the last tenure has
    # room for its label (once, though a SyncStateSet change splits its bar); the others keep tooltips.
    assert [x for x in labels if x.startswith("e")] == ["e2 m2"]
    assert "<title>e0 m-: " in svg and "<title>e1 m1: " in svg
    # Broker 1 stays MASTER of epoch 1 in its own rows until 3000 ms, but the controllers named broker 2
    # at raftIndex 7: the rest of that row is drawn as "no role recorded".
    assert svg.count('class="stale"') == 1 and "no role recorded since" in svg


def test_html_says_inconclusive_with_reasons_and_what_was_checked() -> None:
    t = h._variant()
    t["final_logs"] = [r for r in t["final_logs"] if r["brokerId"] != 3]
    page = render_html(inv.check_all(t), {}, source="x", engine="python")
    assert "INCONCLUSIVE" in page and "no final log of replica(s) 3" in page
    assert "What was checked" in page and "missing: [3]" in page


def test_timeline_runs_until_the_sets_last_recorded_activity() -> None:
    """The picture ends at the set's last ack or read, not at its last role change: broker 1 rejoins as
    SLAVE at 3000 ms, the last event (3010 ms), and without the acks after it that period is a sliver."""
    import re

    t = h.CLEAN
    args = (t["controller_events"], t["roles"], t["epochs"], t["truncations"])
    assert build_timelines(*args)["b1"].time_range()[1] == h.T0 + 3010
    activity = [
        {"brokerName": "b1", "ts": h.T0 + 6000},
        {"brokerName": "b1", "ts": None},
        {"brokerName": "b9", "ts": h.T0 + 9000},  # a set with acks and no events: no picture
    ]
    timelines = build_timelines(*args, activity)
    assert set(timelines) == {"b1"}
    first = min(r["ts"] for r in t["controller_events"] if r.get("brokerName") == "b1")
    assert timelines["b1"].time_range() == (first, h.T0 + 6000)

    def slave_e2_widths(svg: str) -> list[float]:
        return [float(w) for w in re.findall(r'width="([\d.]+)"[^>]*><title>SLAVE e2 \(master 2\)<', svg)]

    # Broker 1's SLAVE period from 3000 ms: half the plot (944 px) with the acks, 3 px without.
    assert max(slave_e2_widths(render_timeline_svg(timelines["b1"]))) > 400
    assert min(slave_e2_widths(render_timeline_svg(build_timelines(*args)["b1"]))) < 5
