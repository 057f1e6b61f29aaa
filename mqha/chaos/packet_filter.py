"""The chaos run's kernel packet filter (shell around ``mqha.chaos.netfilter``): one nftables table.

``PacketFilter.apply(drops)`` replaces every rule at once (one ``nft -f`` transaction); ``clear()``
removes the table. Needs root and the ``nft`` tool (Debian: nftables; ``scripts/setup.sh`` installs it);
``problem()`` says why not, in one line, before a run starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from mqha.chaos.netfilter import TABLE_PREFIX, Drop, Endpoint, removal, ruleset, stale_tables
from mqha.chaos.shim.sitecustomize import SOURCE_ENV

NFT_TIMEOUT_S = 10.0
SHIM_DIR = Path(__file__).resolve().parent / "shim"
"""Put first on a process's ``PYTHONPATH`` with ``MQHA_CHAOS_SOURCE_ADDRESS`` set: its connections come
from that address (``shim/sitecustomize.py``)."""


def problem() -> str | None:
    """Why this machine cannot filter packets for a chaos run, or None."""
    if shutil.which("nft") is None:
        return "network faults need the nft tool (apt-get install nftables; scripts/setup.sh does)"
    if os.geteuid() != 0:
        return "network faults need root (they change the kernel's packet filter)"
    probe = f"mqha_probe_{os.getpid()}"
    try:
        _nft(f"table inet {probe}\ndelete table inet {probe}\n")
    except RuntimeError as exc:
        return f"the kernel refused an nftables table: {exc}"
    return None


def shim_env(source: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment that makes a Python process connect from ``source``."""
    path = (base or os.environ).get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(SHIM_DIR), path) if p), SOURCE_ENV: source}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_tables() -> list[str]:
    """Delete the tables of chaos runs that are gone (``netfilter.stale_tables``); the names deleted."""
    try:
        listing = subprocess.run(
            ["nft", "list", "tables"], capture_output=True, text=True, timeout=NFT_TIMEOUT_S, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    stale = stale_tables(listing, _pid_alive)
    for name in stale:
        _nft(removal(name))
    return stale


def _nft(script: str) -> None:
    try:
        done = subprocess.run(
            ["nft", "-f", "-"],
            input=script,
            text=True,
            capture_output=True,
            timeout=NFT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"nft: {exc}") from None
    if done.returncode != 0:
        raise RuntimeError(f"nft exit {done.returncode}: {done.stderr.strip()[:300]}")


class PacketFilter:
    """The drops in force now, as one nftables table named after this process."""

    def __init__(self, endpoints: Mapping[str, Endpoint], table: str | None = None) -> None:
        self.endpoints = dict(endpoints)
        self.table = table or f"{TABLE_PREFIX}{os.getpid()}"
        self.drops: tuple[Drop, ...] = ()
        remove_stale_tables()

    def apply(self, drops: Iterable[Drop]) -> None:
        """Exactly ``drops`` from now on (an empty list lets everything through)."""
        wanted = tuple(sorted(set(drops)))
        _nft(ruleset(self.table, self.endpoints, wanted))
        self.drops = wanted

    def clear(self) -> None:
        """Remove the table (idempotent)."""
        _nft(removal(self.table))
        self.drops = ()
