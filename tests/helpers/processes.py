"""Real-process helpers for integration tests and benchmarks (127.0.0.1 only).

- :func:`free_port` / :func:`free_ports`: ports nobody in this test process was handed before.
- :class:`ManagedProcess`: start a command with env and a log file; wait for a TCP port or an HTTP
  ``/healthz``; stop (SIGTERM, then SIGKILL after a bound), kill -9, SIGSTOP/SIGCONT. Every signal goes
  to the child's pid only, and every stop reaps the child.
- :class:`ProcessGroup`: stops every process it started, in a ``finally`` (``with ProcessGroup() as g``).
- :func:`wait_until`, :func:`http_json`: bounded polling and a tiny JSON-over-HTTP client.

Every wait takes a timeout; nothing here loops without a bound.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mqha.cluster.nodes import http_json
from mqha.cluster.processes import LOCALHOST, NodeProcess, handed_out, pick_port, stop_all

T = TypeVar("T")


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that was free a moment ago and was not handed out before by this process (the set
    ``mqha.cluster.processes`` keeps, so a test's ports and a local cluster's never collide); on
    127.0.0.1 below the kernel's ephemeral range (``pick_port``)."""
    if host == LOCALHOST:
        return pick_port()
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in handed_out:
            handed_out.add(port)
            return port
    raise RuntimeError("no fresh free port after 100 tries")


def free_ports(count: int, host: str = LOCALHOST) -> list[int]:
    return [free_port(host) for _ in range(count)]


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    interval: float = 0.02,
    message: str = "condition",
) -> T:
    """Poll ``predicate`` until it returns something truthy (returned) or ``timeout`` passes.

    Exceptions from the predicate count as "not yet"; the last one is chained into the TimeoutError.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:
            last_exc = exc
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{message} not met within {timeout:g} s") from last_exc
        time.sleep(interval)


def tcp_port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class ManagedProcess(NodeProcess):
    """A test's child process: ``mqha.cluster``'s :class:`NodeProcess` (signalled by pid only, always
    reaped) plus a name, its log and waits for a TCP port or an HTTP answer."""

    def __init__(self, pid: int, start_time: int | None, popen: subprocess.Popen[bytes] | None = None):
        super().__init__(pid, start_time, popen)
        self.name = str(pid)
        self.log_path: Path | None = None

    @classmethod
    def start(
        cls,
        args: Sequence[str],
        *,
        log_path: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
    ) -> ManagedProcess:
        """Start ``args``; stdout and stderr go (appended) to ``log_path``, else to /dev/null.

        ``env`` adds to (does not replace) this process's environment; output is unbuffered.
        """
        path = Path(log_path) if log_path is not None else None
        proc = cls.spawn(args, path, env=env, cwd=cwd)
        proc.name = name or os.path.basename(args[0])
        proc.log_path = path
        return proc

    @classmethod
    def start_python(cls, script_args: Sequence[str], **kwargs: Any) -> ManagedProcess:
        """Start ``python <script_args>`` with this interpreter."""
        return cls.start([sys.executable, *script_args], **kwargs)

    def _check_running(self, what: str) -> None:
        if not self.is_running():
            raise RuntimeError(
                f"{self.name} (pid {self.pid}) exited with {self.returncode} while waiting for {what}\n"
                f"{self.log_tail()}"
            )

    def wait_tcp(self, host: str, port: int, timeout: float = 10.0) -> None:
        def ready() -> bool:
            self._check_running(f"{host}:{port}")
            return tcp_port_open(host, port)

        _wait_fail_fast(ready, timeout, f"{self.name} listening on {host}:{port}", self)

    def wait_http(self, url: str, timeout: float = 10.0, status: int = 200) -> None:
        """Wait until GET ``url`` (e.g. ``http://127.0.0.1:P/healthz``) answers ``status``."""

        def ready() -> bool:
            self._check_running(url)
            try:
                return http_json("GET", url, timeout=1.0)[0] == status
            except OSError:
                return False

        _wait_fail_fast(ready, timeout, f"{self.name} answering {url}", self)

    def kill(self, timeout: float = 5.0) -> int | None:  # type: ignore[override]
        """kill -9 and reap; the exit status."""
        super().kill(timeout)
        return self.returncode

    def stop(self, timeout: float = 5.0) -> int | None:  # type: ignore[override]
        """SIGTERM (after SIGCONT if paused); SIGKILL if still alive after ``timeout``; the exit status."""
        super().stop(timeout)
        return self.returncode

    def log_tail(self, max_bytes: int = 4000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        data = self.log_path.read_bytes()[-max_bytes:]
        return f"--- last {len(data)} bytes of {self.log_path} ---\n" + data.decode(errors="replace")

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def wait_healthy(started: Sequence[tuple[ManagedProcess | None, str]], timeout: float = 20.0) -> None:
    """Wait for each (process, base URL)'s ``/healthz``; start them all first, so they boot in parallel."""
    for proc, url in started:
        assert proc is not None, url
        proc.wait_http(url + "/healthz", timeout=timeout)


def _wait_fail_fast(ready: Callable[[], bool], timeout: float, what: str, proc: ManagedProcess) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if ready():  # raises at once when the process died
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not within {timeout:g} s\n{proc.log_tail()}")
        time.sleep(0.02)


class ProcessGroup:
    """Processes started through it are all stopped when it closes (also on test failure)."""

    def __init__(self) -> None:
        self.processes: list[ManagedProcess] = []

    def start(self, args: Sequence[str], **kwargs: Any) -> ManagedProcess:
        proc = ManagedProcess.start(args, **kwargs)
        self.processes.append(proc)
        return proc

    def start_python(self, script_args: Sequence[str], **kwargs: Any) -> ManagedProcess:
        return self.start([sys.executable, *script_args], **kwargs)

    def stop_all(self, timeout: float = 5.0) -> None:
        """SIGTERM to everyone first so they shut down in parallel, then reap each (SIGKILL the late)."""
        stop_all(self.processes, timeout)

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_all()
