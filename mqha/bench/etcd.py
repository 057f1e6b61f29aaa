"""A 3-member etcd cluster on 127.0.0.1 for the controller benchmark (shell).

etcd is what an operator would run instead of the controller (RIP-44), so the controller's write
figures are given as ratios to etcd's measured in the same run. The binary comes from Debian's
``etcd-server`` package, fetched with ``apt-get download`` into ``.mqha/etcd/`` under the working
directory (gitignored; ``MQHA_ETCD_DIR`` overrides) and unpacked with ``dpkg-deb -x``: no system
install. Members use etcd's default durability (fsync on every commit, never ``--unsafe-no-fsync``)
and are stopped by their pids.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

from mqha.bench.loadgen import Http, OpFailed, post_json
from mqha.cluster.nodes import http_get
from mqha.cluster.processes import LOCALHOST, NodeProcess, free_port_pair, stop_all
from mqha.errors import MqhaError

CACHE = Path(os.environ.get("MQHA_ETCD_DIR", ".mqha/etcd")).resolve()
PACKAGE = "etcd-server"


class EtcdUnavailable(MqhaError, RuntimeError):
    """etcd could not be fetched or started; the message says why (the etcd side is skipped)."""


def etcd_binary(cache: Path = CACHE) -> Path:
    """The cached ``etcd`` binary, fetched and unpacked on first use."""
    binary = cache / "root" / "usr" / "bin" / "etcd"
    if binary.exists():
        return binary
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise EtcdUnavailable(f"{tool} not found: cannot fetch the Debian package {PACKAGE}")
    cache.mkdir(parents=True, exist_ok=True)
    try:
        debs = sorted(cache.glob(f"{PACKAGE}_*.deb"))
        if not debs:
            subprocess.run(
                ["apt-get", "download", PACKAGE], cwd=cache, check=True, capture_output=True, timeout=180
            )
            debs = sorted(cache.glob(f"{PACKAGE}_*.deb"))
        if not debs:
            raise EtcdUnavailable(f"apt-get download {PACKAGE} left no .deb in {cache}")
        subprocess.run(
            ["dpkg-deb", "-x", str(debs[-1]), str(cache / "root")],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise EtcdUnavailable(f"{' '.join(exc.cmd)} failed: {detail[0]}") from exc
    except subprocess.TimeoutExpired as exc:
        raise EtcdUnavailable(f"{' '.join(exc.cmd)} timed out") from exc
    if not binary.exists():
        raise EtcdUnavailable(f"{PACKAGE} unpacked, but {binary} is missing")
    return binary


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class EtcdCluster:
    """Three etcd members on loopback free ports, each with its own data dir."""

    def __init__(self, base: Path, binary: Path, size: int = 3) -> None:
        self.base, self.binary = base, binary
        self.names = [f"e{i}" for i in range(size)]
        self.ports = {name: free_port_pair() for name in self.names}  # client p, peer p+1
        self.procs: dict[str, NodeProcess] = {}
        self.initial = ",".join(f"{n}=http://{LOCALHOST}:{self.ports[n] + 1}" for n in self.names)

    def url(self, name: str) -> str:
        return f"http://{LOCALHOST}:{self.ports[name]}"

    def _args(self, name: str) -> list[str]:
        client, peer = f"http://{LOCALHOST}:{self.ports[name]}", f"http://{LOCALHOST}:{self.ports[name] + 1}"
        return [
            str(self.binary),
            f"--name={name}",
            f"--data-dir={self.base / name}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={self.initial}",
            "--initial-cluster-state=new",  # ignored once the data dir exists (a restart rejoins)
            "--initial-cluster-token=mqha-bench",
            "--logger=zap",
            "--log-level=warn",
        ]

    def start(self, names: list[str] | None = None, timeout: float = 30.0) -> None:
        chosen = names or self.names
        for name in chosen:
            self.procs[name] = NodeProcess.spawn(
                self._args(name), self.base / f"{name}.log", die_with_parent=True
            )
        deadline = time.monotonic() + timeout
        for name in chosen:
            while True:
                proc = self.procs[name]
                if not proc.is_running():
                    raise EtcdUnavailable(f"etcd member {name} exited; see {self.base / (name + '.log')}")
                try:
                    if http_get(self.url(name) + "/health", timeout=0.5)[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise EtcdUnavailable(f"etcd member {name} not healthy within {timeout:g} s")
                time.sleep(0.05)

    def stop(self) -> None:
        stop_all(list(self.procs.values()))

    def kill(self, name: str) -> None:
        self.procs[name].kill()

    def alive(self) -> list[str]:
        return [n for n in self.names if n in self.procs and self.procs[n].is_running()]

    async def leader(self, http: aiohttp.ClientSession, timeout: float = 10.0) -> str:
        """The name of the member that says it is the leader (bounded wait)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name in self.alive():
                try:
                    status, body = await post_json(http, self.url(name) + "/v3/maintenance/status", {}, 1.0)
                except (aiohttp.ClientError, TimeoutError, OSError):
                    continue
                if status == 200 and body.get("leader") and body["leader"] == body["header"]["member_id"]:
                    return name
            await asyncio.sleep(0.05)
        raise EtcdUnavailable(f"no etcd leader within {timeout:g} s")


class CasClient:
    """Runs one client's compare-and-swap loop on its own etcd key.

    Read the mod revision once, then ``txn(compare mod_revision == last, put value)``; the reply's
    revision is the next ``last``.
    """

    def __init__(self, http: Http, url: str, key: str, value_size: int) -> None:
        self.http, self.url, self.key = http, url, b64(key)
        self.value = b64("v" * value_size)
        self.revision = 0
        self.timeout: float | None = None

    async def sync(self) -> None:
        status, body = await post_json(self.http, self.url + "/v3/kv/range", {"key": self.key}, self.timeout)
        kvs = body.get("kvs") if status == 200 else None
        self.revision = int(kvs[0]["mod_revision"]) if kvs else 0

    def txn_body(self) -> dict[str, Any]:
        compare = {"key": self.key, "result": "EQUAL", "target": "MOD", "mod_revision": str(self.revision)}
        return {"compare": [compare], "success": [{"requestPut": {"key": self.key, "value": self.value}}]}

    async def __call__(self) -> None:
        status, body = await post_json(self.http, self.url + "/v3/kv/txn", self.txn_body(), self.timeout)
        if status != 200:
            raise OpFailed(f"http {status}")
        if not body.get("succeeded"):
            await self.sync()
            raise OpFailed("compare failed")
        self.revision = int(body["header"]["revision"])
