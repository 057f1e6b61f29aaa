"""``mqha.chaos.power_loss.cut_unflushed`` never cuts fsynced data (Hypothesis, the real commit log on
real files in a temporary directory).

Each example runs a few "power cycles": open the log, append (single and batched, across segment ends),
flush, sometimes truncate, then crash it (copy its directory while it is open: the files as a killed
process leaves them) and cut the copy. Every byte below the last completed flush must be untouched, the
checkpoint must never say less than ``flushed_offset`` (the SYNC_FLUSH ack path reads that), the cut
must remove exactly the messages appended after that flush, and the next open must recover without a
cut of its own. The next cycle goes on from the cut copy.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.broker.commitlog import CommitLog, FlushMode, MessageDraft
from mqha.broker.commitlog.checkpoint import decode_checkpoint
from mqha.broker.commitlog.segment import parse_segment_name
from mqha.chaos.power_loss import COMMIT_LOG_DIR, cut_unflushed
from mqha.history.recorder import commit_log_entries

SEG = 1024
TS = 1_700_000_000_000

append = st.tuples(st.just("append"), st.lists(st.integers(1, 400), min_size=1, max_size=4))
truncate = st.tuples(st.just("truncate"), st.lists(st.integers(0, 99), min_size=1, max_size=1))
step = st.one_of(append, append, st.just(("flush", [])), truncate)
cycles = st.lists(st.lists(step, max_size=14), min_size=1, max_size=4)


def open_log(directory: Path, mode: FlushMode) -> CommitLog:
    # No background flush: the only flushes are the test's (and SYNC_FLUSH appends).
    return CommitLog.open(str(directory), SEG, mode, flush_interval_ms=600_000, clock=lambda: TS)


def checkpoint_offset(directory: Path) -> int:
    checkpoint = decode_checkpoint((directory / "checkpoint").read_bytes())
    assert checkpoint is not None
    return checkpoint.flushed_offset


def segment_bytes(directory: Path) -> dict[int, bytes]:
    out = {}
    for path in directory.iterdir():
        base = parse_segment_name(path.name)
        if base is not None:
            out[base] = path.read_bytes()
    return out


def stored(log: CommitLog) -> list[tuple[int, int, str]]:
    return [(m.offset, m.size, m.msg_id) for m in commit_log_entries(log)]


@settings(max_examples=60, deadline=None)
@given(mode=st.sampled_from(list(FlushMode)), plan=cycles)
def test_the_cut_keeps_every_fsynced_byte_and_only_those(mode: FlushMode, plan: list) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store-0"
        counter = 0
        for cycle, steps in enumerate(plan):
            directory = root / COMMIT_LOG_DIR
            log = open_log(directory, mode)
            try:
                for kind, args in steps:
                    if kind == "append":
                        drafts = [
                            MessageDraft("t", bytes([counter % 251]) * n, msg_id=f"m{counter + i}")
                            for i, n in enumerate(args)
                        ]
                        counter += len(args)
                        if len(drafts) == 1:
                            log.append(drafts[0])
                        else:
                            log.append_batch(drafts)
                    elif kind == "flush":
                        log.flush()
                    else:
                        messages = stored(log)
                        if messages:
                            offset = messages[args[0] % len(messages)][0]
                            log.truncate(offset)
                    # What a SYNC_FLUSH put waits for never runs ahead of the checkpoint.
                    assert checkpoint_offset(directory) >= log.flushed_offset
                flushed = log.flushed_offset
                before = stored(log)
                image = Path(tmp) / f"image-{cycle}"
                shutil.copytree(root, image)  # the files as a SIGKILL leaves them (page cache)
            finally:
                log.close()
            shutil.rmtree(root)
            image.rename(root)
            old = segment_bytes(directory)
            report = cut_unflushed(root)

            assert report.flushed_offset == flushed
            assert not report.clean
            kept = [m for m in before if m[0] + m[1] <= flushed]
            lost = [(r.offset, r.size, r.msg_id) for r in report.lost]
            assert lost == [m for m in before if m[0] >= flushed]
            new = segment_bytes(directory)
            for base, data in old.items():
                if base + SEG <= flushed:
                    assert new[base] == data  # wholly fsynced: untouched
                elif base < flushed:
                    cut = flushed - base
                    assert new[base][:cut] == data[:cut]  # fsynced part untouched
                    assert not any(new[base][cut:])  # the rest as if never written
                else:
                    assert base not in new  # created after the last flush
            assert sorted(report.removed) == [f"{b:020d}" for b in sorted(old) if b >= flushed]

            reopened = open_log(directory, mode)
            try:
                assert reopened.recovery.cut_offset is None  # nothing torn left for recovery to cut
                assert reopened.max_offset == max(flushed, reopened.min_offset)
                assert stored(reopened) == kept
            finally:
                reopened.close()
