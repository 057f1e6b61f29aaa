"""Child processes of a local cluster, signalled by pid only (shell).

A :class:`NodeProcess` is either a child this Python process started (a ``Popen`` it reaps) or a pid
read back from a run directory (``mqha cluster down`` in a later shell). Before any signal the pid's
start time (``/proc/<pid>/stat`` field 22) is compared with the one recorded at start, so a pid the
kernel has since reused for somebody else's process is never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

LOCALHOST = "127.0.0.1"
_PR_SET_PDEATHSIG = 1
handed_out: set[int] = set()  # ports given out by this process (launchers and tests): never twice


def proc_start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[0]


def port_free(port: int) -> bool:
    """Nothing listens on 127.0.0.1:``port`` (a bind succeeds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As the nodes bind: a port left in TIME-WAIT by a node that just stopped is free to them.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOCALHOST, port))
        except OSError:
            return False
    return True


LISTEN_PORTS = (10000, 32000)
"""Where listening ports are picked: below the kernel's ephemeral range (``ip_local_port_range``,
32768-60999 by default). A port the kernel handed out for ``bind(0)`` is in that range, so any
outgoing connection may take it after its listener died, and a restarted node could not listen
again ("address already in use" for ~20 s, seen in the demo and in chaos runs)."""


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as file:
            return int(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def pick_port(count: int = 1) -> int:
    """A free port ``p`` (with ``p + 1 .. p + count - 1`` free too) below the ephemeral range, never
    handed out before by this process."""
    low, high = LISTEN_PORTS[0], min(LISTEN_PORTS[1], _ephemeral_start()) - count
    for _ in range(500):
        port = random.randint(low, high)
        span = set(range(port, port + count))
        if not span & handed_out and all(port_free(p) for p in span):
            handed_out.update(span)
            return port
    raise RuntimeError(f"no {count} free adjacent port(s) on 127.0.0.1 in {low}..{high} after 500 tries")


def free_port_pair() -> int:
    """A free port ``p`` with ``p + 1`` free too (controller API + Raft, broker API + HA)."""
    return pick_port(2)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # If the launcher is killed (kill -9 of the demo or of pytest), its children get SIGTERM.
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class NodeProcess:
    """One node's process: start, signal, stop (SIGTERM, then SIGKILL after a bound), reap."""

    def __init__(self, pid: int, start_time: int | None, popen: subprocess.Popen[bytes] | None = None):
        self.pid = pid
        self.start_time = start_time
        self._popen = popen
        self.paused = False

    @classmethod
    def spawn(
        cls,
        args: Sequence[str],
        log_path: Path | None,
        *,
        env: Mapping[str, str] | None = None,
        die_with_parent: bool = False,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Self:
        """Start ``args`` in its own session (a terminal's Ctrl-C reaches only the launcher, which
        then stops its children in order), output appended to ``log_path`` (None: discarded)."""
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
        # PDEATHSIG fires when the *thread* that forked exits: only safe from the main thread.
        pdeathsig = die_with_parent and threading.current_thread() is threading.main_thread()
        with open(log_path, "ab") if log_path is not None else open(os.devnull, "wb") as out:
            popen = subprocess.Popen(
                list(args),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent if pdeathsig else None,  # noqa: PLW1509 - prctl only
            )
        return cls(popen.pid, proc_start_time(popen.pid), popen)

    @classmethod
    def from_pid_file(cls, path: Path, command_mentions: str) -> Self | None:
        """The running process a node's pid file names, when its command line mentions
        ``command_mentions`` (the node's config file: a reused pid is somebody else's); else None."""
        try:
            pid = int(path.read_text(encoding="ascii").strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return None
        if command_mentions.encode() not in cmdline:
            return None
        proc = cls(pid, proc_start_time(pid))
        return proc if proc.is_running() else None

    def is_running(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        state = _proc_state(self.pid)
        return state is not None and state not in ("Z", "X") and self._same_process()

    def _same_process(self) -> bool:
        return self.start_time is None or proc_start_time(self.pid) == self.start_time

    @property
    def returncode(self) -> int | None:
        return self._popen.poll() if self._popen is not None else None

    def send(self, sig: signal.Signals) -> bool:
        """Signal this pid if it is still our process; False when it is gone."""
        if not self.is_running():
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)
            return True
        return False

    def wait_gone(self, timeout: float) -> bool:
        """Wait (bounded) until the process has exited; reaps it when it is our child."""
        deadline = time.monotonic() + timeout
        if self._popen is not None:
            try:
                self._popen.wait(max(0.0, timeout))
            except subprocess.TimeoutExpired:
                return False
            return True
        while self.is_running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def pause(self) -> None:
        """SIGSTOP: frozen with its sockets open (a hang, or a silent partition)."""
        self.paused = self.send(signal.SIGSTOP) or self.paused

    def resume(self) -> None:
        self.send(signal.SIGCONT)
        self.paused = False

    def kill(self, timeout: float = 5.0) -> None:
        """kill -9 and wait until gone (reaped)."""
        self.send(signal.SIGKILL)
        self.paused = False
        self.wait_gone(timeout)

    def terminate(self) -> None:
        """SIGCONT (a stopped process cannot handle SIGTERM) then SIGTERM; does not wait."""
        if self.paused:
            self.resume()
        self.send(signal.SIGTERM)

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM; SIGKILL if still alive after ``timeout``; always waited for."""
        self.terminate()
        if not self.wait_gone(timeout):
            self.kill()


def stop_all(processes: Sequence[NodeProcess], timeout: float = 5.0) -> None:
    """SIGTERM to all first (they shut down in parallel), then wait for each; SIGKILL the late ones."""
    for proc in processes:
        proc.terminate()
    deadline = time.monotonic() + timeout
    for proc in processes:
        if not proc.wait_gone(max(0.0, deadline - time.monotonic())):
            proc.kill()


def session_members(sid: int) -> list[int]:
    """Pids (other than ours) whose session id is ``sid``: what a child started with
    ``start_new_session`` left behind (e.g. a JVM under a PySpark driver)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def kill_session(sid: int) -> list[int]:
    """SIGKILL every live process of session ``sid`` (pids listed first, then signalled one by one)."""
    killed = []
    for pid in session_members(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed
