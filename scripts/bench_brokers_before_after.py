"""``mqha bench put`` and ``mqha bench failover`` workloads on two code versions side by side in one run
(issue 25: within 5 % of before).

``python scripts/bench_brokers_before_after.py put|failover --before DIR`` where DIR is a checkout of
the "before" commit (``git worktree add /tmp/before <commit>``; copy the built commit-log extension
into it). The controller and broker processes of the "before" side run that checkout (``PYTHONPATH``),
the "after" side this one; the load generator is this checkout's for both.

put: one cluster per side and ack mode (1 controller, 3 replicas), 8 closed-loop clients of single
1 KiB messages, interleaved rounds with the order of the sides reversed every other round; the
after/before ratio is the median of the rounds' own ratios.

failover: one cluster per side (3 controllers, 3 replicas) under a produce load; master SIGKILLs
alternate between the sides; the figure is the client's kill -> first ack from the new master.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from mqha.bench.failover import KILL, _fault_cycle
from mqha.bench.put import BODY, MODES
from mqha.bench.put_kit import message_payload, put_load, put_target
from mqha.bench.report import fmt, format_table, median
from mqha.cluster.client_auth import broker_user
from mqha.cluster.local import LocalCluster
from mqha.cluster.workload import ProduceWorkload

SIDES = ("before", "after")
AFTER_SETTINGS: dict[str, str] = {}
"""``--after-setting KEY=VALUE``: broker keys for the "after" side only (keys the "before" code does not
know, e.g. ``historyRecordPutAcks=false`` to leave out a later issue's cost)."""


def _cluster(
    stack: contextlib.ExitStack, run_dir: Path, before: Path, side: str, **kwargs: Any
) -> LocalCluster:
    if side == "after" and AFTER_SETTINGS:
        kwargs["broker_settings"] = {**kwargs.get("broker_settings", {}), **AFTER_SETTINGS}
    cluster = LocalCluster(run_dir, log_level="WARNING", **kwargs)
    if side == "before":
        cluster.env["PYTHONPATH"] = str(before)
    stack.enter_context(cluster)
    if cluster.master(timeout=60) is None:
        raise RuntimeError(f"{run_dir}: no master\n{cluster.status_table()}")
    return cluster


def run_put(before: Path, rounds: int, window: float, clients: int, modes: list[str]) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="mqha-put-before-after-"))
    payload = message_payload(BODY)
    figures: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with contextlib.ExitStack() as stack:
        targets = {}
        for mode in modes:
            extra = MODES[mode]
            for side in SIDES:
                cluster = _cluster(
                    stack,
                    base / f"{side}-{len(targets)}",
                    before,
                    side,
                    controllers=1,
                    groups=1,
                    replicas=3,
                    broker_settings=dict(extra),
                )
                targets[(mode, side)] = put_target(cluster)
        for url, headers in targets.values():
            asyncio.run(put_load(url, payload, clients, 0.5, headers))  # warm-up
        for number in range(rounds):
            for mode in modes:
                sides = SIDES if number % 2 == 0 else tuple(reversed(SIDES))
                for side in sides:
                    url, headers = targets[(mode, side)]
                    result = asyncio.run(put_load(url, payload, clients, window, headers))
                    figures.setdefault(mode, {}).setdefault(side, []).append(result.as_json())
    return {
        "settings": {"rounds": rounds, "window": window, "clients": clients, "body": BODY},
        "put": figures,
    }


def report_put(data: dict[str, Any]) -> str:
    rows = []
    for mode, sides in data["put"].items():
        b, a = sides["before"], sides["after"]
        ratios = [y["ops_per_s"] / x["ops_per_s"] for x, y in zip(b, a, strict=True) if x["ops_per_s"]]
        rows.append(
            [
                mode,
                fmt(median([r["ops_per_s"] for r in b]), ".0f"),
                fmt(median([r["ops_per_s"] for r in a]), ".0f"),
                fmt(median(ratios), ".3f"),
                fmt(median([r["p50_ms"] for r in b]), ".2f"),
                fmt(median([r["p50_ms"] for r in a]), ".2f"),
                sum(sum(r["errors"].values()) for r in a + b),
            ]
        )
    cfg = data["settings"]
    title = (
        f"put, 3 replicas, {cfg['clients']} clients x {cfg['body']} B, {cfg['rounds']} paired "
        f"{cfg['window']:g} s rounds"
    )
    head = ["ack mode", "before msgs/s", "after msgs/s", "after/before", "before p50", "after p50", "errors"]
    return format_table(title, head, rows)


def run_failover(before: Path, kills: int) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="mqha-failover-before-after-"))
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    with contextlib.ExitStack() as stack:
        parts = {}
        for side in SIDES:
            cluster = _cluster(stack, base / side, before, side, controllers=3, groups=1, replicas=3)
            group = cluster.groups[0]
            workload = ProduceWorkload(
                cluster.controller_addresses,
                group,
                concurrency=2,
                client_id=f"bench-{side}",
                user=broker_user(cluster.broker_settings),
            ).start()
            stack.callback(workload.stop)
            parts[side] = (cluster, workload, group)
        for number in range(kills):
            sides = SIDES if number % 2 == 0 else tuple(reversed(SIDES))
            for side in sides:
                cycle = _fault_cycle(*parts[side], KILL)
                times[side].append(cycle["client_kill_to_ack_s"])
    return {"kills": times}


def report_failover(data: dict[str, Any]) -> str:
    rows = [
        [side, len(t), fmt(min(t), ".3f"), fmt(median(t), ".3f"), fmt(max(t), ".3f")]
        for side, t in data["kills"].items()
        if t
    ]
    b, a = (median(data["kills"][side]) for side in SIDES)
    rows.append(["after/before (medians)", "", "", fmt(a / b if b else None, ".3f"), ""])
    return format_table(
        "master SIGKILL -> client's first ack from the new master (s)",
        ["side", "n", "min", "median", "max"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", choices=("put", "failover"))
    parser.add_argument("--before", type=Path, required=True, help="checkout of the before commit")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--window", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--kills", type=int, default=12)
    parser.add_argument("--modes", default=",".join(MODES), help="put: ack modes, comma-separated")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--after-setting", action="append", default=[], metavar="KEY=VALUE", help="a broker key, after side"
    )
    args = parser.parse_args()
    AFTER_SETTINGS.update(item.split("=", 1) for item in args.after_setting)
    before = args.before.resolve()
    if args.bench == "put":
        data = run_put(before, args.rounds, args.window, args.clients, args.modes.split(","))
        text = report_put(data)
    else:
        data = run_failover(before, args.kills)
        text = report_failover(data)
    out = args.out or Path(f"bench-results/{args.bench}-before-after.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))
    print(text)


if __name__ == "__main__":
    main()
