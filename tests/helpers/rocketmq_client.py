"""The official RocketMQ 5 clients for tests that drive them as subprocesses: the Python client in its
own virtualenv, the Node.js client from the committed ``package-lock.json``.

``scripts/setup.sh`` installs both (``.mqha/rocketmq-python-client``, ``.mqha/rocketmq-client-nodejs``);
a test installs one when it is missing. The Python client lives apart from mqha's venv because one
process must not load two generated copies of the v2 protos, and it pins its own protobuf and
opentelemetry.
"""

from __future__ import annotations

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
