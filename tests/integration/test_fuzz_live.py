"""Issue 23 part 6: bounded fuzzing of a live mqcontroller and a live mqbroker (Hypothesis, seconds).

Malformed requests (random bytes, wrong JSON types, huge numbers, deep nesting, random paths, methods,
query parameters and headers) at every HTTP route of both processes, and random or truncated frames at
the broker's HA port (layouts: ``mqha.autoswitch_ha.frames``). After each one:

* no answer is a 500 (and every API answer of the controller is the JSON envelope);
* both processes are alive;
* nothing changed without a success: the controller's replicated state (applied index and groups) only
  moves on a 200 answer and holds only names of the wire's name rule; the broker's max and confirm
  offsets only move on a 200 put; an HA frame changes neither.

Requests go over raw sockets so that anything (bad methods, odd headers, lying Content-Length) can be
sent. Example counts keep the whole module within a few tens of seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqha.autoswitch_ha import frames
from mqha.controller.http_api import ROUTES
from mqha.wire.broker_api import PUT_STREAM_PATH, decode_stream_reply
from mqha.wire.types import is_valid_name
from tests.helpers.processes import ProcessGroup, wait_until
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker
from tests.integration.controller_cluster import ControllerCluster, Node

pytestmark = pytest.mark.integration

FUZZ = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,  # the same examples in every run: a failure here is reproducible, never a flake
)
STREAMS = {"/v1/console/events"}  # answers that never end: read the status line only
BROKER_ROUTES = (
    ("POST", "/v1/messages"),
    ("GET", "/v1/messages"),
    ("GET", PUT_STREAM_PATH),  # the upgrade, fuzzed as plain HTTP
    ("GET", "/v1/epochs"),
    ("GET", "/v1/ha/status"),
    ("GET", "/v1/status"),
    ("GET", "/v1/queues"),
    ("GET", "/metrics"),
    ("GET", "/healthz"),
    ("POST", "/v1/history/final-log"),
    ("GET", "/v1/history/rows"),
)
CONTROLLER_ROUTES = tuple((method, path) for method, path, _, _ in ROUTES)
Request = tuple[str, str, list[tuple[str, str]], bytes]
"""method, target (path and query), headers, body."""
GROUP = "bs1"  # the broker set of the live broker: fuzzed writes aim elsewhere ("nosuch")


@dataclass
class Live:
    """The processes under fuzz: one controller node and the master broker registered with it."""

    controller: Node
    broker: Broker


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    base = Path(tmp_path_factory.mktemp("fuzz"))
    with ProcessGroup() as group:
        controllers = ControllerCluster(group, base / "controller", size=1)
        controllers.start()
        node = controllers.leader()
        broker = Broker("b1", base / "broker", settings={**BROKER_TEST_SETTINGS, "brokerName": GROUP})
        broker.start(group, node.address)

        def serving() -> bool:
            status = broker.try_status()
            return status is not None and status["role"] == "MASTER" and not status["fenced"]

        wait_until(serving, 30, message="the broker is an unfenced master")
        status, body = broker.put(["before the fuzz"])
        assert status == 200, body
        yield Live(node, broker)


# ------------------------------------------------------------------------------------ raw HTTP


def http(
    port: int, method: str, target: str, headers: list[tuple[str, str]], body: bytes
) -> tuple[int, bytes]:
    """One request over a fresh socket; (status, body) of the answer, status 0 when none came."""
    head = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    head += [f"{name}: {value}" for name, value in headers]
    if not any(name.lower() == "content-length" for name, _ in headers):
        head.append(f"Content-Length: {len(body)}")
    data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        with contextlib.suppress(OSError):  # the server may answer (413) and close before reading all
            sock.sendall(data)
        received = b""
        stream = target.split("?", maxsplit=1)[0] in STREAMS
        try:
            while chunk := sock.recv(65536):
                received += chunk
                if stream and b"\r\n\r\n" in received:
                    break
        except OSError:
            pass
    if not received.startswith(b"HTTP/1."):
        return 0, received
    status_line, _, rest = received.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def get_json(port: int, target: str) -> Any:
    status, body = http(port, "GET", target, [], b"")
    assert status == 200, (target, status, body[:300])
    return json.loads(body)


# ------------------------------------------------------------------------------------ strategies

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
huge_numbers = st.sampled_from([2**63, 2**64 - 1, -(2**63) - 1, 10**400, -5, -1, 0, 2**31])
names = st.sampled_from(["nosuch", "", "\x00", "a/b", "a.b", "A" * 200, "%", "..", "é"]) | st.text(
    max_size=10
)

TEMPLATES: dict[str, dict[str, Any]] = {
    "/v1/brokers/apply-id": {
        "clusterName": "c1",
        "brokerName": "nosuch",
        "appliedBrokerId": 1,
        "registerCheckCode": "127.0.0.1:1;1",
    },
    "/v1/brokers/register": {
        "clusterName": "c1",
        "brokerName": "nosuch",
        "brokerId": 7,
        "brokerAddress": "h:1",
    },
    "/v1/brokers/heartbeat": {
        "clusterName": "c1",
        "brokerName": "nosuch",
        "brokerId": 7,
        "brokerAddr": "h:1",
    },
    "/v1/groups/nosuch/elect": {"brokerId": 7, "designateElect": True},
    "/v1/groups/nosuch/sync-state-set": {
        "masterBrokerId": 7,
        "masterEpoch": 1,
        "syncStateSet": [7],
        "syncStateSetEpoch": 1,
    },
    "/v1/groups/nosuch/clean": {"clusterName": "c1", "brokerControllerIdsToClean": [7]},
    "/v1/messages": {"topic": "orders", "body": "x"},
    "/v1/consumer-offsets/update": {
        "offsets": [
            {"consumerGroup": "g", "topic": "t", "brokerName": "nosuch", "queueId": 0, "commitOffset": 1}
        ]
    },
}
"""Valid bodies to break one field of; writes aim at a set that does not exist, so that a mutation that
happens to be valid still changes nothing the other examples rely on (apply-id of id 1 creates that
set: a mutated name must then be refused)."""
# The config PUT is fuzzed with values that can never be valid for an integer key (no digits).
CONFIG_BREAKERS = st.none() | st.floats() | st.lists(json_scalars, max_size=3) | st.text("abcxyz", max_size=8)


@st.composite
def mutated(draw: st.DrawFn, template: dict[str, Any]) -> bytes:
    body = dict(template)
    key = draw(st.sampled_from([*sorted(body), "unknownField"]))
    action = draw(st.sampled_from(["replace", "drop", "huge", "name"]))
    if action == "drop":
        body.pop(key, None)
    elif action == "huge":
        body[key] = draw(huge_numbers)
    elif action == "name":
        body[key] = draw(names)
    else:
        body[key] = draw(json_values)
    return json.dumps(body).encode()


def deep(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth if depth % 2 else b"[" * depth + b"]" * depth


@st.composite
def bodies(draw: st.DrawFn, path: str) -> bytes:
    kinds = ["bytes", "json", "deep", "empty"]
    if path in TEMPLATES:
        kinds += ["mutated"] * 3
    if path == "/v1/controller/config":
        kinds += ["config"] * 2
    kind = draw(st.sampled_from(kinds))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    if kind == "deep":
        return deep(draw(st.sampled_from([33, 1000, 100_000])))
    if kind == "mutated":
        return draw(mutated(TEMPLATES[path]))
    if kind == "config":
        key = draw(st.sampled_from(["scanNotActiveBrokerInterval", "electMasterMaxRetryCount", "nope"]))
        return json.dumps({key: draw(CONFIG_BREAKERS)}).encode()
    return b""


header_values = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)
headers = st.lists(
    st.tuples(
        st.sampled_from(["Content-Type", "Authorization", "Content-Length", "Accept", "X-Fuzz", "Upgrade"]),
        header_values,
    ),
    max_size=3,
    unique_by=lambda item: item[0].lower(),
)
query_keys = st.sampled_from(["clusterName", "brokerName", "offset", "maxMessages", "x", ""]) | st.text(
    max_size=6
)
queries = st.lists(st.tuples(query_keys, st.text(max_size=12) | huge_numbers.map(str)), max_size=3)


@st.composite
def requests(
    draw: st.DrawFn, routes: tuple[tuple[str, str], ...]
) -> tuple[str, str, list[tuple[str, str]], bytes]:
    writes = tuple(route for route in routes if route[0] in ("POST", "PUT"))
    method, path = draw(st.sampled_from(routes) | st.sampled_from(writes))  # writes: half of the examples
    if "{brokerName}" in path:
        path = path.replace("{brokerName}", urllib.parse.quote(draw(names), safe="") or "nosuch")
    if "{asset}" in path:
        path = path.replace("{asset}", urllib.parse.quote(draw(st.text(max_size=12)), safe="") or "x")
    if draw(st.integers(0, 9)) == 0:
        path = "/" + urllib.parse.quote(draw(st.text(max_size=20)))
    if draw(st.integers(0, 4)) == 0:
        method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "FUZZ"]))
    query = urllib.parse.urlencode(draw(queries))
    target = f"{path}?{query}" if query else path
    template_path = path if path in TEMPLATES else "/v1/messages" if path.endswith("/messages") else path
    body = draw(bodies(template_path)) if method in ("POST", "PUT", "PATCH") else b""
    # A Content-Length above the bytes sent only makes the server wait for the rest: cap it.
    fields = [
        (
            name,
            str(len(body))
            if name == "Content-Length" and value.isdigit() and int(value) > len(body)
            else value,
        )
        for name, value in draw(headers)
    ]
    return method, target, fields, body


# ------------------------------------------------------------------------------------ HTTP fuzz


def controller_state(node: Node) -> Any:
    return get_json(node.port, "/v1/controller/status")["state"]


REFERENCE_500 = ("/v1/sync-state-data", b'"remark":"not set any response code"')
"""The one 500 the reference itself answers: getSyncStateData of no broker set (reference-behaviour.md
§5.7 keeps its SYSTEM_ERROR, in the envelope)."""


def _answered_sanely(status: int, body: bytes, target: str) -> None:
    """No 500 (but the reference's own); an error is the JSON envelope, or the HTTP parser's own plain
    400 (a request line or header it cannot read never reaches the API)."""
    assert status != 0, "no HTTP answer"
    if status == 500 and target.partition("?")[0] == REFERENCE_500[0] and REFERENCE_500[1] in body:
        return
    assert status < 500, (status, body[:300])
    if status >= 400 and body.startswith(b"{"):
        reply = json.loads(body)
        assert {"code", "codeName", "remark"} <= set(reply), reply
    elif status >= 400 and body:  # (HEAD answers carry no body)
        assert status == 400, (status, body[:300])


def fuzz_once(
    port: int, request: Request, state: Callable[[], Any], alive: Callable[[], bool]
) -> tuple[Any, Any]:
    """Send ``request``; check the answer and that the process lives. Returns the state before/after and
    leaves it to the caller to say which change the answer allowed."""
    before = state()
    method, target, extra, body = request
    status, answer = http(port, method, target, extra, body)
    _answered_sanely(status, answer, target)
    assert alive(), "the process died"
    after = state()
    if after != before:
        assert status == 200, (method, target, body[:200], status, answer[:300])
    return before, after


@FUZZ
@given(request=requests(CONTROLLER_ROUTES))
def test_controller_routes_survive_malformed_requests(live: Live, request: Request) -> None:
    node = live.controller
    _, after = fuzz_once(node.port, request, lambda: controller_state(node), node.running)
    assert all(is_valid_name(group["brokerName"]) for group in after["groups"]), after


def broker_offsets(broker: Broker) -> tuple[int, int]:
    status = get_json(broker.port, "/v1/status")
    return status["maxOffset"], status["confirmOffset"]


@FUZZ
@given(request=requests(BROKER_ROUTES))
def test_broker_routes_survive_malformed_requests(live: Live, request: Request) -> None:
    broker = live.broker
    assert broker.proc is not None
    before, after = fuzz_once(broker.port, request, lambda: broker_offsets(broker), broker.proc.is_running)
    if after != before:  # only a put moves the offsets
        assert request[0] == "POST" and request[1].split("?", 1)[0] == "/v1/messages", request


@FUZZ
@given(frames_=st.lists(bodies("/v1/messages"), min_size=1, max_size=4))
def test_the_put_stream_answers_every_malformed_frame_and_goes_on(live: Live, frames_: list[bytes]) -> None:
    """Fuzzed put bodies as frames on one put stream: each gets a reply frame as a POST would (never
    a 5xx), only a 200 moves the log, and the broker lives."""
    broker = live.broker
    assert broker.proc is not None

    async def exchange() -> list[int]:
        statuses = []
        url = f"http://127.0.0.1:{broker.port}{PUT_STREAM_PATH}"
        async with aiohttp.ClientSession() as session, session.ws_connect(url) as stream:
            for frame in frames_:
                await stream.send_bytes(frame)
                reply = await stream.receive(timeout=10)
                assert reply.type is aiohttp.WSMsgType.BINARY, (frame[:200], reply)
                status, body = decode_stream_reply(reply.data)
                assert 200 <= status < 500 and isinstance(json.loads(body)["code"], int), (frame[:200], body)
                statuses.append(status)
        return statuses

    before = broker_offsets(broker)
    statuses = asyncio.run(exchange())
    assert broker.proc.is_running(), "the process died"
    if broker_offsets(broker) != before:
        assert 200 in statuses, (frames_, statuses)


# ------------------------------------------------------------------------------------ HA frames

handshake = st.builds(
    lambda sync, learner, slave: frames.SLAVE_HANDSHAKE.pack(frames.CODE_HANDSHAKE, sync, learner, slave),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**63), 2**63 - 1),
)
ack = st.builds(
    lambda offset: frames.SLAVE_ACK.pack(frames.CODE_TRANSFER, offset), st.integers(-(2**63), 2**63 - 1)
)
bad_state = st.builds(
    lambda state, rest: struct.pack(">i", state) + rest,
    st.integers(-(2**31), 2**31 - 1).filter(lambda code: code != frames.CODE_HANDSHAKE),
    st.binary(min_size=12, max_size=64),
)


@st.composite
def ha_streams(draw: st.DrawFn) -> tuple[bytes, bool]:
    """Bytes for the HA port and whether they hold a complete invalid frame the master must refuse."""
    kind = draw(st.sampled_from(["random", "bad_state", "truncated", "handshake_then_junk"]))
    if kind == "random":
        data = draw(st.binary(min_size=1, max_size=300))
        return data, len(data) >= frames.SLAVE_HANDSHAKE_SIZE and data[:4] != b"\x00\x00\x00\x01"
    if kind == "bad_state":
        return draw(bad_state), True
    if kind == "truncated":
        whole = draw(handshake | ack)
        return whole[: draw(st.integers(1, len(whole) - 1))], False
    rest = draw(st.lists(ack | st.binary(max_size=20), max_size=3))
    return draw(handshake) + b"".join(rest), False


@FUZZ
@given(stream=ha_streams())
def test_ha_port_survives_random_and_truncated_frames(live: Live, stream: tuple[bytes, bool]) -> None:
    broker = live.broker
    before = broker_offsets(broker)
    data, refused = stream
    with socket.create_connection(("127.0.0.1", broker.ha_port), timeout=3) as sock:
        sock.sendall(data)
        if refused:  # a complete frame that is not a slave's handshake: the master hangs up
            sock.settimeout(3)
            try:
                while sock.recv(65536):
                    pass
            except ConnectionResetError:
                pass
    assert broker.proc is not None and broker.proc.is_running(), "the broker died"
    assert get_json(broker.port, "/healthz")["role"] == "MASTER"
    assert broker_offsets(broker) == before
