"""``mqbroker -c broker.conf`` start-up refusals (docs/architecture.md §1, docs/reference-behaviour.md §9.3):
one line, exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import free_port

pytestmark = pytest.mark.integration


def mqbroker(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("mqbroker")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "mqha.broker"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=30, check=False)


def write_config(tmp_path: Path, **extra: str) -> Path:
    values = {
        "brokerClusterName": "c1",
        "brokerName": "bs1",
        "enableControllerMode": "true",
        "controllerAddr": f"127.0.0.1:{free_port()}",
        "listenPort": str(free_port()),
        "haListenPort": str(free_port()),
        "storePathRootDir": str(tmp_path / "store"),
        "mappedFileSizeCommitLog": str(8 * 1024 * 1024),
        **extra,
    }
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return conf


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"listenPort": "abc"}, "config key 'listenPort': expected an integer, got 'abc'"),
        ({"flushDiskType": "SOMETIMES"}, "config key 'flushDiskType': expected one of"),
        ({"noSuchKey": "1"}, "config key 'noSuchKey': unknown key"),
        ({"enableControllerMode": "false"}, "config key 'enableControllerMode'"),
    ],
)
def test_config_errors_print_one_line_naming_the_key(
    tmp_path: Path, extra: dict[str, str], message: str
) -> None:
    result = mqbroker("-c", str(write_config(tmp_path, **extra)))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mqbroker: ") and message in lines[0], result.stderr


def test_identity_file_of_another_broker_refuses_to_start(tmp_path: Path) -> None:
    conf = write_config(tmp_path)
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "brokerIdentity").write_text("otherCluster#bs1#2")
    result = mqbroker("-c", str(conf))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "belongs to cluster 'otherCluster' broker 'bs1'" in lines[0], result.stderr


def test_print_effective_config(tmp_path: Path) -> None:
    result = mqbroker("-c", str(write_config(tmp_path)), "-p")
    assert result.returncode == 0
    assert "haTransferBatchSize=32768\n" in result.stdout and "allAckInSyncStateSet=false\n" in result.stdout


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("flip", "broker identity file is damaged"),  # issue 45: '#1' -> '#3', 0x31 -> 0x33
        ("other-store", "was written for store"),  # a copy of another replica's identity file
    ],
)
def test_a_damaged_or_foreign_identity_file_refuses_to_start(
    tmp_path: Path, damage: str, message: str
) -> None:
    from mqha.replicas_manager.actions import BrokerIdentity
    from mqha.replicas_manager.identity import format_identity, format_store_id

    conf = write_config(tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    (store / "storeId").write_text(format_store_id("a" * 32))
    written_for = "a" * 32 if damage == "flip" else "b" * 32
    text = format_identity(BrokerIdentity("c1", "bs1", 1, written_for))
    if damage == "flip":
        text = text.replace("#1#", "#3#")
    (store / "brokerIdentity").write_text(text)
    result = mqbroker("-c", str(conf))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "mqha store reset-identity" in lines[0], result.stderr
