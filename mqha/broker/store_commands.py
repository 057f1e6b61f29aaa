"""``mqha store reset-identity -c broker.conf``: make a copied store a new replica (docs/architecture.md
§9.4; shell).

A copy of a broker's store carries that broker's identity and store id: started as is, it claims a
live replica's broker id, and the controllers refuse it (§3.2). On the stopped copy, this command
removes what names the replica it was copied from -- ``brokerIdentity`` (+ ``-temp``), ``storeId`` and
a stale ``mqbroker.pid`` -- and sets the copied history (``history.db``, the other replica's record)
aside as ``history.db.before-reset``. The next start makes a new store id, applies for a new broker id
and joins the set as a new replica; its log is a copy, which the HA handshake truncates to the
master's or lets catch up like any slave's.
"""

from __future__ import annotations

import argparse
import os
import sys

RESET_IDENTITY = "reset-identity"
HISTORY_FILES = ("history.db", "history.db-wal", "history.db-shm")
SET_ASIDE_SUFFIX = ".before-reset"


def add_subcommands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    store = sub.add_parser("store", help="operations on a stopped broker's store")
    actions = store.add_subparsers(dest="store_action", required=True)
    reset = actions.add_parser(
        RESET_IDENTITY,
        help="make a copied store a new replica: drop its broker identity and store id (broker stopped)",
    )
    reset.add_argument("-c", "--config", required=True, metavar="FILE", help="the copy's broker config file")


def dispatch(args: argparse.Namespace) -> int | None:
    """Run ``args`` if it is one of ours; None otherwise."""
    if args.command != "store":
        return None
    from mqha.broker.config import load_broker_layers
    from mqha.errors import ConfigError

    try:
        config, _ = load_broker_layers(args.config)
    except ConfigError as exc:
        print(f"mqha store {RESET_IDENTITY}: {exc}", file=sys.stderr)
        return 2
    try:
        for line in reset_identity(config["storePathRootDir"], config["storePathBrokerIdentity"]):
            print(line)
    except OSError as exc:
        print(f"mqha store {RESET_IDENTITY}: {exc}", file=sys.stderr)
        return 1
    return 0


def reset_identity(store_root: str, identity_path: str) -> list[str]:
    """Remove the identity, the store id and the pid file and set the history aside; what was done, one
    line each (the last says what happens next)."""
    from mqha.broker.__main__ import PID_FILE
    from mqha.durable import remove_durably, rename_durably
    from mqha.replicas_manager.identity import store_id_path, temp_path

    done = []
    for path in (
        identity_path,
        temp_path(identity_path),
        store_id_path(store_root),
        os.path.join(store_root, PID_FILE),
    ):
        if remove_durably(path):
            done.append(f"removed {path}")
    for name in HISTORY_FILES:
        path = os.path.join(store_root, name)
        aside = os.path.join(store_root, name.replace("history.db", "history.db" + SET_ASIDE_SUFFIX))
        if os.path.exists(path):
            rename_durably(path, aside)
            done.append(f"set aside {path} as {aside}")
    done.append(
        f"{store_root}: the next start registers it as a new replica (a new store id and broker id); its "
        "log is a copy, truncated to the master's or caught up like any slave's"
    )
    return done
