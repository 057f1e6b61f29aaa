"""``mqha bench {controller,failover,replication,put,scale,auth,all,rocketmq} [--quick] [--out F]`` (shell).

Each benchmark prints its tables and writes its figures as JSON (default
``bench-results/<name>.json``; ``all`` writes one file holding every benchmark). Scratch data (run
directories, commit logs) goes to a temporary directory under ``$MQHA_BENCH_DIR`` (default /tmp),
removed afterwards unless the run failed (then its logs are kept and the path printed).

``auth`` measures what authentication costs: the controller workloads, puts and a slave's catch-up
with authentication off and on, side by side in one run (``mqha.bench.auth``; docs/performance.md).

``rocketmq`` runs mqha beside the Apache RocketMQ reference cluster (``mqha.bench.rocketmq``); it
needs a repository checkout (``interop/``) after ``scripts/interop.sh setup``, and is not in ``all``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mqha.bench.report import Outcome

NAMES = ("controller", "failover", "replication", "put", "scale", "auth")
BESIDE_ROCKETMQ = "rocketmq"  # not in ``all``: it needs the checkout's interop/ and Java
RESULTS_DIR = Path("bench-results")


def add_subcommands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` to the ``mqha`` subcommands."""
    parser = sub.add_parser("bench", help="benchmarks with side-by-side figures (tables + JSON)")
    parser.add_argument(
        "name", choices=(*NAMES, "all", BESIDE_ROCKETMQ), help="which benchmark (all: one after the other)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and short windows (smoke test)")
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON results file (default bench-results/<name>.json)"
    )
    parser.add_argument(
        "--kills",
        type=int,
        default=None,
        help="rocketmq: faults per side, kind and load (default 3; quick 1)",
    )
    parser.add_argument(
        "--only",
        default=None,
        help="rocketmq: only these failover runs, KIND:SENDERS[,...] (kind kill or pause; e.g. kill:16)",
    )


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / (1 << 20), 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "load_avg_at_start": os.getloadavg(),
    }


def _benchmark_module(name: str) -> Any:
    """The module of benchmark ``name`` (imported here, not at ``mqha`` start-up: they are heavy)."""
    from mqha.bench import auth, controller, failover, put, replication, rocketmq, scale

    modules = {
        "controller": controller,
        "failover": failover,
        "replication": replication,
        "put": put,
        "scale": scale,
        "auth": auth,
        BESIDE_ROCKETMQ: rocketmq,
    }
    return modules[name]


def run_one(name: str, quick: bool, kills: int | None = None, only: str | None = None) -> Outcome:
    """Run benchmark ``name`` in a scratch directory; keep the directory only if it failed."""
    module = _benchmark_module(name)
    base = Path(tempfile.mkdtemp(prefix=f"mqha-bench-{name}-", dir=os.environ.get("MQHA_BENCH_DIR")))
    started = time.monotonic()
    try:
        extra = {"kills": kills, "only": only} if name == BESIDE_ROCKETMQ else {}
        outcome: Outcome = module.run(base, quick, **extra)
    except BaseException:
        print(f"mqha bench {name}: failed; logs kept in {base}", file=sys.stderr)
        raise
    if outcome.data.get("keep_run_dir"):  # e.g. a message lost: the logs are the reproduction
        print(f"mqha bench {name}: logs kept in {base} ({outcome.data['keep_run_dir']})", file=sys.stderr)
    else:
        shutil.rmtree(base, ignore_errors=True)
    outcome.data["seconds"] = round(time.monotonic() - started, 1)
    return outcome


def dispatch(args: argparse.Namespace) -> int | None:
    """Run ``args`` if it is one of ours; None otherwise."""
    if args.command != "bench":
        return None
    names = NAMES if args.name == "all" else (args.name,)
    results: dict[str, Any] = {"machine": machine(), "quick": args.quick}
    for name in names:
        outcome = run_one(name, args.quick, getattr(args, "kills", None), getattr(args, "only", None))
        print(outcome.text(), end="\n\n", flush=True)
        results[name] = outcome.as_json()
    out = args.out or RESULTS_DIR / f"{args.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"wrote {out}")
    return 0
