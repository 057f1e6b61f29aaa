"""``mqha cluster up|status|down|start|stop|restart`` and ``mqha demo`` (subcommands of ``mqha.cli``).

``cluster up`` starts the processes detached (they outlive the command) and records them in
``<dir>/cluster.json``; ``status`` prints the table; ``down`` stops every process the directory owns:
the recorded pids, and a node restarted by hand through the pid file it writes into its store.
``start|stop|restart NODE`` act on one node. ``up`` in a directory that holds a cluster's state asks
for ``--fresh`` (delete it first) or ``--reuse`` (start the recorded cluster again, same ports and
stores).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mqha.cluster.local import LocalCluster

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
    cluster = sub.add_parser(
        "cluster", help="a local cluster on 127.0.0.1: up, status, down, start|stop|restart NODE"
    )
    actions = cluster.add_subparsers(dest="cluster_command", required=True)
    up = actions.add_parser("up", help="start controllers and broker groups; wait until every group is ready")
    up.add_argument("--dir", default=DEFAULT_RUN_DIR, help=f"run directory (default {DEFAULT_RUN_DIR})")
    up.add_argument("--controllers", type=int, default=3, help="controller nodes (default 3)")
    up.add_argument("--groups", type=int, default=1, help="broker groups (default 1)")
    up.add_argument("--replicas", type=int, default=3, help="replicas per group (default 3)")
    up.add_argument("--cluster-name", default="DefaultCluster", help="brokerClusterName")
    up.add_argument(
        "--proxy",
        type=int,
        nargs="?",
        const=1,
        default=0,
        metavar="N",
        help="also start N mqproxy processes for RocketMQ 5 clients (1 when given without N)",
    )
    up.add_argument(
        "--broker-set", action="append", default=[], metavar="KEY=VALUE", help="a broker config key"
    )
    up.add_argument(
        "--controller-set", action="append", default=[], metavar="KEY=VALUE", help="a controller config key"
    )
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness (default 90)")
    up.add_argument(
        "--base-port",
        type=int,
        default=None,
        metavar="P",
        help="fixed ports: node k (n0.., then the brokers) listens on P+2k, Raft/HA on P+2k+1 "
        "(default: free ports)",
    )
    fresh = up.add_mutually_exclusive_group()
    fresh.add_argument("--fresh", action="store_true", help="delete the state of a cluster in --dir first")
    fresh.add_argument(
        "--reuse",
        action="store_true",
        help="start the cluster recorded in --dir again (its ports and stores)",
    )
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
    for name, text in (
        ("start", "start one node of the cluster in --dir (its config, store and ports)"),
        ("stop", "stop one node (SIGTERM, SIGKILL after 5 s)"),
        ("restart", "stop one node, then start it again"),
    ):
        one = actions.add_parser(name, help=text)
        one.add_argument("node", help="node name as `status` shows it: n0, broker-a-0, ...")
        one.add_argument("--dir", default=DEFAULT_RUN_DIR, help=f"run directory (default {DEFAULT_RUN_DIR})")
        one.add_argument(
            "--timeout", type=float, default=30.0, help="seconds to wait for /healthz (default 30)"
        )

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
    from mqha.cluster.local import LocalCluster
    from mqha.cluster.nodes import ClusterError

    run_dir = Path(args.dir)
    try:
        if args.cluster_command == "up":
            return _up(args, run_dir)
        cluster = LocalCluster.attach(run_dir)
        if args.cluster_command == "status":
            print(cluster.status_table())
            return 0
        if args.cluster_command in ("start", "stop", "restart"):
            return _one_node(cluster, args)
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
    except (ValueError, KeyError) as exc:
        print(f"mqha cluster: {str(exc).strip(chr(34) + chr(39))}", file=sys.stderr)
        return 2


def _has_state(run_dir: Path) -> bool:
    """A cluster was started here before: its record, or node stores (ghost groups would come back)."""
    return (run_dir / "cluster.json").exists() or any(run_dir.glob("*/*/store"))


def _up(args: argparse.Namespace, run_dir: Path) -> int:
    from mqha.cluster.client_auth import broker_user
    from mqha.cluster.local import LocalCluster

    if (run_dir / "cluster.json").exists() and LocalCluster.attach(run_dir).running_pids():
        print(f"mqha cluster: a cluster is running in {run_dir}; `mqha cluster down` first", file=sys.stderr)
        return 1
    if args.reuse:
        cluster = LocalCluster.attach(run_dir)
        cluster.start(timeout=args.timeout, rewrite_configs=False)
    else:
        if _has_state(run_dir):
            if not args.fresh:
                print(
                    f"mqha cluster: {run_dir} holds the state of an earlier cluster (controller metadata, "
                    "broker stores): add --fresh to delete it, or --reuse to start that cluster again",
                    file=sys.stderr,
                )
                return 2
            if (run_dir / "cluster.json").exists():
                LocalCluster.attach(run_dir).remove()  # unmounts tmpfs stores too
            shutil.rmtree(run_dir, ignore_errors=True)
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
            base_port=args.base_port,
            proxies=args.proxy,
        )
        cluster.start(timeout=args.timeout)
    print(cluster.status_table())
    print(f"\ncontrollers: {';'.join(cluster.controller_addresses)}")
    if cluster.proxies:
        print(f"proxies: {';'.join(cluster.proxy_addresses)}  (RocketMQ 5 clients' access point)")
    user = broker_user(cluster.broker_settings)
    if user is not None:  # a local cluster's own secrets; the run directory is owner-only
        print(f"user: {user.username} {user.password}  (producers and consumers: user=User(...))")
        print(f"admin token: {cluster.broker_settings['adminAuthToken']}  (mqadmin --token)")
    print(f"run directory: {cluster.run_dir}  (stop with: mqha cluster down --dir {args.dir})")
    return 0


def _one_node(cluster: LocalCluster, args: argparse.Namespace) -> int:
    node = cluster.node(args.node)
    if args.cluster_command in ("stop", "restart"):
        pid = cluster.pid(node)
        cluster.stop_node(node)
        print(f"stopped {node.name} ({'pid ' + str(pid) if pid else 'was not running'})")
    if args.cluster_command in ("start", "restart"):
        cluster.start_node(node, timeout=args.timeout)
        print(f"started {node.name} (pid {cluster.pid(node)}) on {node.address}")
    return 0
