"""Benchmark (issue 46): what authentication and authorization cost on mqproxy's send path, in one run.

One cluster (1 controller, one broker) and two mqproxy processes in front of it, identical but for
``authenticationEnabled`` + ``authorizationEnabled``: the official Python client sends 1 KiB messages
in closed loops (1 and 16 senders) through each, the phases interleaved (OFF, ON, OFF, ON, ...) so
drift between minutes hits both alike. Through the checking proxy the client signs as a Normal ACL user
whose policy allows Pub on the topic (made with mqadmin), so every send is authenticated and decided.
Each row: messages/s, the proxy's CPU per message (utime + stime of the process; what the checks add,
and less sensitive than the rates to other load on a shared machine) and the ON/OFF ratios. Target:
ON loses at most 5 %. A second test times the checks alone in this process (µs per call).
``MQHA_AUTH_BENCH_SECONDS`` (default 8) and ``MQHA_AUTH_BENCH_ROUNDS`` (default 3).
Run: ``scripts/bench.sh tests/bench/test_proxy_auth_bench.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.bench.report import median
from mqha.bench.scale import CLK_TCK, cpu_ticks
from mqha.cluster.local import LocalCluster
from mqha.security.credentials import InnerCredentials, User, render_inner_credentials, render_user
from tests.helpers.processes import ProcessGroup
from tests.helpers.proxy_harness import client_env, start_proxy
from tests.helpers.rocketmq_client import SCRIPTS, client_python
from tests.integration.test_mqadmin import mqadmin

pytestmark = pytest.mark.bench

SECONDS = float(os.environ.get("MQHA_AUTH_BENCH_SECONDS", "8"))
ROUNDS = int(os.environ.get("MQHA_AUTH_BENCH_ROUNDS", "3"))
INNER = render_inner_credentials(InnerCredentials("bench-inner", "bench-inner-secret-0001"))
APP = ("benchapp", "bench-app-secret-01")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("auth-bench"),
        controllers=1,
        groups=1,
        replicas=1,
        controller_settings={"innerClientAuthenticationCredentials": INNER},
    ) as local:
        local.wait_ready(90)
        yield local


def run_client(
    client: Path, access: str, concurrency: int, credentials: tuple[str, str] | None
) -> dict[str, Any]:
    out = subprocess.run(
        [
            str(client),
            str(SCRIPTS / "python_bench.py"),
            access,
            "AuthBench",
            str(SECONDS),
            str(concurrency),
            "1024",
        ],
        capture_output=True,
        text=True,
        timeout=SECONDS + 120,
        check=True,
        env={**os.environ, **client_env(credentials)},
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def cpu_s(pid: int) -> float:
    return cpu_ticks(Path(f"/proc/{pid}/stat").read_text()) / CLK_TCK


def test_authentication_and_authorization_cost_on_the_send_path(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    client = client_python()
    controllers = ";".join(cluster.controller_addresses)
    for args in (
        ("createUser", "-u", APP[0], "-p", APP[1], "-t", "Normal"),
        ("createAcl", "-s", f"User:{APP[0]}", "-r", "Topic:AuthBench", "-a", "Pub", "-d", "Allow"),
    ):
        done = mqadmin(args[0], "-n", controllers, "-c", cluster.cluster_name, *args[1:])
        assert done.returncode == 0, done.stderr
    on = (
        "authenticationEnabled=true\nauthorizationEnabled=true\n"
        f"initAuthenticationUser={render_user(User('bench-super', 'bench-super-secret-01'))}\n"
        f"innerClientAuthenticationCredentials={INNER}\n"
    )
    rows = []
    with ProcessGroup() as group:
        plain_proc, plain = start_proxy(group, cluster, tmp_path)
        checked_proc, checked = start_proxy(group, cluster, tmp_path, on)
        for concurrency in (1, 16):
            rates: dict[str, list[float]] = {"off": [], "on": []}
            cpu_ms: dict[str, list[float]] = {"off": [], "on": []}
            for _ in range(ROUNDS):
                for name, proc, access, credentials in (
                    ("off", plain_proc, plain, None),
                    ("on", checked_proc, checked, APP),
                ):
                    before = cpu_s(proc.pid)
                    result = run_client(client, access, concurrency, credentials)
                    assert result["failed"] == 0, result
                    rates[name].append(result["sent"] / result["seconds"])
                    cpu_ms[name].append((cpu_s(proc.pid) - before) * 1000 / max(1, result["sent"]))
            ratios = [on_rate / off_rate for on_rate, off_rate in zip(rates["on"], rates["off"], strict=True)]
            rows.append((concurrency, rates, ratios, cpu_ms))
    print("\nmqproxy send path, official Python client, 1 KiB, auth off vs on (authn + authz), interleaved")
    for concurrency, rates, ratios, cpu_ms in rows:
        off = ", ".join(f"{r:.0f}" for r in rates["off"])
        on_ = ", ".join(f"{r:.0f}" for r in rates["on"])
        print(
            f"{concurrency:>2} senders: off {off} msg/s; on {on_} msg/s; on/off per round "
            f"{', '.join(f'{r:.3f}' for r in ratios)}; median {median(ratios):.3f}"
        )
        print(
            f"   mqproxy CPU ms/message: off {', '.join(f'{c:.3f}' for c in cpu_ms['off'])} "
            f"(median {median(cpu_ms['off']):.3f}); on {', '.join(f'{c:.3f}' for c in cpu_ms['on'])} "
            f"(median {median(cpu_ms['on']):.3f})"
        )


def test_the_checks_alone_per_call() -> None:
    """authenticate + authorize of one SendMessage by a Normal user with a policy, in µs of CPU: a header
    seen before (the clients sign once a second) and a new one (one HMAC-SHA1 and a parse)."""
    import asyncio
    import time

    from mqha.proxy.client_auth import GuardedService
    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s
    from tests.unit.proxy.test_client_auth import NOW, FakeContext, Served, access, signed

    checks = access([NOW])
    guarded = GuardedService(Served(), checks)
    request = s.SendMessageRequest(messages=[d.Message(topic=d.Resource(name="A"), body=b"x" * 1024)])
    context = FakeContext(signed("app", "app-secret1"))
    calls = 20_000

    async def run(served: object, fresh: bool) -> float:
        send = served.SendMessage  # type: ignore[attr-defined]
        started = time.process_time()
        for _ in range(calls):
            if fresh:  # forget the verified header: one parse and one HMAC-SHA1 per call
                checks.use_book(checks.book)
            await send(request, context)
        return (time.process_time() - started) / calls * 1e6

    def best(served: object, fresh: bool) -> float:  # the least disturbed of 5 runs
        return min(asyncio.run(run(served, fresh)) for _ in range(5))

    base = best(Served(), False)
    cached, fresh = best(guarded, False) - base, best(guarded, True) - base
    print(
        f"\nthe checks per SendMessage (a Normal user, one Allow entry): {cached:.1f} µs with a header "
        f"seen before, {fresh:.1f} µs with a new one (the bare call {base:.1f} µs)"
    )
