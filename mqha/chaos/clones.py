"""The ``clone`` fault of a chaos run: a replica started from a copy of another's store (shell: files
and processes).

The copy (commit log, epochs, checkpoints, identity and store id; not the history, which is the
original's record and would be counted twice by the analysis) goes to ``<run_dir>/clones/<node>-<k>``
and starts as an ``mqbroker`` with the original's config but its own ports: it claims the original's
broker id from another address. The controllers must refuse it, and it must stop on its own with one
line (docs/architecture.md §3.2), within ``REFUSED_WITHIN`` of serving (when its claims begin): the
start-up before that (Python, the store's recovery) takes tens of seconds on a loaded machine and is
bounded apart. At the heal a copy still running is stopped (by pid) and named as
the run's failure; a refused copy's directory is removed (its line is kept in ``problems`` only when
it was not refused).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import shutil
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import command_of
from mqha.cluster.processes import LOCALHOST, NodeProcess, free_port_pair

REFUSED_WITHIN = 30.0  # seconds from the copy serving to its own exit (retries for a heartbeat timeout)
STARTS_WITHIN = 90.0  # seconds from the copy's spawn to its serving line (as a cluster's start)
SERVING_MARK = " serving on "
"""What the broker's ``mqbroker:`` line says once it serves and claims its id (``mqha.broker``)."""
NOT_COPIED = ("history.db*", "*.pid", "lock")
REFUSAL_MARK = "another live process"
"""What the refused broker's last line says (``mqha.controller.broker_claims``)."""


@dataclass
class Clone:
    """One copy of a store, started as a broker."""

    original: str
    base: Path
    proc: NodeProcess
    started_at: float  # time.time(): compared with the copy's log times (it runs without the clock shim)
    port: int

    @property
    def log(self) -> Path:
        return self.base / "broker.log"

    def last_line(self) -> str:
        lines = [
            line for line in self.log.read_text(errors="replace").splitlines() if line.startswith("mqbroker:")
        ]
        return lines[-1] if lines else ""

    def serving_at(self) -> float | None:
        """When the copy logged that it serves (time.time()), or None: not yet."""
        for line in self.log.read_text(errors="replace").splitlines():
            if line[24:].startswith("INFO mqbroker:") and SERVING_MARK in line:
                return _logged_at(line)
        return None

    def last_logged_at(self) -> float | None:
        """The time of the copy's last timestamped log line (about when it stopped), or None."""
        times = [_logged_at(line) for line in self.log.read_text(errors="replace").splitlines()]
        return max((t for t in times if t is not None), default=None)

    def deadline(self) -> float:
        """When a copy still running has failed: ``REFUSED_WITHIN`` after serving, or never served."""
        serving = self.serving_at()
        return self.started_at + STARTS_WITHIN if serving is None else serving + REFUSED_WITHIN


class Clones:
    """Starts the copies of ``clone`` steps and judges, at their heal, whether they were refused."""

    def __init__(self, cluster: LocalCluster, run_dir: Path, say: Callable[[str], None]) -> None:
        self.cluster = cluster
        self.run_dir = run_dir
        self.say = say
        self.started = 0
        self.refused = 0
        self.problems: list[str] = []
        self._running: list[Clone] = []

    def hit(self, node: str) -> None:
        """Copy ``node``'s store (it keeps running) and start the copy on new ports."""
        original = self.cluster.node(node)
        self.started += 1
        base = self.run_dir / "clones" / f"{node}-{self.started}"
        shutil.copytree(
            original.store,
            base / "store",
            ignore=shutil.ignore_patterns(*NOT_COPIED),
            ignore_dangling_symlinks=True,
            copy_function=_copy_if_present,
        )
        port = free_port_pair()
        lines = [
            line
            for line in original.conf.read_text().splitlines()
            if line.split("=", 1)[0] not in ("listenPort", "haListenPort", "storePathRootDir")
        ]
        lines += [f"listenPort={port}", f"haListenPort={port + 1}", f"storePathRootDir={base / 'store'}"]
        conf = base / "broker.conf"
        conf.write_text("\n".join(lines) + "\n")
        args = [
            *command_of("mqbroker", "mqha.broker"),
            "-c",
            str(conf),
            "--log-level",
            self.cluster.log_level,
        ]
        proc = NodeProcess.spawn(args, base / "broker.log", env=self.cluster.env, die_with_parent=True)
        self._running.append(Clone(node, base, proc, time.time(), port))
        self.say(f"    copy of {node}'s store started as pid {proc.pid} on port {port}")

    def heal(self) -> None:
        """Wait (bounded) for each running copy to stop on its own; stop the ones that do not."""
        for clone in self._running:
            while clone.proc.is_running() and time.time() < clone.deadline():
                time.sleep(0.2)
            self._judge(clone)
        self._running = []

    def _judge(self, clone: Clone) -> None:
        ran = time.time() - clone.started_at
        serving = clone.serving_at()
        served = "never served" if serving is None else f"{time.time() - serving:.0f} s serving"
        if clone.proc.is_running():
            role = _role(clone.port)
            clone.proc.kill()
            self.problems.append(
                f"a copy of {clone.original}'s store ran {ran:.0f} s ({served}) without being refused{role} "
                f"(log: {clone.log})"
            )
        elif REFUSAL_MARK not in clone.last_line():
            self.problems.append(
                f"a copy of {clone.original}'s store stopped (exit {clone.proc.returncode()}) without a "
                f"refusal: {clone.last_line() or 'no line'} (log: {clone.log})"
            )
        else:
            self.refused += 1
            last = clone.last_logged_at()
            after = "" if serving is None or last is None else f", {last - serving:.1f} s after it served"
            self.say(f"    the copy of {clone.original} was refused and stopped after {ran:.1f} s{after}")
            shutil.rmtree(clone.base, ignore_errors=True)
            return
        self.say(f"    {self.problems[-1]}")

    def stop_all(self) -> None:
        """Stop any copy still running (the run's cleanup)."""
        for clone in self._running:
            if clone.proc.is_running():
                clone.proc.kill()
        self._running = []

    def summary(self) -> str | None:
        """The verdict's line, or None when no copy was started."""
        if not self.started:
            return None
        return f"clones: {self.started} started, {self.refused} refused and stopped"


def _logged_at(line: str) -> float | None:
    """The time.time() of a log line that starts with its ``asctime``, or None."""
    try:
        return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def _role(port: int) -> str:
    """ ", serving as MASTER at masterEpoch 3" (what the copy's ``/v1/status`` says), or ""."""
    try:
        with urllib.request.urlopen(f"http://{LOCALHOST}:{port}/v1/status", timeout=2.0) as answer:
            status = json.loads(answer.read())
    except (OSError, ValueError):
        return ""
    if status.get("fenced"):
        return ", fenced"
    return f", serving as {status.get('role')} at masterEpoch {status.get('masterEpoch')}"


def _copy_if_present(source: str, target: str) -> None:
    """A live store changes while it is copied: a file gone meanwhile (a spare segment renamed, a
    temp file) is skipped."""
    with contextlib.suppress(FileNotFoundError):
        shutil.copy2(source, target)
