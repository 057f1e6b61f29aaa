"""Commit-log figures next to the raw speed of the same disk: appends (ASYNC/SYNC, single/batched), the
write mechanism (mmap vs pwrite), and recovery of a 1 GiB log (clean and crash paths) vs a raw read.

Run: ``.venv/bin/python -m pytest -m bench -s tests/bench/test_commitlog_bench.py``
(or ``scripts/bench.sh tests/bench/test_commitlog_bench.py``). Prints a table and writes
``bench-results/commitlog.json``; asserts nothing about speed.

Where: a temporary directory under ``$MQHA_BENCH_DIR`` (default ``/tmp``); the table names it, its
device and file system. Every figure includes the final fsync, so page-cache speed alone never counts
as disk speed. Cases run in ``REPEATS`` interleaved rounds; the best run is reported, with the median
beside it (the machine is shared: the best run is the least disturbed one). A 2 GiB write first warms
the page cache: on a fresh VM the first touch of guest memory is several times slower and would
penalise whichever case runs first. The ratio column divides by the raw Python write (appends) or by
the raw read in the same cache state (recovery).
"Cold" reads drop the files' pages first (``posix_fadvise(DONTNEED)`` on those files only).
"""

from __future__ import annotations

import json
import mmap
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mqha.broker.commitlog import CommitLog, FlushMode, MessageDraft, RecoveryReport
from mqha.broker.commitlog.checkpoint import Checkpoint, encode_checkpoint
from mqha.broker.commitlog.codec import encode_message

pytestmark = pytest.mark.bench
ASYNC, SYNC = FlushMode.ASYNC_FLUSH, FlushMode.SYNC_FLUSH

MIB = 1 << 20
GIB = 1 << 30
BODY_SIZE = 1024
WRITE_BYTES = 512 * MIB
SYNC_BATCH_BYTES = 16 * MIB
SYNC_SINGLE_MESSAGES = 300  # each with its own fsync
BATCH = 64
REPEATS = 3
REPO = Path(__file__).resolve().parents[2]
DRAFT = MessageDraft("BenchTopic", os.urandom(BODY_SIZE), keys="bench-key")
RECORD_SIZE = len(encode_message(DRAFT, 0, 0, msg_id="0" * 32))


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


Run = tuple[float, object]  # (seconds, what the case returned)


def _rounds(cases: list[tuple[str, Callable[[], Run]]]) -> dict[str, list[Run]]:
    """Run every case once per round, ``REPEATS`` rounds: drift on a shared machine hits all alike."""
    runs: dict[str, list[Run]] = {name: [] for name, _ in cases}
    for _ in range(REPEATS):
        for name, fn in cases:
            runs[name].append(fn())
    return runs


def _drop_cache(*paths: Path) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


