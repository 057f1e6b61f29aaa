"""The ``bitflip`` fault's flip: one bit of one message record in a segment other than the last."""

from __future__ import annotations

import random
from pathlib import Path

from mqha.broker import confirm_checkpoint
from mqha.broker.commitlog import CommitLog, CorruptRecordError, MessageDraft
from mqha.chaos.bitflips import flip_broker_file, flip_controller_store, flip_older_segment
from mqha.controller.raft import journal_format

SEGMENT = 4096


def test_a_flip_damages_exactly_one_record_of_an_older_segment(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with CommitLog.open(str(store / "commitlog"), SEGMENT) as log:
        log.append_batch([MessageDraft("t", bytes(60), msg_id=f"m{i}") for i in range(20)])
    assert flip_older_segment(store, random.Random(1)) is None  # a single segment: nothing older
    with CommitLog.open(str(store / "commitlog"), SEGMENT) as log:
        log.append_batch([MessageDraft("t", bytes(60), msg_id=f"n{i}") for i in range(100)])
        end = log.max_offset
    flip = flip_older_segment(store, random.Random(1), "b-0")
    assert flip is not None and flip.node == "b-0"
    assert flip.record <= flip.byte < end - end % SEGMENT  # not in the last segment
    with CommitLog.open(str(store / "commitlog"), SEGMENT) as log:
        damaged = []
        offset = 0
        while offset < log.max_offset:
            try:
                offset = log.read_messages(offset, 1000, log.max_offset)[1]
            except CorruptRecordError as exc:
                damaged.append(exc.offset)
                offset = exc.resume
        assert damaged == [flip.record]


def test_a_flip_of_a_controller_journal_is_damage_its_format_finds(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    assert flip_controller_store(store, random.Random(1)) is None  # nothing there
    records = b"".join(journal_format.encode_record(b"command-%d" % i, i, 1) for i in range(1, 20))
    head = bytearray(journal_format.header(b"0.3.17"))
    head[journal_format.END_OFFSET : journal_format.FIRST_RECORD_OFFSET] = (
        journal_format.FIRST_RECORD_OFFSET + len(records)
    ).to_bytes(4, "little")
    (store / "raft.journal").write_bytes(bytes(head) + records)
    assert journal_format.parse((store / "raft.journal").read_bytes()).damage is None
    for seed in range(20):
        before = (store / "raft.journal").read_bytes()
        flip = flip_controller_store(store, random.Random(seed), "n0")
        assert flip is not None and flip.segment == "raft.journal"
        assert flip.byte >= journal_format.FIRST_RECORD_OFFSET
        assert journal_format.parse((store / "raft.journal").read_bytes()).damage is not None
        (store / "raft.journal").write_bytes(before)


def test_a_flip_of_a_confirm_checkpoint_is_found(tmp_path: Path) -> None:
    path = tmp_path / "confirmOffsetCheckpoint"
    good = confirm_checkpoint.encode(123_456).ljust(64)
    for seed in range(50):
        path.write_bytes(good)
        flip = flip_broker_file(tmp_path, path.name, random.Random(seed), "b-0")
        assert flip is not None
        assert confirm_checkpoint.decode(path.read_bytes())[1], flip.describe()  # a reason: found
    assert flip_broker_file(tmp_path, "epochFileCheckpoint", random.Random(1)) is None  # no file
