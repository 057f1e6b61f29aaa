"""Wire-layer micro-benchmark: decode+validate and encode per request, old codecs vs new, same run.

Times, per representative body, what the controller and broker do at their HTTP edge and in the Raft
log: request bytes -> checked request value, reply value -> body bytes, record -> log bytes -> record.
It runs itself once per code tree (``--before``: a checkout of the older commit, e.g. made with
``git worktree add --detach /tmp/before e1172b5``; ``--after``: this checkout) in child
processes with that tree on PYTHONPATH, and prints ns/op side by side with the ratio after/before.
Each child detects which API its tree has (the hand-written codecs, or ``mqha.wire``'s msgspec structs)
and runs the steps that tree's server runs.

    python scripts/bench_wire.py --before DIR [--after DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent

HEARTBEAT = {
    "clusterName": "c1",
    "brokerName": "broker-a",
    "brokerAddr": "10.0.0.1:10911",
    "brokerId": 2,
    "epoch": 7,
    "maxOffset": 123456789,
    "confirmOffset": 123456000,
    "heartbeatTimeoutMills": 10000,
    "electionPriority": 3,
}
ALTER = {"masterBrokerId": 1, "masterEpoch": 7, "syncStateSet": [1, 2, 3], "syncStateSetEpoch": 12}
REGISTER = {
    "clusterName": "c1",
    "brokerName": "broker-a",
    "brokerId": 2,
    "brokerAddress": "10.0.0.2:10911",
    "haAddress": "10.0.0.2:10912",
}
PUT = {"topic": "bench-topic", "body": "x" * 1024}


def _time(fn: Callable[[], Any], repeat: int) -> float:
    """Best ns/op over ``repeat`` rounds of a loop sized to take ~20 ms."""
    n = 1
    while True:
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        if time.perf_counter_ns() - start > 20_000_000 or n >= 1 << 20:
            break
        n *= 2
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / n)
    return best


def _cases() -> dict[str, Callable[[], Any]]:
    from mqha.broker import protocol
    from mqha.codes import ResponseCode
    from mqha.controller.records import ElectMasterRecord, decode_record, encode_record
    from mqha.wire import controller_api as api

    new = hasattr(api.BrokerHeartbeatRequest, "decode")
    heartbeat, alter, register = (json.dumps(b).encode() for b in (HEARTBEAT, ALTER, REGISTER))
    put = json.dumps(PUT).encode()
    member = api.BrokerMemberGroup(
        cluster="c1", broker_name="broker-a", broker_addrs={1: "10.0.0.1:10911", 2: "10.0.0.2:10911"}
    )
    elect = api.ElectMasterPayload(
        master_broker_id=1,
        master_address="10.0.0.1:10911",
        master_ha_address="10.0.0.1:10912",
        master_epoch=8,
        sync_state_set_epoch=13,
        sync_state_set=frozenset({1}),
        broker_member_group=member,
    )
    altered = api.AlterSyncStateSetPayload(
        new_sync_state_set_epoch=13, sync_state_set=frozenset({1, 2, 3}), sync_state_set_epoch=13
    )
    registered = api.RegisterBrokerPayload(
        cluster_name="c1",
        broker_name="broker-a",
        master_broker_id=1,
        master_address="10.0.0.1:10911",
        master_ha_address="10.0.0.1:10912",
        master_epoch=8,
        sync_state_set_epoch=13,
        sync_state_set=frozenset({1, 2}),
    )
    record = ElectMasterRecord("c1", "broker-a", 2, 7, 12)
    record_bytes = encode_record(record)
    ok = ResponseCode.SUCCESS
    outcome = protocol.PutOutcome(protocol.PutStatus.PUT_OK, (protocol.Appended(0, 1200, "A" * 32),), epoch=7)
    if new:
        import msgspec

        def request(cls: Any, raw: bytes, path: str | None = None) -> Callable[[], Any]:
            if path is None:
                return lambda: cls.decode(raw)
            return lambda: msgspec.structs.replace(cls.decode(raw), broker_name=path)

        def reply(payload: Any) -> Callable[[], bytes]:
            if payload is None:
                return lambda: api.Reply(ok, "Heart beat success").encode()
            return lambda: api.Reply(ok, "", payload).encode()

        def put_decode() -> Any:
            return protocol.decode_put_request(put, max_message_size=4 * 1024 * 1024)

        def put_encode() -> bytes:
            single = protocol.PutRequest((), batch=False)
            return msgspec.json.encode(protocol.put_reply(single, outcome)[1])

        elect_body = api.Reply(ok, "", elect).encode()
    else:
        import orjson

        def request(cls: Any, raw: bytes, path: str | None = None) -> Callable[[], Any]:
            if path is None:
                return lambda: cls.from_json(orjson.loads(raw.decode("utf-8")))
            return lambda: cls.from_json({**orjson.loads(raw.decode("utf-8")), "brokerName": path})

        def reply(payload: Any) -> Callable[[], bytes]:
            if payload is None:
                return lambda: orjson.dumps(api.Reply(ok, "Heart beat success").to_json())
            return lambda: orjson.dumps(api.Reply(ok, "", payload.to_json()).to_json())

        def put_decode() -> Any:
            return protocol.parse_put_request(json.loads(put), max_message_size=4 * 1024 * 1024)

        def put_encode() -> bytes:
            single = protocol.PutRequest((), batch=False)
            body = protocol.put_reply(single, outcome)[1]
            return json.dumps(body, separators=(",", ":")).encode()

        elect_body = orjson.dumps(api.Reply(ok, "", elect.to_json()).to_json())
    return {
        "heartbeat request: decode+validate": request(api.BrokerHeartbeatRequest, heartbeat),
        "heartbeat reply: encode": reply(None),
        "alter-sync-state-set request: decode+validate": request(
            api.AlterSyncStateSetRequest, alter, "broker-a"
        ),
        "alter-sync-state-set reply: encode": reply(altered),
        "register request: decode+validate": request(api.RegisterBrokerRequest, register),
        "register reply: encode": reply(registered),
        "elect reply: encode": reply(elect),
        "elect reply: client decode": lambda: api.ElectMasterPayload.from_json(
            api.Reply.from_json(json.loads(elect_body)).payload
        ),
        "put 1 KiB: decode+validate": put_decode,
        "put reply: encode": put_encode,
        "raft record: encode": lambda: encode_record(record),
        "raft record: decode": lambda: decode_record(record_bytes),
    }


def _child(repeat: int) -> None:
    print(json.dumps({name: _time(fn, repeat) for name, fn in _cases().items()}))


def _run(tree: Path, repeat: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", "--repeat", str(repeat)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="checkout of the older commit (required)")
    parser.add_argument("--after", type=Path, default=HERE)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.repeat)
        return
    if args.before is None:
        parser.error("--before DIR is required")
    before, after = _run(args.before, args.repeat), _run(args.after, args.repeat)
    width = max(len(name) for name in after)
    print(f"{'ns/op':<{width}}  {'before':>9}  {'after':>9}  {'after/before':>12}")
    for name in after:
        old, now = before.get(name), after[name]
        ratio = f"{now / old:.2f}" if old else "-"
        print(f"{name:<{width}}  {old or float('nan'):>9.0f}  {now:>9.0f}  {ratio:>12}")


if __name__ == "__main__":
    main()
