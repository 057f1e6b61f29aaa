"""The end of a recorded run (shell): final logs, ``mqha export``, ``mqha analyze`` -- for the demo and chaos.

1. ``dump_final_logs`` reads every live replica's log through its API into a staging database (for
   brokers that do not record their own ``final_logs``), before the cluster stops;
2. after the stop, ``adopt_final_log_dump`` names the staging database ``history.db`` (so ``mqha
   export`` sees it) only if no broker wrote ``final_logs`` itself;
3. ``export_and_analyze`` runs ``mqha export`` and ``mqha analyze`` as child processes in their own
   session (a Spark JVM goes with them when they are stopped) and reads the analyzer's verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqha.cluster.client_auth import client_headers
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import Node
from mqha.cluster.processes import kill_session
from mqha.wire.broker_api import OFFSET_TOO_SMALL


def read_replica_log(
    node: Node, timeout: float = 5.0, headers: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every message a replica serves (up to its confirm offset, from its log start: retention may have
    deleted the front, docs/architecture.md §4.2), as ``final_logs`` columns.
    ``headers``: e.g. the brokers' user (``mqha.cluster.client_auth.client_headers``)."""
    rows, offset = [], 0
    while True:
        url = f"{node.url}/v1/messages?offset={offset}&maxMessages=1024"
        request = urllib.request.Request(url, headers=dict(headers or {}))
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.loads(response.read())
        for m in body["messages"]:
            data = m["body"].encode() if m.get("body") is not None else b""
            crc = zlib.crc32(data)
            rows.append({"offset": m["offset"], "size": m["size"], "msgId": m["msgId"], "crc": crc})
        moved = body.get("status") == OFFSET_TOO_SMALL and body["nextOffset"] > offset
        if not body["messages"] and not moved:  # the end (retention's log start only moves us on)
            return rows
        offset = body["nextOffset"]


def dump_final_logs(
    cluster: LocalCluster, database: Path, groups: Iterable[str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Write every live replica's log (read through its API) of ``groups`` (default: all) as
    ``final_logs`` rows into ``database``. Returns the rows by node name."""
    from mqha.history.recorder import BrokerHistory, HistoryRecorder

    dumped: dict[str, list[dict[str, Any]]] = {}
    headers = client_headers(cluster.broker_settings)
    with HistoryRecorder(database) as recorder:
        for group in groups or cluster.groups:
            for node in cluster.group_brokers(group):
                found = _read_when_readable(cluster, node, headers)
                if found is None:
                    continue
                status, rows = found
                history = BrokerHistory(
                    recorder, f"{node.name} (read API)", group, int(status["controllerBrokerId"])
                )
                history.final_log(rows)
                dumped[node.name] = rows
    return dumped


def _readable_status(cluster: LocalCluster, node: Node, wait: float = 15.0) -> dict[str, Any] | None:
    """``node``'s status once it serves reads (a slave serves none until its log is verified against
    its master, docs/architecture.md §4), waiting up to ``wait`` s; None if it is down or still not
    serving (its log is then left out, as a down replica's is)."""
    deadline = time.monotonic() + wait
    while True:
        status = cluster.broker_status(node)
        if status is None or status.get("readRefusal") is None:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)


def _read_when_readable(
    cluster: LocalCluster, node: Node, headers: Mapping[str, str], attempts: int = 3
) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """``node``'s status and log once it serves reads; None if it is down or never serves. A replica
    can stop serving between its status and the read (an election fences it for a moment: a loaded
    machine may miss a heartbeat timeout after the run): it is asked again."""
    for _ in range(attempts):
        status = _readable_status(cluster, node)
        if status is None or status.get("controllerBrokerId") is None:
            return None
        try:
            return status, read_replica_log(node, headers=headers)
        except urllib.error.HTTPError as exc:
            if exc.code != 503:
                raise
    return None


def brokers_record_final_logs(cluster: LocalCluster) -> bool:
    """Whether any broker wrote ``final_logs`` rows into its own history database."""
    for broker in cluster.brokers:
        path = broker.store / "history.db"
        if not path.exists():
            continue
        with (
            contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db,
            contextlib.suppress(sqlite3.Error),
        ):
            if db.execute("SELECT 1 FROM final_logs LIMIT 1").fetchone():
                return True
    return False


def adopt_final_log_dump(cluster: LocalCluster, staging: Path) -> bool:
    """After the cluster stopped: make ``staging`` an exported ``history.db`` unless the brokers
    recorded their own final logs. True when the dump is used."""
    if brokers_record_final_logs(cluster):
        return False
    for suffix in ("", "-wal", "-shm"):  # a WAL database may leave sidecar files
        part = staging.with_name(staging.name + suffix)
        if part.exists():
            part.rename(staging.with_name("history.db" + suffix))
    return True


def mqha_command() -> list[str]:
    script = Path(sys.executable).with_name("mqha")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mqha"]


class ToolChild:
    """A tool subprocess in its own session; stopping it also kills what it spawned (Spark's JVM)."""

    def __init__(self) -> None:
        self.popen: subprocess.Popen[str] | None = None

    def run(self, args: list[str], timeout: float) -> tuple[int, str]:
        self.popen = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        try:
            out, _ = self.popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            return 124, f"timed out after {timeout:g} s"
        code = self.popen.returncode
        kill_session(self.popen.pid)  # anything it left behind in its session
        self.popen = None
        return code, out

    def stop(self) -> None:
        popen = self.popen
        if popen is None:
            return
        if popen.poll() is None:
            popen.terminate()
            try:
                popen.wait(5)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(5)
        kill_session(popen.pid)
        self.popen = None


PYTHON_ENGINE = "python"  # ``mqha analyze --engine python``: no JVM, the fallback of ``auto``


def analysis_engine(choice: str) -> str | None:
    """``auto`` -> spark when a JVM and PySpark are present, else python; ``off`` -> None."""
    if choice == "off":
        return None
    if choice == "auto":
        has_java = shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))
        try:
            import pyspark  # noqa: F401
        except ImportError:
            has_java = False
        return "spark" if has_java else PYTHON_ENGINE
    return choice


