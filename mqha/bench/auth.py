"""``mqha bench auth``: what authentication costs, off and on side by side in one run (issue 23: at
most 5 %).

Controllers: 3-node controller clusters run side by side, the same except that one side has
authentication on (``LocalCluster(secure=True)``: fresh inner credentials and admin token); both sides
encrypt their Raft traffic with a Raft password, as a production cluster does with or without
authentication. The alter-SyncStateSet and designated-elect workloads of ``mqha bench controller`` run
at 1, 8 and 32 clients in interleaved rounds (the order reversed every other round). With
authentication on, every alter carries an ``MQHA-HMAC-SHA256`` signature the client makes for that
request (fresh nonce and timestamp, SHA-256 of the body), so the signing, the controller's check and
its replay cache are all in the figure; every designated elect carries the admin token (Bearer). The
set-up calls (register, heartbeat, elect) are signed too. Each side has ``CLUSTERS_PER_SIDE`` clusters,
used in turn round by round (identical clusters differ by ~10 % at 1 client). A third side,
authentication off and no Raft password, shows what the Raft password itself costs (no target).

Brokers: two clusters (one controller, one group of 2 mqbroker replicas, async acks), off and on.
Puts: single 1 KiB messages from 8 clients to the master in interleaved rounds (HTTP Basic on every
put when on). Catch-up: the slave stopped, a backlog put on the master, the slave started and its
copy timed as in ``mqha bench replication`` (with authentication on it proves itself on the HA port
once per connection); then its store is emptied and the copy repeated, the two sides in turn; the
best copy of each side counts (``mqha.bench.replication.REPEATS``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mqha.bench.controller import (
    CONTROLLER_SETTINGS,
    AlterClient,
    Controllers,
    ElectClient,
    interleaved_rounds,
    register_set,
)
from mqha.bench.lean_http import LeanHttp
from mqha.bench.loadgen import closed_loop, http_session
from mqha.bench.put_kit import interleaved_puts, message_payload
from mqha.bench.replication import (
    KIB,
    MIB,
    backlog_behind,
    catch_up,
    empty_slave,
    replication_cluster,
    settle,
)
from mqha.bench.report import Outcome, Target, fmt, format_table, median, ratio
from mqha.cluster.client_auth import client_headers
from mqha.controller_client.caller import Signer
from mqha.replicas_manager.client import signer_of
from mqha.security.credentials import parse_inner_credentials
from mqha.security.signing import bearer_header
from mqha.wire.broker_api import PUT_PATH

SIDES = ("off", "on")
NO_RAFT_PASSWORD = "off, no Raft password"
BENCH_RAFT_PASSWORD = {"controllerRaftPassword": "bench-raft-password"}
CONTROLLER_SIDES: dict[str, tuple[bool, dict[str, str]]] = {
    # Both sides encrypt Raft traffic (a production cluster has a Raft password with or without
    # authentication: conf/, the Helm chart), so on/off is what authentication itself costs.
    "off": (False, BENCH_RAFT_PASSWORD),
    "on": (True, {}),
    # What the Raft password itself costs (informational, no target).
    NO_RAFT_PASSWORD: (False, {}),
}
"""Controller clusters: (authentication on, settings over the generated ones)."""
CLUSTERS_PER_SIDE = 3
"""Clusters per side, used in turn round by round: two clusters of identical config differ by ~10 %
at 1 client (their Raft tick phases), more than the effect measured, so each side's figure pools
several clusters."""
WORKLOADS = ("alter", "elect")
PUT_BODY = KIB
CATCH_UP_BODY = 16 * KIB  # the catch-up figure's message size in ``mqha bench replication``
MAX_COST = 0.05  # issue 23: authentication costs at most 5 % of any figure


def settings(quick: bool) -> dict[str, Any]:
    """Sizes: ``--quick`` is a smoke test (one short round each), the full run gives stable medians
    (short rounds, many of them: a 5 % difference needs the drift averaged out)."""
    window, rounds = (0.5, 1) if quick else (2.0, 12)
    return {
        "clients": (1, 8, 32),
        "window": window,
        "rounds": rounds,
        "clusters_per_side": 1 if quick else CLUSTERS_PER_SIDE,
        "put": {"clients": 8, "window": window, "rounds": rounds},
        "backlog_bytes": (32 if quick else 1024) * MIB,
        "repeats": 1 if quick else 3,
    }


def bearer(token: str) -> Signer:
    """The admin's proof: the same ``Authorization: Bearer <adminAuthToken>`` on every request."""
    headers = {"Authorization": bearer_header(token)}
    return lambda method, node, target, body: headers


