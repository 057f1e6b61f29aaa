"""``mqha cluster up|down|status`` and ``mqha demo`` (registered into ``mqha.cli``'s parser).

``cluster up`` starts the processes detached (they outlive the command) and records them in
``<dir>/cluster.json``; ``status`` prints the table; ``down`` stops exactly the recorded pids.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DEFAULT_RUN_DIR = os.environ.get("MQHA_RUN_DIR", ".mqha/cluster")


def _settings(pairs: list[str], flag: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"mqha cluster: {flag} expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def add_subcommands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``cluster`` and ``demo`` to the ``mqha`` subcommands."""
    cluster = sub.add_parser("cluster", help="a local cluster on 127.0.0.1: up, status, down")
    actions = cluster.add_subparsers(dest="cluster_command", required=True)
    up = actions.add_parser("up", help="start controllers and broker groups; wait until every group is ready")
    up.add_argument("--dir", default=DEFAULT_RUN_DIR, help=f"run directory (default {DEFAULT_RUN_DIR})")
    up.add_argument("--controllers", type=int, default=3, help="controller nodes (default 3)")
    up.add_argument("--groups", type=int, default=1, help="broker groups (default 1)")
    up.add_argument("--replicas", type=int, default=3, help="replicas per group (default 3)")
    up.add_argument("--cluster-name", default="DefaultCluster", help="brokerClusterName")
    up.add_argument(
        "--broker-set", action="append", default=[], metavar="KEY=VALUE", help="a broker config key"
    )
    up.add_argument(
        "--controller-set", action="append", default=[], metavar="KEY=VALUE", help="a controller config key"
    )
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness (default 90)")
    up.add_argument(
        "--insecure",
        action="store_true",
        help="authentication off (default: on, with secrets generated into the run directory's node configs)",
    )
    status = actions.add_parser("status", help="print the status table of the cluster in --dir")
    status.add_argument("--dir", default=DEFAULT_RUN_DIR, help=f"run directory (default {DEFAULT_RUN_DIR})")
    down = actions.add_parser("down", help="stop the processes recorded in --dir (by pid)")
    down.add_argument("--dir", default=DEFAULT_RUN_DIR, help=f"run directory (default {DEFAULT_RUN_DIR})")
    down.add_argument("--remove", action="store_true", help="also delete the run directory")

    demo = sub.add_parser(
        "demo", help="lossless failover demo: 3 controllers, 1 group x 3, kill -9, Spark check"
    )
    demo.add_argument("--dir", default=None, help="run directory (default: a new one under the temp dir)")
    demo.add_argument("--kills", type=int, default=5, help="master kills, first one in detail (default 5)")
    demo.add_argument("--warmup", type=float, default=3.0, help="seconds of production before the first kill")
    demo.add_argument("--concurrency", type=int, default=4, help="concurrent senders (default 4)")
    demo.add_argument(
        "--check",
        choices=("auto", "spark", "python", "off"),
        default="auto",
        help="invariant checker: auto (Spark when Java is present), spark, python, off",
    )


def dispatch(args: argparse.Namespace) -> int | None:
    """Run ``args`` if it is one of ours; None otherwise."""
    if args.command == "cluster":
        return _cluster(args)
    if args.command == "demo":
        from mqha.cluster.demo import DemoOptions, run_demo

        options = DemoOptions(
            run_dir=Path(args.dir) if args.dir else None,
            kills=max(1, args.kills),
            warmup=args.warmup,
            concurrency=max(1, args.concurrency),
            spark=args.check,
        )
        result = run_demo(options)
        return 130 if result.interrupted else (0 if result.ok else 1)
    return None


def _cluster(args: argparse.Namespace) -> int:
    from mqha.cluster.client_auth import broker_user
    from mqha.cluster.local import LocalCluster
    from mqha.cluster.nodes import ClusterError

    run_dir = Path(args.dir)
    try:
        if args.cluster_command == "up":
            if (run_dir / "cluster.json").exists():
                existing = LocalCluster.attach(run_dir)
                if existing.running_pids():
                    print(
                        f"mqha cluster: a cluster is running in {run_dir}; `mqha cluster down` first",
                        file=sys.stderr,
                    )
                    return 1
            cluster = LocalCluster(
                run_dir,
                controllers=args.controllers,
                groups=args.groups,
                replicas=args.replicas,
                cluster_name=args.cluster_name,
                controller_settings=_settings(args.controller_set, "--controller-set"),
                broker_settings=_settings(args.broker_set, "--broker-set"),
                die_with_parent=False,  # the cluster outlives this command
                secure=not args.insecure,
            )
            cluster.start(timeout=args.timeout)
            print(cluster.status_table())
            print(f"\ncontrollers: {';'.join(cluster.controller_addresses)}")
            user = broker_user(cluster.broker_settings)
            if user is not None:  # a local cluster's own secrets; the run directory is owner-only
                print(f"user: {user.username} {user.password}  (producers and consumers: user=User(...))")
                print(f"admin token: {cluster.broker_settings['adminAuthToken']}  (mqadmin --token)")
            print(f"run directory: {cluster.run_dir}  (stop with: mqha cluster down --dir {args.dir})")
            return 0
        cluster = LocalCluster.attach(run_dir)
        if args.cluster_command == "status":
            print(cluster.status_table())
            return 0
        pids = cluster.running_pids()
        cluster.stop()
        left = cluster.running_pids()
        print(f"stopped {len(pids) - len(left)} processes ({' '.join(map(str, pids)) or 'none running'})")
        if left:
            print(f"mqha cluster: still running: {left}", file=sys.stderr)
            return 1
        if args.remove:
            cluster.remove()
        return 0
    except ClusterError as exc:
        print(f"mqha cluster: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"mqha cluster: {exc}", file=sys.stderr)
        return 2
