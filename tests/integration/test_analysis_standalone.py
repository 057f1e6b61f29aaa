"""``mqha analyze --master spark://HOST:PORT`` on a real Spark standalone cluster (issue 28).

A standalone master and two workers (one core, 1 GiB each) run on 127.0.0.1 from pyspark's own jars
(``java -cp <pyspark>/jars/* org.apache.spark.deploy.master.Master`` / ``...worker.Worker``: the JVM is
the process we start and stop by pid, no launcher script in between). The same export -- every
hand-made history at once, so every invariant is violated somewhere -- is analysed on ``local[2]`` and
on the cluster; the verdicts must be identical. Behind the ``bench`` marker (three extra JVMs on a
small machine take a while); the time on the cluster is printed.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.analysis.export import write_tables
from mqha.analysis.report import VERDICT_FILE
from mqha.cli import main as mqha_main
from mqha.cluster.nodes import http_json
from tests.helpers.processes import ProcessGroup, free_ports, wait_until
from tests.unit.analysis import histories as h

pytestmark = [
    pytest.mark.integration,
    pytest.mark.bench,
    pytest.mark.skipif(shutil.which("java") is None, reason="no java for a Spark standalone cluster"),
]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _scala_version(home: Path) -> str:
    """``2.13`` from ``jars/scala-library-2.13.x.jar``."""
    (jar,) = home.glob("jars/scala-library-*.jar")
    return ".".join(jar.name.removeprefix("scala-library-").split(".")[:2])


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with two registered workers."""
    home = _spark_home()
    java = ["java", "-Xmx256m", "-cp", f"{home / 'jars'}/*"]
    # SPARK_SCALA_VERSION: the worker launches executors through Spark's launcher, which otherwise looks
    # for a source build's directories (pyspark's jars are a release layout).
    env = {
        "SPARK_HOME": str(home),
        "SPARK_SCALA_VERSION": _scala_version(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    port, ui, *worker_uis = free_ports(4)
    url = f"spark://127.0.0.1:{port}"
    with ProcessGroup() as group:
        group.start(
            [
                *java,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            env=env,
            log_path=tmp_path / "master.log",
            name="spark-master",
        ).wait_tcp("127.0.0.1", port, timeout=60)
        for k, worker_ui in enumerate(worker_uis):
            group.start(
                [
                    *java,
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(worker_ui),
                    "--work-dir",
                    str(tmp_path / f"work{k}"),
                    url,
                ],
                env=env,
                log_path=tmp_path / f"worker{k}.log",
                name=f"spark-worker{k}",
            )

        def alive() -> bool:
            status, doc = http_json("GET", f"http://127.0.0.1:{ui}/json/", timeout=2.0)
            return status == 200 and int(doc.get("aliveworkers", 0)) == 2

        wait_until(alive, 90, interval=0.5, message="two Spark workers registered")
        yield url


def _verdict(directory: Path) -> dict[str, Any]:
    doc = json.loads((directory / VERDICT_FILE).read_text())
    doc.pop("engine")
    return doc


def test_standalone_cluster_gives_the_same_verdict_as_local(
    standalone: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQHA_SPARK_DRIVER_MEMORY", "1g")
    export = write_tables(tmp_path / "export", h.combined())
    assert (
        mqha_main(["analyze", str(export), "--master", "local[2]", "--report-dir", str(tmp_path / "local")])
        == 1
    )
    started = time.monotonic()
    code = mqha_main(
        ["analyze", str(export), "--master", standalone, "--report-dir", str(tmp_path / "cluster")]
    )
    seconds = time.monotonic() - started
    assert code == 1
    local, cluster = _verdict(tmp_path / "local"), _verdict(tmp_path / "cluster")
    assert cluster == local
    assert cluster["status"] == "violated" and len(cluster["failed"]) == 7
    print(f"\nmqha analyze on a standalone cluster (1 master, 2 workers x 1 core): {seconds:.1f} s")
