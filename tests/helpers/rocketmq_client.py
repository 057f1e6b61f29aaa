"""The official RocketMQ 5 Python client in its own virtualenv, for tests that drive it as a subprocess.

``scripts/setup.sh`` makes it (``.mqha/rocketmq-python-client``); a test makes it when it is missing.
It lives apart from mqha's venv because one process must not load two generated copies of the v2
protos, and the client pins its own protobuf and opentelemetry.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CLIENT_PACKAGE = "rocketmq-python-client"
CLIENT_VERSION = "5.1.2"
REPO = Path(__file__).resolve().parents[2]
CLIENT_VENV = REPO / ".mqha" / "rocketmq-python-client"
SCRIPTS = REPO / "tests" / "integration" / "rocketmq_clients"
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