def proofs(controller_settings: Mapping[str, str]) -> tuple[Signer | None, Signer | None]:
    """(a broker's signer, the admin's) for a cluster's controllers; (None, None) when its
    authentication is off."""
    if controller_settings.get("authenticationEnabled") != "true":
        return None, None
    inner = parse_inner_credentials(controller_settings["innerClientAuthenticationCredentials"])
    return signer_of(inner), bearer(controller_settings["adminAuthToken"])


async def _controllers(base: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """The two workloads' figures per side and client count (keys ``"alter off"``, ``"elect on"`` ...)."""
    most = max(cfg["clients"])
    started: list[Controllers] = []
    connections: list[LeanHttp] = []

    def connection() -> LeanHttp:  # one lean keep-alive connection per load client, on both sides
        connections.append(LeanHttp())
        return connections[-1]

    try:
        pools: dict[str, list[list[Any]]] = {}
        async with http_session(most) as http:
            for side, (secure, extra) in CONTROLLER_SIDES.items():
                for _ in range(cfg["clusters_per_side"]):
                    # Made just before it starts: its ports are picked free now, not before the others ran.
                    settings = {**CONTROLLER_SETTINGS, **extra}
                    controllers = Controllers(base / f"controllers{len(started)}", settings, secure)
                    started.append(controllers)
                    controllers.start()
                    for workload, ops in (await _clients(http, controllers, most, connection)).items():
                        pools.setdefault(f"{workload} {side}", []).append(ops)
        for each in pools.values():
            for ops in each:
                await closed_loop(ops[:4], min(0.5, cfg["window"]))  # warm-up: connections, code paths
        workloads = {name: each[0] for name, each in pools.items()}
        figures: dict[str, Any] = await interleaved_rounds(cfg, workloads, alternate=True, pools=pools)
        return figures
    finally:
        for conn in connections:
            conn.close()
        for controllers in started:
            controllers.stop()


async def _clients(http: Any, controllers: Controllers, most: int, connection: Any) -> dict[str, list[Any]]:
    """One cluster's broker sets registered and its alter and elect clients, ``most`` of each."""
    broker, admin = proofs(controllers.cluster.controller_settings)
    leader, urls = controllers.leader_url(), [n.url for n in controllers.cluster.controllers]
    alter_names, elect_names = [f"set{i}" for i in range(most)], [f"elect{i}" for i in range(most)]
    await asyncio.gather(
        *(register_set(http, leader, urls, name, broker) for name in alter_names + elect_names)
    )
    alters = [AlterClient(connection(), leader, name, broker) for name in alter_names]
    for client in alters:
        await client.sync()
    return {"alter": alters, "elect": [ElectClient(connection(), leader, n, admin) for n in elect_names]}


def _brokers(base: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """Put figures and catch-up copies per side."""
    with contextlib.ExitStack() as stack:
        clusters = {}
        for side in SIDES:
            cluster = replication_cluster(base / f"brokers-{side}", secure=side == "on")
            clusters[side] = stack.enter_context(cluster)
        targets = {}
        for side, cluster in clusters.items():
            master = cluster.master(timeout=30)
            if master is None:
                raise RuntimeError(f"{side}: no master\n{cluster.status_table()}")
            targets[side] = (master.url + PUT_PATH, client_headers(cluster.broker_settings))
        puts = interleaved_puts(targets, message_payload(PUT_BODY), cfg["put"])
        behind = {
            side: backlog_behind(c, CATCH_UP_BODY, cfg["backlog_bytes"]) for side, c in clusters.items()
        }
        copies: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
        for repeat in range(cfg["repeats"]):
            for side in SIDES if repeat % 2 == 0 else SIDES[::-1]:
                _, slave, top = behind[side]
                if repeat:  # the slave copies the whole backlog again, from an empty store
                    empty_slave(clusters[side], slave)
                settle(base, top)
                copies[side].append(catch_up(clusters[side], slave, top))
    catch_ups = {}
    for side, runs in copies.items():
        best = max(runs, key=lambda run: run["mib_per_s"] or 0.0)
        catch_ups[side] = {
            "backlog_bytes": behind[side][2],
            **best,
            "mib_per_s_runs": [run["mib_per_s"] for run in runs],
        }
    return {"put": puts, "catch_up": catch_ups}


def _measure(base: Path, quick: bool) -> dict[str, Any]:
    cfg = settings(quick)
    data: dict[str, Any] = {
        "settings": {**cfg, "put_body_bytes": PUT_BODY, "catch_up_body_bytes": CATCH_UP_BODY},
        "controller": asyncio.run(_controllers(base, cfg)),
    }
    data.update(_brokers(base, cfg))
    return data


def paired(off: Mapping[str, Any], on: Mapping[str, Any], key: str) -> float | None:
    """on/off of ``key``: the median of the rounds' own ratios when both sides kept their rounds (each
    round's two figures were measured back to back, on the clusters of that turn), else the ratio of
    the medians. Pairing removes the drift between rounds, which is larger than the effect measured."""
    off_rounds, on_rounds = off.get("rounds"), on.get("rounds")
    if off_rounds and on_rounds and len(off_rounds) == len(on_rounds):
        ratios = [ratio(b[key], a[key]) for a, b in zip(off_rounds, on_rounds, strict=True)]
        known = [r for r in ratios if r is not None]
        if known:
            return median(known)
    return ratio(on[key], off[key])


def _pair_row(label: tuple[Any, ...], off: Mapping[str, Any], on: Mapping[str, Any]) -> tuple[Any, ...]:
    """``label`` then ops/s, p50 and p99 off, on and on/off, then the errors off / on."""
    cells: list[Any] = [*label]
    for key, spec in (("ops_per_s", ".0f"), ("p50_ms", ".2f"), ("p99_ms", ".2f")):
        cells += [fmt(off[key], spec), fmt(on[key], spec), fmt(paired(off, on, key), ".3f")]
    errors = [off["errors"], on["errors"]]
    cells.append(" / ".join(str(e if isinstance(e, int) else sum(e.values())) for e in errors))
    return tuple(cells)


_PAIR_HEADER = (
    "off ops/s",
    "on ops/s",
    "on/off",
    "off p50 ms",
    "on p50 ms",
    "on/off",
    "off p99 ms",
    "on p99 ms",
    "on/off",
    "errors off / on",
)


def _report(data: dict[str, Any]) -> Outcome:
    cfg, ctl = data["settings"], data["controller"]
    rows = [
        _pair_row(
            (workload, clients), ctl[f"{workload} off"][str(clients)], ctl[f"{workload} on"][str(clients)]
        )
        for workload in WORKLOADS
        for clients in cfg["clients"]
    ]
    title = (
        "controller: authentication off vs on (alter: signed by the inner credentials; elect: admin "
        f"token), median of {cfg['rounds']} interleaved {cfg['window']:g} s rounds over "
        f"{cfg['clusters_per_side']} clusters per side"
    )
    tables = [format_table(title, ("workload", "clients", *_PAIR_HEADER), rows), _split_table(data)]
    put, putcfg = data["put"], cfg["put"]
    title = (
        f"put: authentication off vs on (HTTP Basic), 2-replica group, async acks, {putcfg['clients']} "
        f"clients x single {data['settings']['put_body_bytes']} B messages, median of {putcfg['rounds']} "
        f"interleaved {putcfg['window']:g} s rounds"
    )
    tables.append(
        format_table(title, ("clients", *_PAIR_HEADER), [_pair_row((putcfg["clients"],), *_sides(put))])
    )
    off, on = _sides(data["catch_up"])
    rows = [
        (
            f"{data['settings']['catch_up_body_bytes'] // KIB} KiB",
            fmt(off["backlog_bytes"] / MIB, ".0f"),
            fmt(off["mib_per_s"], ".0f"),
            fmt(on["mib_per_s"], ".0f"),
            fmt(ratio(on["mib_per_s"], off["mib_per_s"]), ".3f"),
            " ".join(fmt(v, ".0f") for v in off["mib_per_s_runs"]),
            " ".join(fmt(v, ".0f") for v in on["mib_per_s_runs"]),
        )
    ]
    header = ("messages", "backlog MiB", "off MiB/s", "on MiB/s", "on/off", "off runs", "on runs")
    title = (
        f"replication: slave catch-up, authentication off vs on, best of {cfg['repeats']} interleaved copies"
    )
    tables.append(format_table(title, header, rows))
    return Outcome("auth", tables, _targets(data), data)


def _split_table(data: dict[str, Any]) -> str:
    """What the Raft password costs: off (with it) and on, each relative to off without it."""
    ctl, rows = data["controller"], []
    for workload in WORKLOADS:
        for clients in map(str, data["settings"]["clients"]):
            bare, off, on = (ctl[f"{workload} {side}"][clients] for side in (NO_RAFT_PASSWORD, "off", "on"))
            row: list[Any] = [workload, clients]
            for key, spec in (("ops_per_s", ".0f"), ("p50_ms", ".2f")):
                row += [fmt(bare[key], spec), fmt(paired(bare, off, key), ".3f")]
                row.append(fmt(paired(bare, on, key), ".3f"))
            rows.append(tuple(row))
    header = ("workload", "clients", "no password ops/s", "off/none", "on/none")
    header += ("no password p50 ms", "off/none", "on/none")
    title = (
        "controller: the Raft password's own cost -- off and on (both with controllerRaftPassword) "
        "against authentication off without it (informational, no target)"
    )
    return format_table(title, header, rows)


def _sides(figures: Mapping[str, Any]) -> tuple[Any, Any]:
    return figures["off"], figures["on"]


def _targets(data: dict[str, Any]) -> list[Target]:
    """Throughput on/off at least 0.95, p50 latency on/off at most 1.05, for every workload."""
    ctl, one = data["controller"], str(min(data["settings"]["clients"]))
    targets = []
    for workload in WORKLOADS:
        off, on = ctl[f"{workload} off"], ctl[f"{workload} on"]
        targets += [
            Target(
                f"{workload} ops/s on/off at {n} client{'s' if n != '1' else ''}",
                paired(off[n], on[n], "ops_per_s"),
                1 - MAX_COST,
                True,
            )
            for n in map(str, data["settings"]["clients"])
        ]
        targets.append(
            Target(
                f"{workload} p50 on/off at {one} client",
                paired(off[one], on[one], "p50_ms"),
                1 + MAX_COST,
                False,
            )
        )
    off, on = _sides(data["put"])
    targets += [
        Target("put msgs/s on/off", paired(off, on, "ops_per_s"), 1 - MAX_COST, True),
        Target("put p50 on/off", paired(off, on, "p50_ms"), 1 + MAX_COST, False),
    ]
    off, on = _sides(data["catch_up"])
    targets.append(
        Target("catch-up MiB/s on/off", ratio(on["mib_per_s"], off["mib_per_s"]), 1 - MAX_COST, True)
    )
    return targets


def run(base: Path, quick: bool) -> Outcome:
    """Controllers off and on, then brokers off and on; tables and targets."""
    return _report(_measure(base, quick))
