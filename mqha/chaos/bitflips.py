"""The ``bitflip`` fault of a chaos run (shell: processes and store files).

A step flips one bit of one message record in a commit-log segment other than the last of one broker,
as a disk's silent corruption would: a stopped broker (SIGKILL, flip, restart at the heal) or a
running one (the write goes through the page cache the broker maps). The broker must find it (its
scrub, a read or the HA path), serve and ship nothing of it, and repair it from another replica
(docs/architecture.md §4.7). At the end of the run every flipped record must be repaired
(:meth:`BitFlips.unrepaired`): the verdict fails otherwise.

Runs with this fault use small segments and a fast scrub (``BITFLIP_SETTINGS``), so a short run has
older segments and finds a flip within seconds. The record and the bit are drawn from
``random.Random(seed)`` in the order of the steps.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mqha.broker.commitlog.codec import BLANK_SIZE, MESSAGE_MAGIC, MIN_MESSAGE_SIZE, unit_size_at
from mqha.broker.commitlog.segment import parse_segment_name
from mqha.chaos.schedule import STOPPED, FaultStep
from mqha.cluster.local import LocalCluster

BITFLIP_SETTINGS = {
    "mappedFileSizeCommitLog": str(64 * 1024),
    "maxMessageSize": str(16 * 1024),
    "scrubCommitLogBytesPerSecond": str(32 * 1024 * 1024),
}


@dataclass(frozen=True)
class Flip:
    """One flipped bit: where (node, global offset of its record and of the byte) and which bit."""

    node: str
    segment: str
    record: int
    byte: int
    bit: int

    def describe(self) -> str:
        return (
            f"{self.node}: bit {self.bit} at offset {self.byte} (the record at {self.record}, {self.segment})"
        )


def flip_older_segment(store: str | Path, rng: random.Random, node: str = "") -> Flip | None:
    """Flip one bit of a message record in one of the store's segments other than the last; None when
    the log has a single segment (nothing older to damage)."""
    directory = Path(store) / "commitlog"
    bases = sorted(b for p in directory.iterdir() if (b := parse_segment_name(p.name)) is not None)
    if len(bases) < 2:
        return None
    base = rng.choice(bases[:-1])
    path = directory / f"{base:020d}"
    data = path.read_bytes()
    records, pos = [], 0
    while pos + BLANK_SIZE <= len(data):
        size, magic = unit_size_at(data, pos)
        if magic != MESSAGE_MAGIC or size < MIN_MESSAGE_SIZE:
            break  # the blank marker, or the end
        records.append((pos, size))
        pos += size
    if not records:
        return None
    start, size = rng.choice(records)
    at, bit = start + rng.randrange(size), rng.randrange(8)
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, bytes([data[at] ^ (1 << bit)]), at)
    finally:
        os.close(fd)
    return Flip(node, path.name, base + start, base + at, bit)


class BitFlips:
    """Flips bits for ``bitflip`` steps, restarts stopped nodes at the heal, checks the repairs."""

    def __init__(self, cluster: LocalCluster, say: Callable[[str], None], seed: int) -> None:
        self.cluster = cluster
        self.say = say
        self.rng = random.Random(seed)
        self.flips: list[Flip] = []

    def hit(self, step: FaultStep, nodes: Sequence[str]) -> None:
        for node in nodes:
            if step.links == STOPPED:
                self.cluster.kill(node)
            flip = flip_older_segment(self.cluster.node(node).store, self.rng, node)
            if flip is None:
                self.say(f"    {node}: a single segment, nothing older to flip")
                continue
            self.flips.append(flip)
            self.say(f"    flipped {flip.describe()}")

    def heal(self, step: FaultStep, nodes: Sequence[str], start: Callable[[Sequence[str]], None]) -> None:
        if step.links == STOPPED:
            start(nodes)

    def unrepaired(self, timeout: float) -> list[str]:
        """The brokers that still report a damaged record after ``timeout`` seconds (each with its
        reason), or whose status cannot be read: [] when every flip was repaired."""
        deadline = time.monotonic() + timeout
        while True:
            problems = []
            for broker in self.cluster.brokers:
                status = self.cluster.broker_status(broker, timeout=2.0)
                if status is None or "integrity" not in status:
                    problems.append(f"{broker.name}: no status")
                elif status["integrity"]["damagedRecords"]:
                    problems.append(f"{broker.name}: {status['integrity']['damaged']}")
            if not problems or time.monotonic() >= deadline:
                return problems
            time.sleep(0.5)
