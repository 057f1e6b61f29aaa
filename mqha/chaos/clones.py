"""The ``clone`` fault of a chaos run: a replica started from a copy of another's store (shell: files
and processes).

The copy (commit log, epochs, checkpoints, identity and store id; not the history, which is the
original's record and would be counted twice by the analysis) goes to ``<run_dir>/clones/<node>-<k>``
and starts as an ``mqbroker`` with the original's config but its own ports: it claims the original's
broker id from another address. The controllers must refuse it, and it must stop on its own with one
line (docs/architecture.md §3.2). At the heal a copy still running is stopped (by pid) and named as
the run's failure; a refused copy's directory is removed (its line is kept in ``problems`` only when
it was not refused).
"""

from __future__ import annotations

import contextlib
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

REFUSED_WITHIN = 30.0  # seconds from the copy's start to its own exit (retries for a heartbeat timeout)
NOT_COPIED = ("history.db*", "*.pid", "lock")
REFUSAL_MARK = "another live process"
"""What the refused broker's last line says (``mqha.controller.broker_claims``)."""


@dataclass
class Clone:
    """One copy of a store, started as a broker."""

    original: str
    base: Path
    proc: NodeProcess
    started_at: float
    port: int

    @property
    def log(self) -> Path:
        return self.base / "broker.log"

    def last_line(self) -> str:
        lines = [
            line for line in self.log.read_text(errors="replace").splitlines() if line.startswith("mqbroker:")
        ]
        return lines[-1] if lines else ""


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
        self._running.append(Clone(node, base, proc, time.monotonic(), port))
        self.say(f"    copy of {node}'s store started as pid {proc.pid} on port {port}")

    def heal(self) -> None:
        """Wait (bounded) for each running copy to stop on its own; stop the ones that do not."""
        for clone in self._running:
            deadline = clone.started_at + REFUSED_WITHIN
            while clone.proc.is_running() and time.monotonic() < deadline:
                time.sleep(0.1)
            self._judge(clone)
        self._running = []

    def _judge(self, clone: Clone) -> None:
        ran = time.monotonic() - clone.started_at
        if clone.proc.is_running():
            role = _role(clone.port)
            clone.proc.kill()
            self.problems.append(
                f"a copy of {clone.original}'s store ran {ran:.0f} s without being refused{role} "
                f"(log: {clone.log})"
            )
        elif REFUSAL_MARK not in clone.last_line():
            self.problems.append(
                f"a copy of {clone.original}'s store stopped (exit {clone.proc.returncode()}) without a "
                f"refusal: {clone.last_line() or 'no line'} (log: {clone.log})"
            )
        else:
            self.refused += 1
            self.say(f"    the copy of {clone.original} was refused and stopped after {ran:.1f} s")
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
