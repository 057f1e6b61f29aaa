"""The controller benchmark's workloads on two code versions side by side in one run (issue 24: write
throughput within 5 % of before; leader kill -> next commit median <= 0.6 s).

``python scripts/bench_controller_before_after.py --before DIR`` where DIR is a checkout of the
"before" commit (e.g. ``git worktree add /tmp/before <commit>``; copy the built commit-log extension
into it). Controller processes of the "before" side run that checkout (``PYTHONPATH``), the "after"
side this one; the load generator is this checkout's for both. As ``mqha bench auth``: each side has
several 3-node clusters used in turn, the alter and elect workloads of ``mqha bench controller`` run at
1, 8 and 32 clients in interleaved rounds (order reversed every other round), and the after/before
ratio is the median of the rounds' own ratios. Leader kills alternate between the sides.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from mqha.bench.auth import _clients, paired
from mqha.bench.controller import CONTROLLER_SETTINGS, Controllers, _kills_ours, interleaved_rounds
from mqha.bench.lean_http import LeanHttp
from mqha.bench.loadgen import closed_loop, http_session
from mqha.bench.report import fmt, format_table, median

SIDES = ("before", "after")


async def run(before: Path, rounds: int, window: float, kills: int, clusters: int) -> dict[str, Any]:
    cfg = {"clients": (1, 8, 32), "window": window, "rounds": rounds}
    base = Path(tempfile.mkdtemp(prefix="mqha-before-after-"))
    started: dict[str, list[Controllers]] = {side: [] for side in SIDES}
    connections: list[LeanHttp] = []

    def connection() -> LeanHttp:
        connections.append(LeanHttp())
        return connections[-1]

    pools: dict[str, list[list[Any]]] = {}
    try:
        async with http_session(32) as http:
            for number in range(clusters):
                for side in SIDES:
                    controllers = Controllers(base / f"{side}{number}", dict(CONTROLLER_SETTINGS))
                    if side == "before":
                        controllers.cluster.layout.env["PYTHONPATH"] = str(before)
                    started[side].append(controllers)
                    controllers.start()
                    for workload, ops in (await _clients(http, controllers, 32, connection)).items():
                        pools.setdefault(f"{workload} {side}", []).append(ops)
            for each in pools.values():
                for ops in each:
                    await closed_loop(ops[:4], min(0.5, window))
            workloads = {name: each[0] for name, each in pools.items()}
            figures = await interleaved_rounds(cfg, workloads, alternate=True, pools=pools)
            times: dict[str, list[float]] = {side: [] for side in SIDES}
            for _ in range(kills):
                for side in SIDES:
                    client = pools[f"alter {side}"][0][0]
                    times[side] += await _kills_ours(started[side][0], http, client, 1)
            return {"figures": figures, "kills": times}
    finally:
        for conn in connections:
            conn.close()
        for each in started.values():
            for controllers in each:
                controllers.stop()


def report(data: dict[str, Any]) -> str:
    rows = []
    for workload in ("alter", "elect"):
        before, after = data["figures"][f"{workload} before"], data["figures"][f"{workload} after"]
        for clients in before:
            b, a = before[clients], after[clients]
            rows.append(
                [
                    workload,
                    clients,
                    fmt(b["ops_per_s"], ".0f"),
                    fmt(a["ops_per_s"], ".0f"),
                    fmt(paired(b, a, "ops_per_s"), ".3f"),
                    fmt(b["p50_ms"], ".2f"),
                    fmt(a["p50_ms"], ".2f"),
                    fmt(paired(b, a, "p50_ms"), ".3f"),
                ]
            )
    head = [
        "workload",
        "clients",
        "before ops/s",
        "after ops/s",
        "after/before",
        "before p50",
        "after p50",
        "ratio",
    ]
    kills = [
        [side, len(t), fmt(min(t), ".3f"), fmt(median(t), ".3f"), fmt(max(t), ".3f")]
        for side, t in data["kills"].items()
        if t
    ]
    return (
        format_table("committed writes through HTTP, before vs after (paired rounds)", head, rows)
        + "\n\n"
        + format_table(
            "leader SIGKILL -> next committed write (s)", ["side", "n", "min", "median", "max"], kills
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the before commit")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--window", type=float, default=2.0)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--clusters", type=int, default=3, help="clusters per side, used in turn")
    parser.add_argument("--out", type=Path, default=Path("bench-results/controller-before-after.json"))
    args = parser.parse_args()
    data = asyncio.run(run(args.before.resolve(), args.rounds, args.window, args.kills, args.clusters))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1))
    print(report(data))


if __name__ == "__main__":
    main()
