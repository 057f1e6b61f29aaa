"""History pages (``mqha.history.pages``): query validation and rowid paging over a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqha.history.pages import PAGE_MAX, PageRequestError, page_ndjson, page_query
from mqha.history.recorder import ClientHistory, HistoryRecorder


def test_page_query_validates_every_parameter() -> None:
    assert page_query({"table": "acks"}) == ("acks", 0, PAGE_MAX)
    assert page_query({"table": "final_logs", "afterSeq": "7", "limit": "3"}) == ("final_logs", 7, 3)
    for bad in (
        {},
        {"table": "nope"},
        {"table": "acks", "afterSeq": "-1"},
        {"table": "acks", "limit": "0"},
        {"table": "acks", "limit": str(PAGE_MAX + 1)},
        {"table": "acks", "limit": "x"},
        {"table": "acks", "extra": "1"},
    ):
        with pytest.raises(PageRequestError):
            page_query(bad)


def test_pages_follow_the_rowid_and_type_every_value(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    assert page_ndjson(path, "acks", 0, 10) == b""  # no database yet: an empty page
    with HistoryRecorder(path) as rec:
        client = ClientHistory(rec, "c")
        for i in range(5):
            client.ack(
                msg_id=f"m{i}",
                broker_name="b",
                broker_id=1,
                offset=2**40 + i,
                size=10,
                epoch=1,
                status="PUT_OK",
                ack_mode="allAckInSyncStateSet",
                ts=i,
            )
    pages, after = [], 0
    while True:
        rows = [json.loads(line) for line in page_ndjson(path, "acks", after, 2).splitlines()]
        pages.append([r["msgId"] for r in rows])
        if len(rows) < 2:
            break
        after = rows[-1]["seq"]
    assert pages == [["m0", "m1"], ["m2", "m3"], ["m4"]]
    first = json.loads(page_ndjson(path, "acks", 0, 1))
    assert first["offset"] == 2**40 and first["seq"] == 1 and first["client"] == "c"
    assert page_ndjson(path, "final_logs", 0, 10) == b""
