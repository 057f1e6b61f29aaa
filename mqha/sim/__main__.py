"""``python -m mqha.sim``: run seeds, or replay one with its trace."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from mqha.sim.bugs import Bugs
from mqha.sim.run import run_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqha.sim", description=__doc__)
    parser.add_argument("--seed", type=int, help="replay this seed and print its trace")
    parser.add_argument("--seeds", type=int, default=200, help="how many seeds to run (from --first)")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--plant", action="append", default=[], help="a planted bug (repeatable)")
    parser.add_argument("--trace", action="store_true", help="print the trace of every failing seed")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # the cores' own logs; the trace says what happened
    bugs = Bugs.planted(args.plant)
    if args.seed is not None:
        outcome = run_seed(args.seed, bugs)
        print("\n".join(outcome.trace))
        print(
            f"seed {args.seed}: {'ok' if outcome.ok else 'FAIL: ' + str(outcome.violation)}"
            f" ({outcome.acked} acked{'; ' + outcome.note if outcome.note else ''})"
        )
        return 0 if outcome.ok else 1
    started, failed = time.perf_counter(), 0
    for seed in range(args.first, args.first + args.seeds):
        outcome = run_seed(seed, bugs)
        if not outcome.ok:
            failed += 1
            print(f"seed {seed}: FAIL {outcome.violation}")
            if args.trace:
                print("\n".join(outcome.trace))
    elapsed = time.perf_counter() - started
    print(f"{args.seeds} seeds, {failed} failed, {elapsed:.1f} s ({args.seeds / elapsed * 60:.0f} seeds/min)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
