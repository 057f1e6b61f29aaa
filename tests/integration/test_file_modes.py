"""Issue 45 item 9 with real processes: data and secret files are owner-only.

``mqha cluster up`` (1 controller, one group of 2 replicas, authentication on: generated secrets), a few
acknowledged puts so that segments exist on both replicas, then every file under each node's store
(segments, commit-log checkpoint, confirm-offset checkpoint, epoch files, broker identity,
``history.db`` and its WAL files, ``raft.journal`` and ``.meta``, ``storage.json``, pid files), each
node's config and ``cluster.json`` must be 0600 at most, and every directory of the run 0700 at most.
Before the fix segments, ``history.db``, ``raft.journal``, identity files and the directories were
world-readable (docs/architecture.md §12.9).
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqha.cluster.client_auth import client_headers
from tests.helpers.processes import wait_until
from tests.integration.controller_cluster import request

pytestmark = pytest.mark.integration


def mqha(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqha", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def loose(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o077 != 0


def test_data_and_secret_files_are_owner_only_after_a_cluster_start(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    try:
        up = mqha(
            "cluster", "up", "--dir", str(run_dir), "--controllers", "1", "--groups", "1", "--replicas", "2"
        )
        assert up.returncode == 0, up.stdout + up.stderr
        state = json.loads((run_dir / "cluster.json").read_text())
        brokers = [n for n in state["nodes"] if n["kind"] == "broker"]
        headers = client_headers(state["brokerSettings"])
        ends = []
        for broker in brokers:  # the master takes the puts; a slave answers 503 (or a redirect)
            code, reply = request(
                "POST",
                f"http://127.0.0.1:{broker['port']}/v1/messages",
                {"messages": [{"topic": "modes", "body": f"m{i}"} for i in range(20)]},
                headers=headers,
                timeout=10,
            )
            if code == 200:
                ends.append(max(r["offset"] + r["size"] for r in reply["results"]))
        assert ends, "no broker took the puts"

        def replicated() -> bool:
            segments = [p for b in brokers for p in (Path(b["base"]) / "store" / "commitlog").glob("0" * 20)]
            return len(segments) == len(brokers)

        wait_until(replicated, 30, message="a segment on every replica")
        time.sleep(0.5)  # the slave's epoch file and checkpoint follow its first batch

        files = [
            p for node in state["nodes"] for p in (Path(node["base"]) / "store").rglob("*") if p.is_file()
        ]
        names = {p.name for p in files}
        for expected in (
            "00000000000000000000",
            "checkpoint",
            "confirmOffsetCheckpoint",
            "epochFileCheckpoint",
            "brokerIdentity",
            "history.db",
            "raft.journal",
            "raft.journal.meta",
            "storage.json",
        ):
            assert expected in names, (expected, sorted(names))
        files += [Path(node["base"]) / f"{node['kind']}.conf" for node in state["nodes"]]
        files.append(run_dir / "cluster.json")
        assert [str(p) for p in files if loose(p)] == []
        directories = [run_dir, *(p for p in run_dir.rglob("*") if p.is_dir())]
        assert [str(p) for p in directories if loose(p)] == []
    finally:
        if (run_dir / "cluster.json").exists():
            mqha("cluster", "down", "--dir", str(run_dir))
