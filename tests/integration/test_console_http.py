"""The console's routes on a real ``mqcontroller``: page and assets, the SSE stream, the violations source.

One controller node (a Raft group of one) on 127.0.0.1; brokers are played by HTTP calls (register,
heartbeat, elect) so each change the stream must push is made explicitly.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.analysis import invariants as inv
from mqha.analysis.report import write_reports
from tests.helpers.processes import ProcessGroup
from tests.integration.controller_cluster import ControllerCluster, Node, heartbeat, register_broker

pytestmark = pytest.mark.integration


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with ProcessGroup() as group:
        cluster = ControllerCluster(group, tmp_path, size=1)
        cluster.start()
        yield cluster.leader(timeout=10)


def _get(node: Node, path: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(node.url + path, timeout=5) as response:
            return response.status, response.headers.get_content_type(), response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get_content_type(), err.read()


class EventStream:
    """A bounded reader of ``GET /v1/console/events`` (server-sent events)."""

    def __init__(self, node: Node) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", node.port, timeout=5)
        self.conn.request("GET", "/v1/console/events")
        self.response = self.conn.getresponse()

    def next_event(self) -> tuple[str, Any] | None:
        """The next event with data as (name, JSON), or None at the end of the stream."""
        name, data = "message", None
        while True:
            line = self.response.readline()
            if not line:
                return None
            text = line.decode().rstrip("\n")
            if text == "" and data is not None:
                return name, json.loads(data)
            if text.startswith("event: "):
                name = text[len("event: ") :]
            elif text.startswith("data: "):
                data = text[len("data: ") :]

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            event = self.next_event()
            assert event is not None, "the stream ended"
            name, snapshot = event
            assert name == "snapshot"
            if predicate(snapshot):
                return snapshot
        raise AssertionError(f"no snapshot matching the predicate within {timeout:g} s")

    def close(self) -> None:
        self.conn.close()


def test_console_page_and_its_assets_are_served_with_their_media_types(node: Node) -> None:
    status, kind, body = _get(node, "/")
    assert (status, kind) == (200, "text/html")
    assert b'src="/console/app.js"' in body and b"/console/style.css" in body
    assert _get(node, "/console/app.js")[:2] == (200, "text/javascript")
    assert _get(node, "/console/style.css")[:2] == (200, "text/css")
    for missing in ("/console/index.html", "/console/nope.js", "/console/.."):
        status, kind, body = _get(node, missing)
        assert (status, kind) == (404, "application/json"), missing
        assert json.loads(body)["code"] == 3


def test_event_stream_pushes_a_snapshot_at_once_and_after_each_change(node: Node) -> None:
    stream = EventStream(node)
    try:
        assert stream.response.getheader("Content-Type") == "text/event-stream"
        first = stream.wait_for(lambda s: True)
        assert first["node"]["isLeader"] is True and first["node"]["nodeId"] == "n0"
        assert first["groups"] == [] and first["timeline"] == []

        assert register_broker(node, "b1") == 1
        registered = stream.wait_for(lambda s: bool(s["groups"]))
        assert registered["groups"][0]["masterBrokerId"] is None

        node.post("/v1/brokers/heartbeat", heartbeat("b1", 1, max_offset=100, timeout_ms=60_000))
        status, body = node.post("/v1/groups/b1/elect", {"clusterName": "c1", "brokerId": 1})
        assert status == 200, body
        elected = stream.wait_for(lambda s: s["groups"][0]["masterBrokerId"] == 1)
        group = elected["groups"][0]
        assert (group["masterEpoch"], group["syncStateSet"]) == (1, [1])
        assert group["replicas"][0]["alive"] and group["replicas"][0]["maxOffset"] == 100
        assert [row["type"] for row in elected["timeline"]] == ["ElectMaster"]
        assert elected["clusters"] == {"c1": ["b1"]}
    finally:
        stream.close()


def test_violations_source_says_unconfigured_missing_unreadable_or_shows_the_verdict(
    node: Node, tmp_path: Path
) -> None:
    def analysis() -> dict[str, Any]:
        status, body = node.get("/v1/console/analysis")
        assert status == 200, body
        return body

    assert analysis() | {"code": 0} == {
        "code": 0,
        "codeName": "SUCCESS",
        "remark": "",
        "configured": False,
        "reportDir": None,
        "report": None,
        "error": None,
    }
    report_dir = tmp_path / "report"
    status, body = node.call("PUT", "/v1/controller/config", {"consoleAnalysisReportDir": str(report_dir)})
    assert (status, body["remark"]) == (200, ""), body  # a live key: no restart needed
    assert "no verdict.json" in analysis()["error"]

    findings = tuple(
        inv.Finding(
            name, 2 if name == inv.LOST_ACK else 0, ({"msgId": "m1"},) if name == inv.LOST_ACK else ()
        )
        for name in inv.CHECKS
    )
    write_reports(inv.Verdict(findings, {"acks": 5}), {}, report_dir, source="runs/r1", engine="python")
    shown = analysis()
    assert shown["error"] is None
    assert (shown["report"]["ok"], shown["report"]["failed"]) == (False, ["lost_ack"])
    assert shown["report"]["status"] == "violated" and shown["report"]["reasons"][0] == "violated: lost_ack"
    assert shown["report"]["coverage"]["acksChecked"] == 0
    assert shown["report"]["checks"][0]["rows"] == [{"msgId": "m1"}]

    (report_dir / "verdict.json").write_text("{not json")
    assert "cannot use" in analysis()["error"]
    assert node.get("/v1/console/analysis?x=1")[0] == 400


def test_stopping_the_node_ends_open_streams_and_the_process_exits_cleanly(node: Node) -> None:
    stream = EventStream(node)
    try:
        assert stream.next_event() is not None
        assert node.proc is not None
        started = time.monotonic()
        assert node.proc.stop(timeout=10) == 0, node.proc.log_tail()
        assert time.monotonic() - started < 5
        assert stream.next_event() is None
    finally:
        stream.close()