_EVIDENCE_PREFIX = " " * 6


def analysis_lines(text: str) -> list[str]:
    """The analyzer's verdict and one line per invariant (no JVM chatter, no evidence rows)."""
    lines = text.strip().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("mqha analyze")), 0)
    kept = [line for line in lines[start:] if line.startswith(("mqha analyze", "tables:", "  "))]
    return [line for line in kept if not line.startswith(_EVIDENCE_PREFIX)][:14]


@dataclass
class CheckResult:
    """What export + analyze gave. ``analyze_code`` is None when the analysis did not run."""

    export_code: int
    export_line: str
    export_dir: Path
    analyze_code: int | None = None
    lines: list[str] = field(default_factory=list)
    seconds: float = 0.0
    verdict: dict[str, Any] | None = None  # the analyzer's report/verdict.json
    engine: str | None = None  # the engine whose verdict this is
    fallback_reason: str = ""  # why the first engine's verdict was replaced, or ""

    @property
    def invariants(self) -> dict[str, int] | None:
        """Invariant name -> violation count, from the verdict file."""
        if self.verdict is None:
            return None
        return {name: int(check["count"]) for name, check in self.verdict["checks"].items()}


def export_and_analyze(
    run_dir: Path,
    engine: str | None,
    child: ToolChild,
    *,
    export_timeout: float = 120,
    analyze_timeout: float = 300,
    fallback: str | None = None,
) -> CheckResult:
    """``mqha export <run_dir> <run_dir>/export``, then (with an engine) ``mqha analyze``; when that
    gives no verdict (a Spark JVM timed out on a loaded machine) and ``fallback`` names another engine,
    the same export is analyzed with it."""
    export_dir = run_dir / "export"
    code, text = child.run([*mqha_command(), "export", str(run_dir), str(export_dir)], export_timeout)
    result = CheckResult(code, (text.strip().splitlines() or ["(no output)"])[-1], export_dir)
    if engine is None or code != 0:
        return result
    _analyze(result, engine, child, analyze_timeout)
    if result.verdict is None and fallback is not None and fallback != engine:
        result.fallback_reason = f"{engine} gave no verdict (exit {result.analyze_code})"
        _analyze(result, fallback, child, analyze_timeout)
    return result


def _analyze(result: CheckResult, engine: str, child: ToolChild, timeout: float) -> None:
    """Run ``mqha analyze`` on ``result``'s export with ``engine`` and fill in what it gave."""
    from mqha.history.schema import VERDICT_FILE

    t0 = time.monotonic()
    result.engine = engine
    result.analyze_code, text = child.run(
        [*mqha_command(), "analyze", str(result.export_dir), "--engine", engine], timeout
    )
    result.seconds = time.monotonic() - t0
    result.lines = analysis_lines(text)
    result.verdict = None
    with contextlib.suppress(OSError, ValueError):
        result.verdict = json.loads((result.export_dir / "report" / VERDICT_FILE).read_text())
