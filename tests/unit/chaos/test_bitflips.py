"""The ``bitflip`` fault's flip: one bit of one message record in a segment other than the last."""

from __future__ import annotations

import random
from pathlib import Path

from mqha.broker.commitlog import CommitLog, CorruptRecordError, MessageDraft
from mqha.chaos.bitflips import flip_older_segment

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
