"""Launches the Apache RocketMQ reference cluster beside mqha on 127.0.0.1 (a test fixture, issue 47).

The topology is `mqha demo`'s: one NameServer, three standalone controllers (DLedger, the reference's
default), one broker group of three replicas in controller mode with `allAckInSyncStateSet=true`, and
one proxy in cluster mode. The jars come from Maven Central through `interop/rocketmq/pom.xml` into the
local Maven cache (`scripts/interop.sh setup`); nothing is vendored.

    python interop/rocketmq/reference_cluster.py up [--dir DIR]    # returns once the group has a master
    python interop/rocketmq/reference_cluster.py status [--dir DIR]
    python interop/rocketmq/reference_cluster.py down [--dir DIR]  # stops every process by its pid

`up` writes `cluster.json` in DIR (ports, pids, addresses); `down` reads it. Every process is started
in a session of its own and stopped by pid (SIGTERM, then SIGKILL after 10 s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLASSPATH_FILE = HERE / "target" / "classpath.txt"
DEFAULT_DIR = Path(os.environ.get("MQHA_INTEROP_DIR", "/tmp/mqha-rocketmq-reference"))
CLUSTER = "DefaultCluster"
GROUP = "broker-a"
REPLICAS = 3
CONTROLLERS = 3

# Sized for 2 cores and 24 GiB with mqha running beside it: 8 JVMs. RocketMQ's own scripts ask for
# 4-8 GiB heaps; these small heaps carry the benchmark's load. SerialGC and two compiler threads (the
# least tiered compilation allows) keep each JVM from spreading GC and JIT threads over both cores;
# C1 and C2 both run, as shipped, so steady-state figures are the reference's own. --add-opens lets the
# store unmap its MappedByteBuffers on Java 17. (docs/performance.md §10 lists them.)
JVM_COMMON = [
    "-XX:+UseSerialGC",
    "-XX:CICompilerCount=2",
    "-Djava.net.preferIPv4Stack=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
]
HEAP = {"namesrv": "128m", "controller": "192m", "broker": "512m", "proxy": "256m"}
MAIN = {
    "namesrv": "org.apache.rocketmq.namesrv.NamesrvStartup",
    "controller": "org.apache.rocketmq.controller.ControllerStartup",
    "broker": "org.apache.rocketmq.broker.BrokerStartup",
    "proxy": "org.apache.rocketmq.proxy.ProxyStartup",
    "admin": "org.apache.rocketmq.tools.command.MQAdminStartup",
}


@dataclass
class Process:
    """One started JVM of the reference cluster: its role, name, pid and log file."""

    role: str
    name: str
    pid: int
    log: str


@dataclass
class Layout:
    """Where every part of the reference cluster listens, and what it started."""

    dir: str
    namesrv_port: int
    controller_ports: list[int]  # DLedger's port; the controller serves brokers and mqadmin on it too
    broker_ports: list[int]
    proxy_grpc_port: int
    proxy_remoting_port: int
    processes: list[Process] = field(default_factory=list)

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def controllers(self) -> str:
        return ";".join(f"127.0.0.1:{port}" for port in self.controller_ports)

    @property
    def proxy(self) -> str:
        return f"127.0.0.1:{self.proxy_grpc_port}"


def classpath() -> str:
    if not CLASSPATH_FILE.exists():
        raise SystemExit(f"{CLASSPATH_FILE} is missing: run scripts/interop.sh setup first")
    return CLASSPATH_FILE.read_text().strip()


def _free_ports(count: int, stride: int = 1) -> list[int]:
    """Ports whose whole stride (a broker takes listenPort-2 .. listenPort+1) is free now."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            base = sock.getsockname()[1]
        if base + stride < 65000 and all(_is_free(base + k) for k in range(-2, stride)):
            ports.append(base)
    return ports


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _write_conf(path: Path, values: dict[str, object]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return path


def _start(layout: Layout, role: str, name: str, args: list[str]) -> Process:
    root = Path(layout.dir)
    log = root / f"{name}.log"
    env = dict(os.environ, ROCKETMQ_HOME=str(root), JAVA_TOOL_OPTIONS="")
    command = [
        "java", f"-Xms{HEAP[role]}", f"-Xmx{HEAP[role]}", *JVM_COMMON,
        f"-Duser.home={root / name}", f"-Drocketmq.home.dir={root}",
        "-cp", classpath(), MAIN[role], *args,
    ]  # fmt: skip
    (root / name).mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        child = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=root / name, env=env, start_new_session=True
        )
    process = Process(role, name, child.pid, str(log))
    layout.processes.append(process)
    _save(layout)
    return process


