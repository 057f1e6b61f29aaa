"""The ``disk-full`` fault of a chaos run (shell: files on the brokers' own tmpfs mounts).

A step writes a filler file into one broker's store file system until ``ENOSPC``, holds, then deletes
it. The broker must refuse puts (a master: 503 ``SERVICE_NOT_AVAILABLE``, the producer's sends fail
and are retried, never acknowledged) or stop storing what it replicates (a slave: its master drops it
from the SyncStateSet), never crash, and be whole again once the space is back
(docs/architecture.md §4.2). The stores must each be on their own small tmpfs
(``LocalCluster(store_tmpfs_mib=N)``): :class:`~mqha.cluster.tmpfs.DiskFiller` refuses anything else,
so a run can never fill the machine's real disk.
"""

from __future__ import annotations

from collections.abc import Sequence

from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import ClusterError
from mqha.cluster.tmpfs import DiskFiller, cannot_mount

DISK_FULL_SETTINGS = {
    "mappedFileSizeCommitLog": str(1 << 20),
    "maxMessageSize": str(256 << 10),
    "cleanResourceInterval": "1000",
    "cleanFileForciblyEnable": "false",
}
"""Brokers on small tmpfs stores: 1 MiB segments, so a filled replica runs out of preallocated room
within a few seconds of traffic, and the full-disk state measured every second. Forcible cleaning is
off: a filled store is freed by the fault's own heal, and forcible cleaning would delete the oldest
acknowledged messages by design (RocketMQ's semantics), so the no-loss check would cover less of the
run. Size the tmpfs so that the run's traffic alone stays under ``diskMaxUsedSpaceRatio``."""


MIN_STORE_TMPFS_MIB = 32
"""Smallest store file system a ``disk-full`` run accepts: a few segments (4 MiB in a local cluster)
and the store's other files must fit with room to spare before it is filled."""


def disk_full_problem(store_tmpfs_mib: int) -> str | None:
    """Why a run with ``disk-full`` cannot go ahead with these stores, or None."""
    if store_tmpfs_mib <= 0:
        return (
            "disk-full needs each broker's store on its own small file system: add --store-tmpfs-mib N "
            f"(N >= {MIN_STORE_TMPFS_MIB}; root only); it never fills the machine's real disk"
        )
    if store_tmpfs_mib < MIN_STORE_TMPFS_MIB:
        return f"--store-tmpfs-mib must be at least {MIN_STORE_TMPFS_MIB} for disk-full"
    return cannot_mount()


class DiskFill:
    """Fills brokers' store file systems for ``disk-full`` steps and frees them at the heal."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.fillers: dict[str, DiskFiller] = {}

    def hit(self, nodes: Sequence[str]) -> str:
        """Fill the store file system of each of ``nodes``; returns what was written, for the log."""
        done = []
        for name in nodes:
            filler = DiskFiller(self.cluster.node(name).store)
            try:
                written = filler.fill()
            except ValueError as exc:  # not a small tmpfs: refused, nothing written
                raise ClusterError(str(exc)) from None
            self.fillers[name] = filler
            done.append(f"{name} +{written / (1 << 20):.1f} MiB")
        return ", ".join(done)

    def seen(self, name: str) -> str:
        """What the filled broker reports (``diskFull``, used ratio) and whether its master still counts
        it in the SyncStateSet, for the run's log."""
        status = self.cluster.broker_status(name) or {}
        if not status:
            return f"{name}: no status"
        node = self.cluster.node(name)
        master = self.cluster.master(node.group) if node.group else None
        master_status = (self.cluster.broker_status(master) or {}) if master is not None else {}
        members = master_status.get("syncStateSet") or []
        where = (
            "master"
            if master is not None and master.name == name
            else (
                "in the SyncStateSet"
                if status.get("controllerBrokerId") in members
                else "out of the SyncStateSet"
            )
        )
        return f"{name}: diskFull={status.get('diskFull')} used={status.get('diskUsedRatio', 0):.0%}, {where}"

    def heal(self, nodes: Sequence[str]) -> list[str]:
        """Free the fillers of ``nodes``; returns what each broker reported just before."""
        seen = []
        for name in nodes:
            filler = self.fillers.pop(name, None)
            if filler is not None:
                seen.append(self.seen(name))
                filler.free()
        return seen

    def heal_all(self) -> None:
        self.heal(list(self.fillers))
