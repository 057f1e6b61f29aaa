"""``mqha.cluster.controller_store`` against fake controllers on 127.0.0.1: it follows the leader (2007,
``leaderAddress``), retries 503 until its bound, stops on any other refusal, and sends the admin token."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mqha.cluster import controller_store
from mqha.cluster.nodes import ClusterError

pytestmark = pytest.mark.integration


class FakeController:
    """Answers POSTs from a script of (HTTP status, JSON body), the last one repeated; records calls."""

    def __init__(self, script: list[tuple[int, dict[str, object]]]) -> None:
        self.script = script
        self.calls: list[tuple[str, dict[str, object], str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.calls.append((self.path, body, self.headers.get("Authorization", "")))
                status, answer = fake.script[min(len(fake.calls), len(fake.script)) - 1]
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"


@pytest.fixture
def fakes() -> Iterator[list[FakeController]]:
    made: list[FakeController] = []
    yield made
    for fake in made:
        fake.server.shutdown()
        fake.server.server_close()


def start(fakes: list[FakeController], script: list[tuple[int, dict[str, object]]]) -> FakeController:
    fake = FakeController(script)
    fake.thread.start()
    fakes.append(fake)
    return fake


def test_remove_follows_the_leader_and_retries_while_it_has_no_quorum(fakes: list[FakeController]) -> None:
    leader = start(
        fakes, [(503, {"code": 14}), (503, {"code": 14}), (200, {"code": 0, "voters": ["a", "b"]})]
    )
    follower = start(fakes, [(421, {"code": 2007, "leaderAddress": leader.address})])
    voters = controller_store.remove_voter([follower.url, leader.url], "127.0.0.1:1", "tok", timeout=10)
    assert voters == ["a", "b"]
    assert len(follower.calls) == 1  # once told who leads, it asks the leader
    assert [c[0] for c in leader.calls] == ["/v1/controller/peers/remove"] * 3
    assert leader.calls[0][1] == {"address": "127.0.0.1:1"}
    assert leader.calls[0][2] == "Bearer tok"


def test_a_refusal_other_than_not_leader_or_not_yet_stops_at_once(fakes: list[FakeController]) -> None:
    leader = start(fakes, [(400, {"code": 2005, "remark": "a voter already serves at x"})])
    with pytest.raises(ClusterError, match=r"refused.*a voter already serves"):
        controller_store.remove_voter([leader.url], "127.0.0.1:1", "tok", timeout=10)
    assert len(leader.calls) == 1


def test_not_yet_is_retried_only_until_the_timeout(fakes: list[FakeController]) -> None:
    leader = start(fakes, [(503, {"code": 14, "remark": "not caught up"})])
    with pytest.raises(ClusterError, match=r"not done within 1 s.*not caught up"):
        controller_store.remove_voter([leader.url], "127.0.0.1:1", "tok", timeout=1)
    assert 2 <= len(leader.calls) <= 8
