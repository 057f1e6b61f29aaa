"""The ``bitflip`` fault of a chaos run (shell: processes and store files).

A step flips one bit of one message record in a commit-log segment other than the last of one broker,
as a disk's silent corruption would: a stopped broker (SIGKILL, flip, restart at the heal) or a
running one (the write goes through the page cache the broker maps). The broker must find it (its
scrub, a read or the HA path), serve and ship nothing of it, and repair it from another replica
(docs/architecture.md §4.7). At the end of the run every flipped record must be repaired
(:meth:`BitFlips.unrepaired`): the verdict fails otherwise.

A step may instead hit a file the node reads only at start (the node stopped, flipped, restarted at
the heal): a controller's Raft journal or snapshot (``raft.journal`` / ``raft.dump``, docs/architecture.md
§9.6), a broker's epoch file (§9.2) or its ``confirmOffsetCheckpoint`` (§9.3). Each carries a checksum
and the damage must be found: the controller must come back damaged (``/healthz`` 503 "raft member
damaged"), and is then repaired as after a disk wipe (its store replaced, it rejoins as a new member);
the broker must log that it found the damage (the epoch file's backup taken, the checkpoint read as -1)
and go on. Damage not found is a run violation (:attr:`BitFlips.undetected`).

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
from mqha.broker.confirm_checkpoint import CONFIRM_CHECKPOINT_NAME
from mqha.chaos.controller_stores import ControllerStores
from mqha.chaos.schedule import (
    CHECKPOINT_FLIP,
    CONTROLLER,
    DISK_WIPE,
    EPOCH_FLIP,
    RAFT_FLIP,
    RUNNING,
    FaultStep,
)
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import http_get
from mqha.controller.raft.addresses import DUMP_FILE_NAME, JOURNAL_FILE_NAME
from mqha.controller.raft.journal_format import END_OFFSET, FIRST_RECORD_OFFSET

GZIP_HEADER_SIZE = 10
EPOCH_FILE_NAME = "epochFileCheckpoint"
FOUND_IN_LOG = {EPOCH_FLIP: "epoch file", CHECKPOINT_FLIP: "confirm offset checkpoint"}
"""What a broker's log says once it found a flip in that file (its WARNING)."""
DETECT_TIMEOUT = 30.0

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


def flip_byte_range(path: Path, start: int, end: int, rng: random.Random, node: str = "") -> Flip | None:
    """Flip one bit of ``path`` in bytes [start, end) (None when the range is empty)."""
    if end <= start:
        return None
    at, bit = rng.randrange(start, end), rng.randrange(8)
    fd = os.open(path, os.O_RDWR)
    try:
        old = os.pread(fd, 1, at)
        os.pwrite(fd, bytes([old[0] ^ (1 << bit)]), at)
    finally:
        os.close(fd)
    return Flip(node, path.name, at, at, bit)


def flip_controller_store(store: str | Path, rng: random.Random, node: str = "") -> Flip | None:
    """Flip one bit of the Raft snapshot (past gzip's 10-byte header, whose time field nothing checks)
    or of a record of the journal, drawn between those that exist; None when neither has data."""
    journal, dump = Path(store) / JOURNAL_FILE_NAME, Path(store) / DUMP_FILE_NAME
    choices = []
    if journal.exists():
        data = journal.read_bytes()
        if len(data) >= FIRST_RECORD_OFFSET:
            end = min(len(data), int.from_bytes(data[END_OFFSET:FIRST_RECORD_OFFSET], "little"))
            choices.append((journal, FIRST_RECORD_OFFSET, end))
    if dump.exists():
        choices.append((dump, GZIP_HEADER_SIZE, dump.stat().st_size))
    choices = [c for c in choices if c[2] > c[1]]
    if not choices:
        return None
    path, start, end = rng.choice(choices)
    return flip_byte_range(path, start, end, rng, node)


