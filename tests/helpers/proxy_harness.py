"""Running mqproxy and the official RocketMQ 5 clients from tests: proxies, producer and consumer
subprocesses (the scripts in ``tests/integration/rocketmq_clients``), their JSON-line output, and the
group's log read back with mqha's own client."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mqha.client import Consumer, Message
from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ManagedProcess, ProcessGroup, free_port
from tests.helpers.rocketmq_client import SCRIPTS

GROUP = "broker-a"
QUEUES = 4


def secure_cluster(run_dir: Path, controllers: int) -> Iterator[LocalCluster]:
    """A module fixture's body: a cluster with authentication on (one group of one broker), ready;
    checks every process stopped at the end."""
    with LocalCluster(run_dir, controllers=controllers, groups=1, replicas=1, secure=True) as local:
        local.wait_ready(90)
        yield local
    assert local.running_pids() == []


def start_proxy(
    group: ProcessGroup, cluster: LocalCluster, run_dir: Path, settings: str = "", *, queues: int = QUEUES
) -> tuple[ManagedProcess, str]:
    """An mqproxy in front of the cluster, listening; the process and its access point. ``settings``:
    more ``key=value`` lines of its config; ``queues``: an auto-created topic's queues per group."""
    return start_proxy_for(group, ";".join(cluster.controller_addresses), run_dir, settings, queues=queues)


def start_proxy_for(
    group: ProcessGroup, controller_addr: str, run_dir: Path, settings: str = "", *, queues: int = QUEUES
) -> tuple[ManagedProcess, str]:
    """:func:`start_proxy` for the controllers of ``controller_addr`` (``host:port;...``)."""
    port = free_port()
    conf = run_dir / f"proxy-{port}.conf"
    conf.write_text(
        f"grpcServerPort={port}\ngrpcBindAddress=127.0.0.1\n"
        f"controllerAddr={controller_addr}\ndefaultTopicQueueNums={queues}\n" + settings
    )
    process = group.start(
        [sys.executable, "-m", "mqha.proxy", "-c", str(conf)], log_path=run_dir / f"mqproxy-{port}.log"
    )
    process.wait_tcp("127.0.0.1", port, timeout=30)
    return process, f"127.0.0.1:{port}"


def start_producer(
    group: ProcessGroup,
    client: Path,
    access_point: str,
    topic: str,
    *,
    count: int,
    run_dir: Path,
    interval: float = 0,
    credentials: tuple[str, str] | None = None,
    name: str = "",
    env: dict[str, str] | None = None,
) -> ManagedProcess:
    """The official Python producer; ``credentials``: its (access key, secret key); ``env``: more of
    its environment."""
    return group.start(
        [str(client), str(SCRIPTS / "python_producer.py"), access_point, topic, str(count), str(interval)],
        log_path=run_dir / f"producer-{topic}{name}.out",
        # the client writes its own log under ~/logs/rocketmq_python
        env={"HOME": str(run_dir), **client_env(credentials), **(env or {})},
    )


def client_env(credentials: tuple[str, str] | None) -> dict[str, str]:
    """The environment that makes the client scripts sign with ``credentials`` (None: unsigned)."""
    if credentials is None:
        return {}
    return {"MQ_ACCESS_KEY": credentials[0], "MQ_SECRET_KEY": credentials[1]}


def lines(process: ManagedProcess) -> list[dict[str, Any]]:
    """The JSON lines the producer script printed so far."""
    assert process.log_path is not None
    out = []
    for raw in process.log_path.read_text(errors="replace").splitlines():
        if raw.startswith("{"):
            try:
                out.append(json.loads(raw))
            except ValueError:
                continue
    return out


def wait_done(process: ManagedProcess, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while process.is_running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process.is_running(), f"the producer did not finish within {timeout} s\n{process.log_tail()}"
    done = [line for line in lines(process) if line.get("done")]
    assert done, f"the producer ended without its summary\n{process.log_tail()}"
    return done[-1]


def consume(
    client: Path,
    mode: str,
    access_point: str,
    topic: str,
    *,
    group: str,
    expected: int,
    run_dir: Path,
    pause: float = 0.0,
    credentials: tuple[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Run the official client's SimpleConsumer or PushConsumer until ``expected`` distinct bodies came
    (``pause``: seconds the SimpleConsumer waits after each batch); the messages it consumed (with
    duplicates)."""
    with ProcessGroup() as processes:
        consumer = processes.start(
            [
                str(client),
                str(SCRIPTS / "python_consumer.py"),
                mode,
                access_point,
                topic,
                group,
                str(expected),
                "120",
                str(pause),
            ],
            log_path=run_dir / f"consumer-{mode}-{group}.out",
            env={"HOME": str(run_dir), **client_env(credentials)},
        )
        summary = wait_done(consumer, timeout=180)
        got = [line for line in lines(consumer) if "body" in line]
    assert summary["distinct"] >= expected, consumer.log_tail()
    return got


def read_topic(cluster: LocalCluster, topic: str, at_least: int, timeout: float = 60) -> list[Message]:
    """Every message of ``topic`` in the group's log (up to the confirm offset), read with mqha's client."""

    async def scenario() -> list[Message]:
        found: list[Message] = []
        deadline = time.monotonic() + timeout
        async with Consumer(cluster.controller_addresses, GROUP, offset=0) as consumer:
            while time.monotonic() < deadline:
                batch = await consumer.read_until(1024, timeout=2)
                found += [m for m in batch if m.topic == topic]
                if len(found) >= at_least and not batch:
                    break
        return found

    return asyncio.run(scenario())


def connections_to(port: int) -> int:
    """Established TCP connections to 127.0.0.1:``port`` on this host (Linux /proc/net; gRPC's sockets
    are IPv6 ones with v4-mapped addresses)."""
    count = 0
    for table in ("tcp", "tcp6"):
        for raw in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = raw.split()
            host, _, hex_port = fields[2].partition(":")
            if fields[3] == "01" and int(hex_port, 16) == port and host.endswith("0100007F"):
                count += 1
    return count
