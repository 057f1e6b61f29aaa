"""The official RocketMQ 5 clients for tests that drive them as subprocesses: the Python client in its
own virtualenv, the Node.js client from the committed ``package-lock.json``.

``scripts/setup.sh`` installs both (``.mqha/rocketmq-python-client``, ``.mqha/rocketmq-client-nodejs``);
a test installs one when it is missing. The Python client lives apart from mqha's venv because one
process must not load two generated copies of the v2 protos, and it pins its own protobuf and
opentelemetry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CLIENT_PACKAGE = "rocketmq-python-client"
CLIENT_VERSION = "5.1.2"
REPO = Path(__file__).resolve().parents[2]
CLIENT_VENV = REPO / ".mqha" / "rocketmq-python-client"
SCRIPTS = REPO / "tests" / "integration" / "rocketmq_clients"
NODE_PACKAGE = "rocketmq-client-nodejs"
NODE_DIR = REPO / ".mqha" / "rocketmq-client-nodejs"
NODE_LOCK = SCRIPTS / "node"
_INSTALL_TIMEOUT_S = 600


def _installed(venv: Path) -> bool:
    dist = f"{CLIENT_PACKAGE.replace('-', '_')}-{CLIENT_VERSION}.dist-info"
    return (venv / "bin" / "python").exists() and any(venv.glob(f"lib/python*/site-packages/{dist}"))


def client_python(venv: Path = CLIENT_VENV) -> Path:
    """The client venv's interpreter; the venv is created (pip, its cache or index) when missing."""
    if not _installed(venv):
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"{CLIENT_PACKAGE}=={CLIENT_VERSION}",
            ],
            check=True,
            timeout=_INSTALL_TIMEOUT_S,
        )
    return venv / "bin" / "python"


def node_client(directory: Path = NODE_DIR) -> Path:
    """A directory whose ``node_modules`` holds the Node client exactly as the committed lock file pins
    it (``npm ci``, offline when npm's cache has it); made or refreshed when the lock file changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = False
    for name in ("package.json", "package-lock.json"):
        source, target = NODE_LOCK / name, directory / name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)
            changed = True
    if changed or not (directory / "node_modules" / NODE_PACKAGE / "package.json").exists():
        subprocess.run(
            ["npm", "ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=directory,
            check=True,
            timeout=_INSTALL_TIMEOUT_S,
        )
    return directory / "node_modules"


JAVA_CLIENT = REPO / "interop" / "java-client"
GO_CLIENT = REPO / "interop" / "go-client"
JAVA_MAIN = "io.mqha.interop.Client"
GO_BINARY = GO_CLIENT / "target" / "goclient"  # per checkout: .mqha is shared by worktrees


def java_client() -> list[str]:
    """The command that runs the official Java client's driver (``interop/java-client``); built with
    Maven (from its cache when it has the jars) when the jar or its classpath is missing or older, and
    started from a class-data archive (AppCDS) of the client's classes, which halves a JVM's start."""
    jar = JAVA_CLIENT / "target" / "java-client-1.jar"
    classpath = JAVA_CLIENT / "target" / "classpath.txt"
    sources = [JAVA_CLIENT / "pom.xml", *JAVA_CLIENT.glob("src/**/*.java")]
    built = jar.stat().st_mtime if jar.exists() and classpath.exists() else 0.0
    if max(p.stat().st_mtime for p in sources) > built:
        subprocess.run(
            ["mvn", "-q", "-B", "package", "dependency:build-classpath", f"-Dmdep.outputFile={classpath}"],
            cwd=JAVA_CLIENT,
            check=True,
            timeout=_INSTALL_TIMEOUT_S,
        )
    java = [
        "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-Xlog:disable", "-Xlog:all=warning:stderr",  # stdout carries only the driver's JSON lines
        "-cp", f"{jar}:{classpath.read_text().strip()}",
    ]  # fmt: skip
    archive = JAVA_CLIENT / "target" / "client.jsa"
    if not archive.exists() or archive.stat().st_mtime < jar.stat().st_mtime:
        _archive_classes(java, archive)
    return [*java[:-2], f"-XX:SharedArchiveFile={archive}", *java[-2:], JAVA_MAIN]


def _archive_classes(java: list[str], archive: Path) -> None:
    """Dumps the classes a producer loads up to its first RPC (to a closed port, so it fails fast)
    into ``archive``; written aside and renamed, as other tests may start from it meanwhile."""
    partial = archive.with_suffix(f".{os.getpid()}.tmp")
    subprocess.run(
        [
            *java[:-2],
            f"-XX:ArchiveClassesAtExit={partial}",
            *java[-2:],
            JAVA_MAIN,
            "produce",
            "127.0.0.1:1",
            "T",
            "1",
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    if partial.exists():
        partial.replace(archive)


def go_client() -> list[str]:
    """The command that runs the official Go client's driver (``interop/go-client``), built with the Go
    toolchain (modules from the Go proxy or its cache) when the binary is missing or older."""
    sources = [GO_CLIENT / "go.mod", GO_CLIENT / "go.sum", *GO_CLIENT.glob("*.go")]
    built = GO_BINARY.stat().st_mtime if GO_BINARY.exists() else 0.0
    if max(p.stat().st_mtime for p in sources) > built:
        GO_BINARY.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["go", "build", "-o", str(GO_BINARY), "."], cwd=GO_CLIENT, check=True, timeout=_INSTALL_TIMEOUT_S
        )
    return [str(GO_BINARY)]
