"""The planted bugs of ``mqha.testing.planted_bugs``, as the simulator expresses them.

A real run plants a bug by wrapping a part of a process at start-up; the simulator has no processes,
so each bug it can express is a switch read at the one place the planted wrapper acts on: the same
decision made early, skipped, or answered from the wrong state. ``EXPRESSED`` names them;
``NOT_EXPRESSED`` says why the others are out of the model's reach.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from mqha.controller import broker_claims

EXPRESSED = (
    "ack-before-replication",
    "stale-leader",
    "ack-before-fsync",
    "any-claim-stands",
    "full-disk-put-ok",
)
NOT_EXPRESSED = {
    "answer-before-commit": "it answers topic writes early, and the model has no topics (its broker-set "
    "writes commit within one step, so an early answer of those is rarely lost either)",
    "no-repair": "the model's records carry no checksums and it injects no bit flips",
    "master-needs-controller": "it costs availability, not safety; the invariants check safety only",
    "wiped-voter": "the Raft model keeps one committed log: no voter can lose entries it acknowledged",
    "retention-wall-clock": "the model has no retention and no wall clock",
}
REPLAYED = ("resumed-epoch", "learner-acks", "recovery-unreported")
"""Bugs fixed before the planted-bug switches existed, re-introduced by the same kind of switch."""


@dataclass
class Bugs:
    """Which bugs are planted in this run (all off: the production behaviour)."""

    ack_before_replication: bool = False
    stale_leader: bool = False
    ack_before_fsync: bool = False
    any_claim_stands: bool = False
    full_disk_put_ok: bool = False
    resumed_epoch: bool = False
    """5d8df79 undone: a master back from a crash resumes its old masterEpoch when it registers."""
    learner_acks: bool = False
    """Issue 25 undone: acks of a learner (or of any connection) count towards ``inSyncReplicas``."""
    recovery_unreported: bool = False
    """Issue 25 undone: a broker never says how it recovered (a clean, lossless start, whatever its
    power cut took), so the controller trusts a master that lost its un-fsynced tail."""

    @classmethod
    def planted(cls, names: Iterable[str]) -> Bugs:
        known = {f.name for f in fields(cls)}
        flags = {}
        for name in names:
            key = name.replace("-", "_")
            if key not in known:
                raise KeyError(f"unknown or inexpressible planted bug: {name}")
            flags[key] = True
        return cls(**flags)

    def names(self) -> list[str]:
        return [f.name.replace("_", "-") for f in fields(self) if getattr(self, f.name)]

    def handle_claim(self, holder: Any, claim: Any, now_ms: int) -> Any:
        """``broker_claims.handle_claim``, or a check that never refuses (``any-claim-stands``)."""
        if self.any_claim_stands:
            return None
        return broker_claims.handle_claim(holder, claim, now_ms)
