"""``mqha selfcheck``: the storage layer's crash story, shown on real files.

Writes a commit log across several small segments and an epoch file, then does to them what a
crash does — cuts the log mid-message, flips a byte in a body, tears the epoch file — and reopens
them, printing what recovery kept. Exit 0 when every step recovered as it must.
"""

from __future__ import annotations

import os
import tempfile

from mqha.broker.commitlog import CommitLog, MessageDraft
from mqha.epoch.file import EpochFile, EpochStore

_SEGMENT_SIZE = 64 * 1024
_MESSAGES = 2000


def _step(name: str, ok: bool, detail: str) -> bool:
    print(f"  [{'ok' if ok else 'FAIL'}] {name}: {detail}")
    return ok


def _last_segment(log_dir: str) -> str:
    names = sorted(n for n in os.listdir(log_dir) if n.isdigit())
    return os.path.join(log_dir, names[-1])


def _check_commit_log(log_dir: str) -> list[bool]:
    results = []
    with CommitLog.open(log_dir, _SEGMENT_SIZE) as log:
        appended = log.append_batch(
            [MessageDraft(topic="selfcheck", body=f"message {i}".encode() * 40) for i in range(_MESSAGES)]
        )
        last = appended[-1]
        end = log.max_offset
    segments = len([n for n in os.listdir(log_dir) if n.isdigit()])
    print(f"wrote {_MESSAGES} messages, {end} bytes, {segments} segment files of {_SEGMENT_SIZE} bytes")

    # A torn write: the last message loses its final bytes, as if the process died mid-write.
    path = _last_segment(log_dir)
    base = int(os.path.basename(path))
    with open(path, "r+b") as handle:
        handle.seek(last.offset - base + last.size // 2)
        handle.write(b"\0" * (last.size - last.size // 2))
    with CommitLog.open(log_dir, _SEGMENT_SIZE) as log:
        results.append(
            _step(
                "torn tail",
                log.max_offset == last.offset,
                f"recovered to {log.max_offset}, the last boundary",
            )
        )
        survivor = appended[-2]
        body = log.read(survivor.offset).body
    # A flipped byte inside the body of the (new) last message: the CRC must catch it.
    with open(path, "r+b") as handle:
        handle.seek(survivor.offset - base + survivor.size - 3)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with CommitLog.open(log_dir, _SEGMENT_SIZE) as log:
        results.append(
            _step(
                "flipped body byte",
                log.max_offset == survivor.offset,
                f"CRC mismatch cut at {log.max_offset}; {len(body)}-byte body not served",
            )
        )
        log.append(MessageDraft(topic="selfcheck", body=b"after recovery"))
        results.append(
            _step("append after recovery", log.max_offset > survivor.offset, f"end {log.max_offset}")
        )
    return results


def _check_epoch_file(path: str) -> list[bool]:
    store = EpochStore(path)
    for epoch, start in ((1, 0), (2, 4096), (3, 9000)):
        store.append(epoch, start)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    print("epoch file:\n    " + text.rstrip("\n").replace("\n", "\n    "))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text[: len(text) - 4])  # torn: the last line half written
    history = EpochFile(path).load()
    return [
        _step(
            "torn epoch file",
            history.pairs() == [(1, 0), (2, 4096), (3, 9000)],
            f"fell back to {os.path.basename(path)}.bak, the same generation, with entries {history.pairs()}",
        )
    ]


def run_selfcheck(directory: str | None = None) -> int:
    """Run every step in ``directory`` (a fresh temporary one by default); 0 when all recovered."""
    with tempfile.TemporaryDirectory(prefix="mqha-selfcheck-") as scratch:
        root = directory or scratch
        os.makedirs(root, exist_ok=True)
        print(f"mqha storage self-check in {root}")
        results = _check_commit_log(os.path.join(root, "commitlog"))
        results += _check_epoch_file(os.path.join(root, "epochFileCheckpoint"))
    passed = all(results)
    print("self-check passed" if passed else "self-check FAILED")
    return 0 if passed else 1
