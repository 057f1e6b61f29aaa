"""``mqha chaos`` (registered into ``cluster.cli``'s parser)."""

from __future__ import annotations

import argparse


def add_subcommands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``chaos`` to the ``mqha`` subcommands."""
    sub.add_parser("chaos", help="(chaos: being built)")


def dispatch(args: argparse.Namespace) -> int | None:
    """Run ``args`` if it is one of ours; None otherwise."""
    if args.command == "chaos":
        print("mqha chaos: not built yet")
        return 2
    return None
