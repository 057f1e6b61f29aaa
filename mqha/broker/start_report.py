"""How this broker process started: its incarnation and what recovery found (core; docs/architecture.md
§3.2, §4).

Each ``mqbroker`` process gets a new *incarnation* (KIP-903's lesson: a restarted replica must not pass
for its old self). The *start report* says whether the last shutdown was clean and whether recovery
may have lost data this replica had confirmed: the confirm-offset checkpoint read at open (the
highest offset this replica knew acknowledged, docs/architecture.md §9.3) lies beyond the recovered
log end, so acknowledged messages this replica held are gone from it (a power cut took its un-fsynced
tail). Register and heartbeat carry the report to the controller, whose elections never prefer such a
replica over one that holds more of the acknowledged log (docs/architecture.md §3.2).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

__all__ = ["StartReport", "new_incarnation", "start_report"]


def new_incarnation() -> str:
    """A fresh incarnation: 32 lowercase hex digits, new at every process start."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class StartReport:
    """What one broker process found when it opened its store."""

    incarnation: str
    clean_shutdown: bool
    """The commit log's checkpoint said CLEAN at open (the previous process closed it after a full flush)."""
    lossy: bool
    """Recovery may have lost data this replica had confirmed or acknowledged."""
    confirm_offset_before_recovery: int
    """The confirm-offset checkpoint's value before recovery clamped it (-1: none or unreadable)."""
    recovered_max_offset: int

    @property
    def lost_range(self) -> tuple[int, int] | None:
        """[recovered log end, confirm offset before recovery) when lossy, else None."""
        if not self.lossy:
            return None
        return (self.recovered_max_offset, self.confirm_offset_before_recovery)

    def describe(self) -> str:
        """One log line."""
        how = "clean shutdown" if self.clean_shutdown else "unclean shutdown"
        text = (
            f"incarnation {self.incarnation}: {how}, log recovered to {self.recovered_max_offset}, "
            f"confirm offset before recovery {self.confirm_offset_before_recovery}"
        )
        if self.lossy:
            text += (
                f"; LOSSY: confirmed offsets [{self.recovered_max_offset}, "
                f"{self.confirm_offset_before_recovery}) are gone from this replica"
            )
        return text

    def to_json(self) -> dict[str, Any]:
        """The camelCase document of the broker's ``/v1/status`` (``startReport``)."""
        return {
            "incarnation": self.incarnation,
            "cleanShutdown": self.clean_shutdown,
            "lossyRecovery": self.lossy,
            "confirmOffsetBeforeRecovery": self.confirm_offset_before_recovery,
            "recoveredMaxOffset": self.recovered_max_offset,
        }


def start_report(
    incarnation: str, *, clean_shutdown: bool, confirm_offset_before_recovery: int, recovered_max_offset: int
) -> StartReport:
    """The report of a start whose recovery ended at ``recovered_max_offset`` (pure).

    Lossy exactly when the confirm offset the replica had persisted lies beyond what survived: a
    confirmed offset is one the group acknowledged, and this replica no longer holds it. (A clean
    shutdown can be lossy too, when the log files were cut behind the broker's back.)
    """
    lossy = confirm_offset_before_recovery > recovered_max_offset
    return StartReport(
        incarnation=incarnation,
        clean_shutdown=clean_shutdown,
        lossy=lossy,
        confirm_offset_before_recovery=confirm_offset_before_recovery,
        recovered_max_offset=recovered_max_offset,
    )
