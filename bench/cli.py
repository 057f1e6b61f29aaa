"""``mqha bench`` (registered into ``cluster.cli``'s parser)."""

from __future__ import annotations

import argparse


def add_subcommands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` to the ``mqha`` subcommands."""
    sub.add_parser("bench", help="(bench: being built)")


def dispatch(args: argparse.Namespace) -> int | None:
    """Run ``args`` if it is one of ours; None otherwise."""
    if args.command == "bench":
        print("mqha bench: not built yet")
        return 2
    return None