def flip_broker_file(store: str | Path, name: str, rng: random.Random, node: str = "") -> Flip | None:
    """Flip one bit of the broker's epoch file (the main one: its backup stays) or checkpoint."""
    path = Path(store) / name
    if not path.exists():
        return None
    return flip_byte_range(path, 0, path.stat().st_size, rng, node)


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

    def __init__(
        self,
        cluster: LocalCluster,
        say: Callable[[str], None],
        seed: int,
        stores: ControllerStores | None = None,
        rejoin_timeout: float = 60.0,
    ) -> None:
        """``stores``: gives a damaged controller a new store (the disk-wipe procedure)."""
        self.cluster = cluster
        self.say = say
        self.rng = random.Random(seed)
        self.flips: list[Flip] = []
        self.undetected: list[str] = []  # flips of start-time files the node did not find (violations)
        self._stores = stores
        self._rejoin_timeout = rejoin_timeout
        self._log_sizes: dict[str, int] = {}

    def hit(self, step: FaultStep, nodes: Sequence[str]) -> None:
        for node in nodes:
            if step.links != RUNNING:
                self.cluster.kill(node)
            store = self.cluster.node(node).store
            if step.links == RAFT_FLIP:
                flip = flip_controller_store(store, self.rng, node)
            elif step.links in (EPOCH_FLIP, CHECKPOINT_FLIP):
                name = EPOCH_FILE_NAME if step.links == EPOCH_FLIP else CONFIRM_CHECKPOINT_NAME
                flip = flip_broker_file(store, name, self.rng, node)
            else:
                flip = flip_older_segment(store, self.rng, node)
            if flip is None:
                self.say(f"    {node}: nothing to flip for {step.links}")
                continue
            self.flips.append(flip)
            self._log_sizes[node] = _size(self.cluster.node(node).log)
            self.say(f"    flipped {flip.describe()}")

    def heal(self, step: FaultStep, nodes: Sequence[str], start: Callable[[Sequence[str]], None]) -> None:
        if step.links == RUNNING:
            return
        if step.links != RAFT_FLIP:
            start(nodes)
        for node in nodes:
            if node not in self._log_sizes:
                continue  # nothing was flipped
            if step.links == RAFT_FLIP:
                self._heal_controller(node)
            elif step.links in FOUND_IN_LOG:
                self._check_logged(node, FOUND_IN_LOG[step.links])
        self._log_sizes.clear()

    def _heal_controller(self, name: str) -> None:
        """Start it, see it find its damage, then replace its store."""
        node = self.cluster.node(name)
        self.cluster.start_node(node, wait=False)
        deadline, remark = time.monotonic() + DETECT_TIMEOUT, ""
        while time.monotonic() < deadline:
            try:
                code, body = http_get(node.url + "/healthz", timeout=2.0)
            except OSError:
                code, body = 0, None
            remark = str(body.get("remark", "")) if isinstance(body, dict) else ""
            if code == 503 and "damaged" in remark:
                break
            time.sleep(0.3)
        else:
            self.undetected.append(f"{name}: its flipped Raft store was not found damaged ({remark!r})")
            self.say(f"    {name}: NOT found damaged")
        if "damaged" in remark:
            self.say(f"    {name}: {remark[:160]}")
        problem = self._replace_store(name)
        self.say(f"    {name}: {problem or 'store replaced, a voter again'}")

    def _replace_store(self, name: str) -> str | None:
        """Kill the damaged controller, wipe its store, bring it back as a voter: what went wrong."""
        if self._stores is None:
            return "no store replacement"
        self.cluster.kill(name)
        self._stores.wipe(name)
        wipe = FaultStep(0, DISK_WIPE, CONTROLLER, 0.0, 0.0, nodes=(name,))
        return self._stores.heal(wipe, [name], self._rejoin_timeout)

    def _check_logged(self, name: str, words: str) -> None:
        path = self.cluster.node(name).log
        deadline = time.monotonic() + DETECT_TIMEOUT
        while time.monotonic() < deadline:
            if words in _read_from(path, self._log_sizes.get(name, 0)):
                self.say(f"    {name}: found its flipped {words}")
                return
            time.sleep(0.3)
        self.undetected.append(f"{name}: no line that its {words} was found damaged")
        self.say(f"    {name}: its flipped {words} NOT found damaged")

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


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""