# --- raw disk ------------------------------------------------------------------------------------------
def raw_python_write(path: Path, total: int) -> tuple[float, object]:
    chunk = os.urandom(MIB)

    def run() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for _ in range(total // MIB):
                os.write(fd, chunk)
            os.fsync(fd)
        finally:
            os.close(fd)

    elapsed, _ = _timed(run)
    path.unlink()
    return elapsed, None


def raw_dd_write(path: Path, total: int) -> tuple[float, object]:
    cmd = [
        "dd",
        "if=/dev/zero",
        f"of={path}",
        "bs=1M",
        f"count={total // MIB}",
        "conv=fdatasync",
        "status=none",
    ]
    elapsed, _ = _timed(lambda: subprocess.run(cmd, check=True))
    path.unlink()
    return elapsed, None


def raw_read(paths: list[tuple[Path, int]], cold: bool) -> tuple[float, object]:
    if cold:
        _drop_cache(*(p for p, _ in paths))
    buf = bytearray(MIB)
    view = memoryview(buf)

    def run() -> int:
        done = 0
        for path, length in paths:
            with open(path, "rb", buffering=0) as f:
                left = length
                while left > 0:
                    n = f.readinto(view[: min(MIB, left)])
                    if not n:
                        break
                    left -= n
                    done += n
        return done

    return _timed(run)


# --- write mechanism: one ~1.1 KiB record per call, preallocated file, fsync at the end -----------------
def mechanism(path: Path, total: int, use_mmap: bool) -> tuple[float, object]:
    record = encode_message(DRAFT, 0, 0, msg_id="0" * 32)
    count = total // len(record)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.posix_fallocate(fd, 0, total)
    try:
        start = time.perf_counter()
        pos = 0
        size = len(record)
        if use_mmap:
            mapped = mmap.mmap(fd, total)
            for _ in range(count):
                mapped[pos : pos + size] = record
                pos += size
            os.fdatasync(fd)
            elapsed = time.perf_counter() - start
            mapped.close()
        else:
            pwrite = os.pwrite
            for _ in range(count):
                pwrite(fd, record, pos)
                pos += size
            os.fdatasync(fd)
            elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return elapsed, count


# --- commit log appends --------------------------------------------------------------------------------
def appends(path: Path, total: int, mode: FlushMode, batch: int) -> tuple[float, object]:
    count = total // RECORD_SIZE // batch * batch
    log = CommitLog.open(str(_fresh(path)), GIB, mode)
    try:
        start = time.perf_counter()
        if batch == 1:
            append = log.append
            for _ in range(count):
                append(DRAFT)
        else:
            drafts = [DRAFT] * batch
            for _ in range(count // batch):
                log.append_batch(drafts)
        log.close()  # includes the final flush
        elapsed = time.perf_counter() - start
    finally:
        log.close()
        shutil.rmtree(path)
    return elapsed, count


# --- recovery ------------------------------------------------------------------------------------------
def build_one_segment_log(path: Path) -> int:
    """Fill one 1 GiB segment with 1 KiB messages, stopping before the log rolls into a second file."""
    with CommitLog.open(str(_fresh(path)), GIB) as log:
        drafts = [DRAFT] * BATCH
        while log.max_offset + (BATCH + 1) * RECORD_SIZE + 8 <= GIB:
            log.append_batch(drafts)
        while log.max_offset + 2 * RECORD_SIZE + 8 <= GIB:
            log.append(DRAFT)
        return log.max_offset


def recovery(path: Path, crash: bool, cold: bool) -> tuple[float, object]:
    if crash:  # as a crash before the first background flush leaves it: DIRTY, nothing known durable
        (path / "checkpoint").write_bytes(encode_checkpoint(Checkpoint(False, GIB, 0)))
    if cold:
        _drop_cache(*(p for p in path.iterdir() if p.name != "checkpoint"))
    elapsed, log = _timed(lambda: CommitLog.open(str(path), GIB))
    assert isinstance(log, CommitLog)
    report = log.recovery
    log.close()
    assert report.clean is not crash and report.cut_offset is None
    return elapsed, report


# --- the run -------------------------------------------------------------------------------------------
def _environment(root: Path) -> dict[str, str]:
    device = subprocess.run(
        ["df", "--output=source,fstype", str(root)], check=False, capture_output=True, text=True
    ).stdout
    return {
        "directory": str(root),
        "device": " ".join(device.split()[2:]) if device else "?",
        "python": sys.version.split()[0],
        "kernel": platform.release(),
        "cpus": str(os.cpu_count()),
    }


def test_commitlog_bench() -> None:
    base = Path(os.environ.get("MQHA_BENCH_DIR", "/tmp"))
    root = Path(tempfile.mkdtemp(prefix="mqha-commitlog-bench-", dir=base))
    env = _environment(root)
    rows: list[dict[str, object]] = []

    def row(case: str, runs: list[Run], nbytes: int, *, vs: str | None = None, note: str = "") -> None:
        seconds = min(t for t, _ in runs)
        messages = runs[0][1] if isinstance(runs[0][1], int) else None
        mbps = nbytes / MIB / seconds
        ratio = None
        if vs is not None:
            ratio = mbps / next(r["MiB/s"] for r in rows if r["case"] == vs)  # type: ignore[operator]
        rows.append(
            {
                "case": case,
                "seconds": round(seconds, 4),
                "MiB": round(nbytes / MIB, 1),
                "MiB/s": round(mbps, 1),
                "median MiB/s": round(nbytes / MIB / statistics.median(t for t, _ in runs), 1),
                "msgs/s": round(messages / seconds) if messages else None,
                "ratio": round(ratio, 3) if ratio is not None else None,
                "vs": vs,
                "note": note,
                "runs_seconds": [round(t, 4) for t, _ in runs],
            }
        )

    try:
        raw_python_write(root / "warmup", 2 * GIB)
        raw = "raw write: python 1 MiB chunks + fsync"
        mech = f"write {RECORD_SIZE} B records:"
        write_cases: list[tuple[str, Callable[[], Run]]] = [
            (raw, lambda: raw_python_write(root / "raw", WRITE_BYTES)),
            ("raw write: dd bs=1M conv=fdatasync", lambda: raw_dd_write(root / "dd", WRITE_BYTES)),
            (f"{mech} os.pwrite", lambda: mechanism(root / "mech", WRITE_BYTES, use_mmap=False)),
            (f"{mech} mmap slice (chosen)", lambda: mechanism(root / "mech", WRITE_BYTES, use_mmap=True)),
            ("CommitLog ASYNC_FLUSH single appends", lambda: appends(root / "log", WRITE_BYTES, ASYNC, 1)),
            (
                f"CommitLog ASYNC_FLUSH batches of {BATCH}",
                lambda: appends(root / "log", WRITE_BYTES, ASYNC, BATCH),
            ),
            (
                f"CommitLog SYNC_FLUSH batches of {BATCH}",
                lambda: appends(root / "log", SYNC_BATCH_BYTES, SYNC, BATCH),
            ),
            (
                "CommitLog SYNC_FLUSH single appends",
                lambda: appends(root / "log", SYNC_SINGLE_MESSAGES * RECORD_SIZE, SYNC, 1),
            ),
        ]
        runs = _rounds(write_cases)
        for name, _ in write_cases:
            count = runs[name][0][1]
            seconds = min(t for t, _ in runs[name])
            if count is None:
                row(name, runs[name], WRITE_BYTES, vs=None if name == raw else raw)
                continue
            assert isinstance(count, int)
            per = BATCH if "batches" in name else 1
            note = (
                "no codec"
                if name.startswith(mech)
                else f"{seconds / count * per * 1e6:.0f} us/" + ("batch" if per > 1 else "append")
            )
            row(name, runs[name], count * RECORD_SIZE, vs=raw, note=note)

        log_dir = root / "recovery"
        end = build_one_segment_log(log_dir)
        messages = end // RECORD_SIZE
        segment = log_dir / "00000000000000000000"
        for cold in (True, False):
            temp = "cold" if cold else "warm"
            read = f"raw read 1 MiB chunks ({temp} cache)"
            read_cases: list[tuple[str, Callable[[], Run]]] = [
                (read, lambda cold=cold: raw_read([(segment, end)], cold)),
                (f"recovery, clean path ({temp} cache)", lambda cold=cold: recovery(log_dir, False, cold)),
                (f"recovery, crash path ({temp} cache)", lambda cold=cold: recovery(log_dir, True, cold)),
            ]
            runs = _rounds(read_cases)
            row(read, [(t, None) for t, _ in runs[read]], end)
            for name, _ in read_cases[1:]:
                report = runs[name][0][1]
                assert isinstance(report, RecoveryReport)
                timed = [(t, messages) for t, _ in runs[name]]
                row(name, timed, report.verified_bytes, vs=read, note="full CRC check of the 1 GiB segment")
        with CommitLog.open(str(log_dir), GIB) as log:  # roll into a second segment
            log.append_batch([DRAFT] * BATCH)
        runs = _rounds([("rolled", lambda: recovery(log_dir, False, True))])
        report = runs["rolled"][0][1]
        assert isinstance(report, RecoveryReport)
        row(
            "recovery, clean path, log rolled to 2 files",
            [(t, None) for t, _ in runs["rolled"]],
            report.verified_bytes,
            note="only the last file is verified",
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(
        f"\ncommit-log benchmark: {RECORD_SIZE}-byte records ({BODY_SIZE} B bodies); "
        f"{REPEATS} interleaved rounds, best run (and median) shown"
    )
    print("  " + ", ".join(f"{k}: {v}" for k, v in env.items()))
    header = f"  {'case':52} {'MiB':>7} {'s':>8} {'MiB/s':>8} {'median':>8} {'msgs/s':>9} {'ratio':>6}  note"
    print(header)
    print("  " + "-" * (len(header) + 10))
    for r in rows:
        msgs = f"{r['msgs/s']:>9}" if r["msgs/s"] is not None else f"{'':>9}"
        ratio = f"{r['ratio']:>6.2f}" if r["ratio"] is not None else f"{'':>6}"
        print(
            f"  {r['case']:52} {r['MiB']:>7} {r['seconds']:>8.3f} {r['MiB/s']:>8.0f}"
            f" {r['median MiB/s']:>8.0f} {msgs} {ratio}"
            f"  {r['note']}"
        )
    print(
        "  ratio: best MiB/s over the raw row named in the JSON 'vs' (python write; read in the same cache)"
    )
    out = REPO / "bench-results" / "commitlog.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {"environment": env, "record_size": RECORD_SIZE, "repeats": REPEATS, "rows": rows}, indent=2
        )
    )
    print(f"  written: {out}")
