"""Whether a slave may serve reads: only what it verified against the master it follows (core;
docs/architecture.md §4). No sockets, clocks or files.

A slave's log is checked against its master's only at the HA handshake (docs/reference-behaviour.md
§13): until then it may hold messages at offsets the master has since reused (a new master that lost
its tail, an old master's unreplicated tail). So a slave serves reads only once a handshake with the
master it follows *now* -- the master's HA address and the master epoch the controller gave with it --
has cut its log to the consistent point (or emptied it, when there was none). A new master or epoch
makes it unverified again until the next handshake; a master that is merely unreachable does not.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Following:
    """The master a slave follows: its HA address and the master epoch of the role change."""

    address: str | None
    epoch: int


def slave_read_refusal(following: Following, verified: Following | None, problem: str | None) -> str | None:
    """Why a slave following ``following`` must not serve reads, or None when it may.

    ``verified``: the master (and epoch) of the slave's last completed handshake truncation;
    ``problem``: why the last handshake with the current master failed, if it did.
    """
    if verified == following:
        return None
    master = following.address or "no master yet"
    if problem:
        return f"replica not consistent with its master {master} (epoch {following.epoch}): {problem}"
    return (
        f"replica not yet verified against its master {master} (epoch {following.epoch}): reads resume once "
        f"the HA handshake has checked its log against the master's"
    )
