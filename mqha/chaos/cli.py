"""``mqha chaos`` (registered into ``mqha.cli``'s parser)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mqha.testing.planted_bugs import PLANTED


def add_subcommands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``chaos`` to the ``mqha`` subcommands."""
    chaos = sub.add_parser(
        "chaos",
        help="a local cluster under load and seeded faults; verdict table, non-zero exit on loss",
        description="Start a local cluster, produce and consume while injecting faults chosen by --seed "
        "one at a time, heal, check the history, print a verdict table. Exit 1 on a lost acknowledged "
        "message, an invariant violation or a check that could not run.",
    )
    chaos.add_argument("--duration", type=float, default=120.0, help="seconds during which faults start")
    chaos.add_argument(
        "--faults",
        default="kill,pause,partition",
        help="kinds, comma-separated: kill,pause,partition,loss,delay,disk-wipe,disk-full,power-loss,"
        "raft-partition,asym-partition,raft-loss,client-partition,all-controllers,bitflip,clone (disk-wipe: "
        "3+ controllers; disk-full: --store-tmpfs-mib; power-loss: one broker or a whole group loses its "
        "un-fsynced writes; bitflip: one bit of an older commit-log segment, stopped or running; "
        "clone: a copy of a replica's store started beside it must be refused; "
        "raft-partition, asym-partition, raft-loss, client-partition: root and nftables)",
    )
    chaos.add_argument(
        "--config",
        default=None,
        help="a named broker configuration, dash-separated parts: sync|async, allack|isrN, minN, rN "
        "(e.g. sync-isr2-min2-r3); sets the flush disk type, the ack mode and the replicas",
    )
    chaos.add_argument(
        "--flush-disk-type",
        choices=("ASYNC_FLUSH", "SYNC_FLUSH", "mixed"),
        default="ASYNC_FLUSH",
        help="the brokers' flushDiskType; mixed: the groups take ASYNC_FLUSH and SYNC_FLUSH in turn "
        "(use --groups 2 or more)",
    )
    chaos.add_argument(
        "--store-tmpfs-mib",
        type=int,
        default=0,
        help="put each broker's store on its own tmpfs of N MiB (root only; disk-full needs it)",
    )
    chaos.add_argument("--seed", type=int, default=1, help="the same seed gives the same fault schedule")
    chaos.add_argument("--groups", type=int, default=1, help="broker groups (default 1)")
    chaos.add_argument("--replicas", type=int, default=3, help="replicas per group (default 3)")
    chaos.add_argument("--controllers", type=int, default=3, help="controllers (default 3)")
    chaos.add_argument("--dir", default=None, help="run directory (default: a new temporary one)")
    chaos.add_argument(
        "--check",
        choices=("auto", "spark", "python", "off"),
        default="auto",
        help="invariant checker: auto (Spark when Java is present), spark, python, off",
    )
    chaos.add_argument("--concurrency", type=int, default=4, help="concurrent sends per group")
    chaos.add_argument("--plan", action="store_true", help="print the fault schedule and exit")
    chaos.add_argument(
        "--plant",
        action="append",
        default=[],
        choices=sorted(PLANTED),
        metavar="BUG",
        help="TEST ONLY: plant a bug the run must catch (repeatable): "
        + "; ".join(
            f"{name}: {bug.breaks} (caught by {', '.join(bug.caught_by)})" for name, bug in PLANTED.items()
        ),
    )
    chaos.add_argument(
        "--plant-ack-before-replication",
        action="append_const",
        dest="plant",
        const="ack-before-replication",
        help="TEST ONLY: the same as --plant ack-before-replication",
    )


def dispatch(args: argparse.Namespace) -> int | None:
    """Run ``args`` if it is one of ours; None otherwise."""
    if args.command != "chaos":
        return None
    from mqha.chaos.schedule import (
        DISK_FULL,
        DISK_WIPE,
        DISK_WIPE_MIN_CONTROLLERS,
        PACKET_FILTER_KINDS,
        parse_kinds,
    )

    try:
        kinds = parse_kinds(args.faults)
    except ValueError as exc:
        print(f"mqha chaos: --faults: {exc}", file=sys.stderr)
        return 2
    config = None
    if args.config is not None:
        from mqha.chaos.configs import parse_config

        try:
            config = parse_config(args.config)
        except ValueError as exc:
            print(f"mqha chaos: --config: {exc}", file=sys.stderr)
            return 2
        args.replicas = config.replicas
    if min(args.groups, args.replicas, args.controllers) < 1 or args.duration <= 0:
        print("mqha chaos: --groups, --replicas, --controllers, --duration must be positive", file=sys.stderr)
        return 2
    if DISK_WIPE in kinds and args.controllers < DISK_WIPE_MIN_CONTROLLERS:
        print(
            f"mqha chaos: {DISK_WIPE} needs --controllers {DISK_WIPE_MIN_CONTROLLERS} or more",
            file=sys.stderr,
        )
        return 2
    network = sorted(PACKET_FILTER_KINDS & set(kinds))
    if network and args.controllers < 3:
        print(f"mqha chaos: {','.join(network)} needs --controllers 3 or more", file=sys.stderr)
        return 2
    if network and not args.plan:
        from mqha.chaos.packet_filter import problem as packet_filter_problem

        problem = packet_filter_problem()
        if problem is not None:
            print(f"mqha chaos: {problem}", file=sys.stderr)
            return 2
    if DISK_FULL in kinds and not args.plan:
        from mqha.chaos.disk_fill import disk_full_problem

        problem = disk_full_problem(args.store_tmpfs_mib)
        if problem is not None:
            print(f"mqha chaos: {problem}", file=sys.stderr)
            return 2
    if args.plan:
        from mqha.chaos.schedule import Topology, plan, schedule_text
        from mqha.cluster.nodes import group_names

        topology = Topology.local(args.controllers, group_names(args.groups), args.replicas)
        sys.stdout.write(schedule_text(plan(args.seed, kinds, args.duration, topology)))
        return 0
    from mqha.chaos.runner import ChaosOptions, run_chaos
    from mqha.cluster.nodes import ClusterError

    options = ChaosOptions(
        duration=args.duration,
        kinds=kinds,
        seed=args.seed,
        controllers=args.controllers,
        groups=args.groups,
        replicas=args.replicas,
        run_dir=Path(args.dir) if args.dir else None,
        check=args.check,
        concurrency=max(1, args.concurrency),
        planted=tuple(dict.fromkeys(args.plant)),
        store_tmpfs_mib=max(0, args.store_tmpfs_mib),
        flush_disk_type=config.flush_disk_type if config is not None else args.flush_disk_type,
        broker_settings=config.broker_settings if config is not None else {},
        config_name=config.name if config is not None else "",
    )
    try:
        return run_chaos(options).exit_code
    except ClusterError as exc:  # everything started was stopped on the way out
        print(f"mqha chaos: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("mqha chaos: interrupted; everything it started was stopped", file=sys.stderr)
        return 130
