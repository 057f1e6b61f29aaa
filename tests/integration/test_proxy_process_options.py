"""Process options of a real mqproxy, none of which needs the controllers up:

* ``proxyCpuAffinity``: every thread of the process, gRPC's C threads included, runs on the CPU the
  key names, after the server has answered calls;
* ``metricsExporterType=PROM`` on a port already taken: the proxy stops with one line naming
  ``metricsPromExporterPort``, exit 1.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from mqha.affinity import parse_cpu_list
from tests.helpers.processes import ProcessGroup, free_port

pytestmark = pytest.mark.integration


def thread_cpus(pid: int) -> dict[str, frozenset[int]]:
    """Each thread's name and id, and the CPUs it may run on."""
    out = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{task}/comm").read_text().strip()
            status = Path(f"/proc/{pid}/task/{task}/status").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        allowed = next(line for line in status.splitlines() if line.startswith("Cpus_allowed_list:"))
        out[f"{name}/{task}"] = parse_cpu_list(allowed.partition(":")[2])
    return out


def test_every_thread_of_the_proxy_runs_on_the_named_cpu(tmp_path: Path) -> None:
    from mqha.proxy.v2 import service as s
    from mqha.proxy.v2 import service_grpc

    cpu = max(os.sched_getaffinity(0))
    port = free_port()
    conf = tmp_path / "proxy.conf"
    conf.write_text(
        f"grpcServerPort={port}\ngrpcBindAddress=127.0.0.1\ncontrollerAddr=127.0.0.1:{free_port()}\n"
        f"proxyCpuAffinity={cpu}\n"
    )
    with ProcessGroup() as group:
        proxy = group.start(
            [sys.executable, "-m", "mqha.proxy", "-c", str(conf)], log_path=tmp_path / "proxy.log"
        )
        proxy.wait_tcp("127.0.0.1", port, timeout=30)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            for _ in range(20):
                stub.Heartbeat(s.HeartbeatRequest(), timeout=10)
        threads = thread_cpus(proxy.pid)
    assert len(threads) > 2, threads  # the event loop's and gRPC's
    assert {name: cpus for name, cpus in threads.items() if cpus != {cpu}} == {}


def test_an_exporter_port_already_taken_is_one_line_naming_the_key(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = tmp_path / "proxy.conf"
        conf.write_text(
            f"grpcServerPort={free_port()}\ngrpcBindAddress=127.0.0.1\ncontrollerAddr=127.0.0.1:{free_port()}\n"
            f"metricsExporterType=PROM\nmetricsPromExporterPort={port}\n"
        )
        done = subprocess.run(
            [sys.executable, "-m", "mqha.proxy", "-c", str(conf)],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("mqproxy: config key 'metricsPromExporterPort': cannot listen on 127.0.0.1:"), last
