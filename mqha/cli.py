"""``mqha``: operator and developer tools (docs/architecture.md §1).

The subcommand modules are imported statically (each has ``add_subcommands(sub)`` and
``dispatch(args) -> int | None``, None meaning "not one of mine"); they import their heavy parts
(the cluster launcher, PySpark, the benchmarks) only when one of their commands runs.
"""

import argparse
import logging
import sys

from mqha import __version__
from mqha.bench import cli as bench_cli
from mqha.broker import store_commands
from mqha.chaos import cli as chaos_cli
from mqha.cluster import commands as cluster_commands
from mqha.errors import MissingExtraError
from mqha.extras import require_extra

SUBCOMMAND_MODULES = (cluster_commands, chaos_cli, bench_cli, store_commands)


def _export(args: argparse.Namespace) -> int:
    from mqha.analysis.export import export

    if args.controller:
        return _export_cluster(args)
    *sources, out_dir = args.paths
    if not sources:
        print(
            "mqha export: give at least one run directory or database, then the output directory "
            "(or --controller ADDR and the output directory)",
            file=sys.stderr,
        )
        return 2
    try:
        summary = export(sources, out_dir, args.format)
    except FileNotFoundError as exc:
        print(f"mqha export: {exc}", file=sys.stderr)
        return 2
    print(summary.describe())
    return 0 if summary.sources else 1


def _export_cluster(args: argparse.Namespace) -> int:
    """``mqha export --controller ADDR OUT``: the live cluster's histories over HTTP."""
    import os

    from mqha.admin_cli.commands.failures import TLS_CA_ENV, TOKEN_ENV
    from mqha.analysis.network_export import ExportError, export_cluster

    if len(args.paths) != 1:
        print("mqha export --controller ADDR: give only the output directory", file=sys.stderr)
        return 2
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    tls_ca = args.tls_ca if args.tls_ca is not None else os.environ.get(TLS_CA_ENV)
    try:
        summary = export_cluster(args.controller, args.paths[0], token=token, tls_ca=tls_ca, fmt=args.format)
    except ExportError as exc:
        print(f"mqha export: {exc}", file=sys.stderr)
        return 2
    print(summary.describe())
    # Problems are written down for mqha analyze (inconclusive); the export itself did its job.
    return 0


def _analyze(args: argparse.Namespace) -> int:
    from mqha.analysis.report import summary_text

    if args.engine == "spark":
        try:
            require_extra("analysis", "pyspark", "for Spark (or use --engine python)")
        except MissingExtraError as exc:
            print(f"mqha analyze: {exc}", file=sys.stderr)
            return 2
    try:
        if args.engine == "python":
            from mqha.analysis.spark_job import analyze_python

            verdict = analyze_python(args.dir, report_dir=args.report_dir, limit=args.limit)
        else:
            from mqha.analysis.spark_job import analyze

            verdict = analyze(args.dir, master=args.master, report_dir=args.report_dir, limit=args.limit)
    except FileNotFoundError as exc:
        print(f"mqha analyze: {exc}", file=sys.stderr)
        return 2
    text = summary_text(verdict)
    (sys.stdout if verdict.ok else sys.stderr).write(text)
    from mqha.analysis.coverage import EXIT_CODES

    return EXIT_CODES[verdict.status]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mqha", description="mqha operator and developer tools")
    parser.add_argument("--version", action="version", version=f"mqha {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    selfcheck = sub.add_parser("selfcheck", help="write, crash-cut and recover a commit log and epoch file")
    selfcheck.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    export = sub.add_parser(
        "export",
        help="gather history databases into JSON Lines (docs/architecture.md §5)",
        description="mqha export <run-dir|history.db>... <out-dir>: directories are searched for history.db; "
        "mqha export --controller ADDR <out-dir>: a live cluster's histories and final logs over HTTP",
    )
    export.add_argument(
        "paths", nargs="+", metavar="PATH", help="run directories or databases, then the output dir"
    )
    export.add_argument(
        "--controller",
        action="append",
        metavar="ADDR",
        help="read a live cluster over HTTP instead, from any of its controllers (repeatable; "
        "'a;b' also works); then PATH is only the output dir",
    )
    export.add_argument(
        "--format",
        choices=("auto", "jsonl", "parquet"),
        default="auto",
        help="JSON Lines, Parquet, or auto (default): JSON Lines, Parquet for a table past 500,000 rows",
    )
    export.add_argument("--token", default=None, help="admin token (default: $MQHA_ADMIN_TOKEN)")
    export.add_argument("--tls-ca", default=None, help="PEM CA bundle: https (default: $MQHA_TLS_CA)")
    analyze = sub.add_parser(
        "analyze", help="check the no-loss invariants of an export with PySpark; non-zero exit on a violation"
    )
    analyze.add_argument("dir", help="an export directory (mqha export)")
    analyze.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    analyze.add_argument(
        "--report-dir", default=None, help="where to write the reports (default <dir>/report)"
    )
    analyze.add_argument("--limit", type=int, default=20, help="evidence rows shown per violated invariant")
    analyze.add_argument(
        "--engine",
        choices=("spark", "python"),
        default="spark",
        help="spark (default) or python: the pure checker, for small exports without a JVM",
    )
    sub.add_parser(
        "config-reference",
        help="print the config key reference (docs/config.md) from the key tables",
    )
    for module in SUBCOMMAND_MODULES:
        module.add_subcommands(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for module in SUBCOMMAND_MODULES:
        handled = module.dispatch(args)
        if handled is not None:
            return handled
    if args.command == "selfcheck":
        from mqha.broker.selfcheck import run_selfcheck

        return run_selfcheck(args.dir)
    if args.command == "export":
        return _export(args)
    if args.command == "config-reference":
        from mqha.cluster.config_reference import reference

        sys.stdout.write(reference())
        return 0
    if args.command == "analyze":
        return _analyze(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
