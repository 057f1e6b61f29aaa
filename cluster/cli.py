"""``mqha``: operator and developer tools (ARCHITECTURE §1). Subcommands are added by their issues."""

import argparse
import importlib
import logging
import sys

SUBCOMMAND_MODULES = ("cluster.commands", "chaos.cli", "bench.cli")
"""Packages that add their own ``mqha`` subcommands: each has ``add_subcommands(sub)`` and
``dispatch(args) -> int | None`` (None: not one of its commands)."""


def _export(args: argparse.Namespace) -> int:
    from analysis.export import export

    *sources, out_dir = args.paths
    if not sources:
        print(
            "mqha export: give at least one run directory or database, then the output directory",
            file=sys.stderr,
        )
        return 2
    try:
        summary = export(sources, out_dir)
    except FileNotFoundError as exc:
        print(f"mqha export: {exc}", file=sys.stderr)
        return 2
    print(summary.describe())
    return 0 if summary.sources else 1


def _analyze(args: argparse.Namespace) -> int:
    from analysis.report import summary_text

    try:
        if args.engine == "python":
            from analysis.spark_job import analyze_python

            verdict = analyze_python(args.dir, report_dir=args.report_dir, limit=args.limit)
        else:
            from analysis.spark_job import analyze

            verdict = analyze(args.dir, master=args.master, report_dir=args.report_dir, limit=args.limit)
    except FileNotFoundError as exc:
        print(f"mqha analyze: {exc}", file=sys.stderr)
        return 2
    text = summary_text(verdict)
    (sys.stdout if verdict.ok else sys.stderr).write(text)
    return 0 if verdict.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mqha", description="mqha operator and developer tools")
    sub = parser.add_subparsers(dest="command", required=True)
    selfcheck = sub.add_parser("selfcheck", help="write, crash-cut and recover a commit log and epoch file")
    selfcheck.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    export = sub.add_parser(
        "export",
        help="gather history databases into JSON Lines (ARCHITECTURE §5)",
        description="mqha export <run-dir|history.db>... <out-dir>: directories are searched for history.db",
    )
    export.add_argument(
        "paths", nargs="+", metavar="PATH", help="run directories or databases, then the output dir"
    )
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
    modules = [importlib.import_module(name) for name in SUBCOMMAND_MODULES]
    for module in modules:
        module.add_subcommands(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for module in modules:
        handled = module.dispatch(args)
        if handled is not None:
            return handled
    if args.command == "selfcheck":
        from broker.selfcheck import run_selfcheck

        return run_selfcheck(args.dir)
    if args.command == "export":
        return _export(args)
    if args.command == "analyze":
        return _analyze(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