def _save(layout: Layout) -> None:
    Path(layout.dir, "cluster.json").write_text(json.dumps(asdict(layout), indent=2))


def load(directory: Path = DEFAULT_DIR) -> Layout:
    data = json.loads((directory / "cluster.json").read_text())
    data["processes"] = [Process(**p) for p in data["processes"]]
    return Layout(**data)


def _wait_port(port: int, process: Process, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(process.pid):
            raise RuntimeError(f"{process.name} exited; see {process.log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{process.name} did not listen on {port} within {timeout:.0f} s; see {process.log}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours counts as gone (and is reaped here)
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not ours (started by an earlier `up`): a zombie waits for init
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False
    return done == 0


def admin(layout: Layout, *args: str, timeout: float = 60) -> str:
    """Runs the reference's mqadmin with ARGS and returns its output."""
    command = ["java", "-Xmx128m", *JVM_COMMON, "-cp", classpath(), MAIN["admin"], *args]
    env = dict(os.environ, ROCKETMQ_HOME=layout.dir)
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    return done.stdout + done.stderr


UPDATE_AND_CREATE_TOPIC, GET_REPLICA_INFO = 17, 1004  # RocketMQ's RequestCode


def _remoting_call(address: str, code: int, fields: dict[str, str], timeout: float) -> tuple[dict, bytes]:
    """One RocketMQ remoting request (JSON header) to ADDRESS; its reply header and body."""
    host, port = address.rsplit(":", 1)
    header = json.dumps(
        {"code": code, "language": "JAVA", "version": 475, "opaque": 1, "flag": 0, "extFields": fields}
    ).encode()
    frame = struct.pack(">II", 4 + len(header), len(header)) + header
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(frame)
        length = struct.unpack(">I", _read(sock, 4))[0]
        data = _read(sock, length)
    header_len = struct.unpack(">I", data[:4])[0] & 0xFFFFFF
    return json.loads(data[4 : 4 + header_len]), data[4 + header_len :]


def _read(sock: socket.socket, size: int) -> bytes:
    chunks = b""
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("the controller closed the connection")
        chunks += chunk
    return chunks


@dataclass(frozen=True)
class ReplicaInfo:
    """A group's master (id, address, epoch) and SyncStateSet as the controllers' leader answers."""

    master_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set: tuple[int, ...]

    @property
    def ready(self) -> bool:
        return self.master_id is not None and self.master_id >= 0 and len(self.sync_state_set) == REPLICAS


def replica_info(layout: Layout, timeout: float = 2.0) -> ReplicaInfo | None:
    """The controllers' GET_REPLICA_INFO for the group, asked of each controller until the leader
    answers (a follower says CONTROLLER_NOT_LEADER); None when none answers. A plain socket call, not
    mqadmin: a JVM per query took seconds under load and its 3 s RPC timed out."""
    for port in layout.controller_ports:
        try:
            header, body = _remoting_call(
                f"127.0.0.1:{port}", GET_REPLICA_INFO, {"brokerName": GROUP}, timeout
            )
        except (OSError, ValueError):
            continue
        if header.get("code") != 0:
            continue
        fields = header.get("extFields") or {}
        master = fields.get("masterBrokerId")
        in_sync = json.loads(body).get("syncStateSet", []) if body else []
        return ReplicaInfo(
            int(master) if master not in (None, "") else None,
            fields.get("masterAddress") or None,
            int(fields.get("masterEpoch") or 0),
            tuple(sorted(int(x) for x in in_sync)),
        )
    return None


def create_topic(layout: Layout, topic: str, queues: int = 4, timeout: float = 120) -> None:
    """Create TOPIC on every broker of the group (UPDATE_AND_CREATE_TOPIC straight to each, as mqadmin
    updateTopic does to masters; a slave gets it too so a failover finds it); retried until each says
    yes, as a cold broker may be slow to answer."""
    fields = {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
        "attributes": "+message.type=NORMAL",
    }  # fmt: skip
    deadline = time.monotonic() + timeout
    for port in layout.broker_ports:
        while True:
            try:
                header, _ = _remoting_call(f"127.0.0.1:{port}", UPDATE_AND_CREATE_TOPIC, fields, 10)
                if header.get("code") == 0:
                    break
                why = header.get("remark")
            except (OSError, ValueError) as error:
                why = str(error)
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker on {port} did not create {topic}: {why}")
            time.sleep(1)


def restart(layout: Layout, name: str) -> Process:
    """Start the process NAME again (after a kill) with the same config and store."""
    old = next(p for p in layout.processes if p.name == name)
    if _alive(old.pid):
        raise RuntimeError(f"{name} (pid {old.pid}) is still running")
    layout.processes.remove(old)
    return _start(layout, old.role, name, ["-c", str(Path(layout.dir) / f"{name}.conf")])


def broker_pid(layout: Layout, address: str) -> tuple[str, int]:
    """(name, pid) of the broker that listens on ADDRESS (host:port, as the controllers report it)."""
    index = layout.broker_ports.index(int(address.rsplit(":", 1)[1]))
    process = next(p for p in layout.processes if p.name == f"broker{index}")
    return process.name, process.pid


def sync_state(layout: Layout) -> tuple[int | None, list[int]]:
    """(master broker id, SyncStateSet) as the reference's controllers report them."""
    info = replica_info(layout)
    return (None, []) if info is None else (info.master_id, list(info.sync_state_set))


def up(
    directory: Path = DEFAULT_DIR,
    timeout: float = 300,
    broker_settings: dict[str, str] | None = None,
    controller_settings: dict[str, str] | None = None,
) -> Layout:
    """Start the cluster in DIRECTORY; return once the group has a master and a SyncStateSet of 3.
    The settings are more keys of every broker's and controller's config (the benchmark's timers)."""
    directory.mkdir(parents=True, exist_ok=True)
    controller_ports = _free_ports(CONTROLLERS)
    broker_ports = _free_ports(REPLICAS, stride=2)
    namesrv_port, grpc_port, remoting_port = _free_ports(3)
    layout = Layout(str(directory), namesrv_port, controller_ports, broker_ports, grpc_port, remoting_port)
    try:
        _up(layout, timeout, broker_settings or {}, controller_settings or {})
    except BaseException:
        down(layout)
        raise
    return layout


def _up(
    layout: Layout, timeout: float, broker_settings: dict[str, str], controller_settings: dict[str, str]
) -> None:
    root = Path(layout.dir)
    namesrv_conf = _write_conf(root / "namesrv.conf", {"listenPort": layout.namesrv_port})
    ns = _start(layout, "namesrv", "namesrv", ["-c", str(namesrv_conf)])
    peers = ";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(layout.controller_ports))
    controllers = []
    for i, port in enumerate(layout.controller_ports):
        conf = _write_conf(root / f"controller{i}.conf", {
            "controllerDLegerGroup": "group1",
            "controllerDLegerPeers": peers,
            "controllerDLegerSelfId": f"n{i}",
            "controllerStorePath": root / f"controller{i}" / "store",
            "enableElectUncleanMaster": "false",
            "notifyBrokerRoleChanged": "true",
            **controller_settings,
        })  # fmt: skip
        controllers.append((port, _start(layout, "controller", f"controller{i}", ["-c", str(conf)])))
    _wait_port(layout.namesrv_port, ns, timeout)
    for port, process in controllers:
        _wait_port(port, process, timeout)
    brokers = []
    for i, port in enumerate(layout.broker_ports):
        store = root / f"broker{i}" / "store"
        conf = _write_conf(root / f"broker{i}.conf", {
            "brokerClusterName": CLUSTER,
            "brokerName": GROUP,
            "brokerIP1": "127.0.0.1",
            "listenPort": port,
            "namesrvAddr": layout.namesrv,
            "enableControllerMode": "true",
            "controllerAddr": layout.controllers,
            "allAckInSyncStateSet": "true",
            "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog",
            "mappedFileSizeCommitLog": 64 * 1024 * 1024,
            "autoCreateTopicEnable": "true",
            "syncBrokerMemberGroupPeriod": 1000,
            **broker_settings,
        })  # fmt: skip
        brokers.append((port, _start(layout, "broker", f"broker{i}", ["-c", str(conf)])))
    for port, process in brokers:
        _wait_port(port, process, timeout)
    _wait_in_sync(layout, timeout)
    _start_proxy(layout, timeout)


def _start_proxy(layout: Layout, timeout: float, attempts: int = 3) -> None:
    """The cluster-mode proxy, once the group has its master. At start-up it creates its system
    topics through the brokers with sub-second RPC deadlines, which a loaded machine can miss (it
    then exits): it is started again, up to ATTEMPTS times."""
    proxy_conf = Path(layout.dir) / "rmq-proxy.json"
    proxy_conf.write_text(json.dumps({
        "rocketMQClusterName": CLUSTER,
        "namesrvAddr": layout.namesrv,
        "grpcServerPort": layout.proxy_grpc_port,
        "remotingListenPort": layout.proxy_remoting_port,
    }))  # fmt: skip
    for attempt in range(1, attempts + 1):
        layout.processes = [p for p in layout.processes if p.role != "proxy" or _alive(p.pid)]
        proxy = _start(layout, "proxy", "proxy", ["-pc", str(proxy_conf), "-pm", "cluster"])
        try:
            _wait_port(layout.proxy_grpc_port, proxy, timeout)
            return
        except RuntimeError:
            if attempt == attempts:
                raise


def _wait_in_sync(layout: Layout, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    seen: ReplicaInfo | None = None
    while time.monotonic() < deadline:
        for process in layout.processes:
            if not _alive(process.pid):
                raise RuntimeError(f"{process.name} exited; see {process.log}")
        seen = replica_info(layout)
        if seen is not None and seen.ready:
            return
        time.sleep(0.5)
    raise TimeoutError(f"the group has no master with a SyncStateSet of {REPLICAS}: {seen}")


def _ours(layout: Layout, pid: int) -> bool:
    """Whether PID is still a JVM started for this directory (a stale cluster.json's pid may have
    been reused by another process since)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"-Drocketmq.home.dir={layout.dir}".encode() in command


def down(layout: Layout, grace: float = 15) -> None:
    """Stop every process of the layout by its pid: SIGCONT (a paused JVM cannot handle SIGTERM) and
    SIGTERM, then SIGKILL after GRACE seconds; returns once all are gone."""
    running = [p for p in reversed(layout.processes) if _alive(p.pid) and _ours(layout, p.pid)]
    for process in running:
        for sig in (signal.SIGCONT, signal.SIGTERM):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, sig)
    deadline = time.monotonic() + grace
    for process in running:
        while _alive(process.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    for process in running:
        while _alive(process.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    left = [p.name for p in running if _alive(p.pid)]
    if left:
        raise RuntimeError(f"still running after SIGKILL: {left}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    if args.command == "up":
        started = time.monotonic()
        layout = up(args.dir)
        print(
            f"reference cluster up in {time.monotonic() - started:.1f} s: proxy {layout.proxy}, "
            f"namesrv {layout.namesrv}, controllers {layout.controllers}; state in {args.dir}/cluster.json"
        )
    elif args.command == "status":
        layout = load(args.dir)
        for process in layout.processes:
            print(f"{process.name:12} pid {process.pid:7} {'up' if _alive(process.pid) else 'gone'}")
        print("master, SyncStateSet:", sync_state(layout))
    else:
        down(load(args.dir))
        print("reference cluster stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
