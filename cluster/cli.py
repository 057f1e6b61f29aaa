"""``mqha``: operator and developer tools (ARCHITECTURE §1). Subcommands are added by their issues."""

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mqha", description="mqha operator and developer tools")
    sub = parser.add_subparsers(dest="command", required=True)
    selfcheck = sub.add_parser("selfcheck", help="write, crash-cut and recover a commit log and epoch file")
    selfcheck.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "selfcheck":
        from broker.selfcheck import run_selfcheck

        return run_selfcheck(args.dir)
    return 2


if __name__ == "__main__":
    sys.exit(main())
