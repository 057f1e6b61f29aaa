"""Issue 23 part 4 with the real ``mqbroker -c`` / ``mqcontroller -c``: a bad config value is ONE line on
stderr naming the key and its rule, exit code 1, no traceback (docs/architecture.md §1, §8).

The attack: negative ``maxMessageSize`` or ``slaveTimeout`` and an empty ``brokerName`` were accepted.
Every key's rules are probed in tests/unit/config; this runs a sample through the processes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration.broker_processes import mqbroker_command
from tests.integration.controller_cluster import mqcontroller_command

pytestmark = pytest.mark.integration

BROKER = {
    "brokerName": "broker-a",
    "enableControllerMode": "true",
    "controllerAddr": "127.0.0.1:9878",
    "listenPort": "10911",
}
CONTROLLER = {"controllerDLegerPeers": "n0-127.0.0.1:9878", "controllerDLegerSelfId": "n0"}

BROKER_CASES = [
    ("maxMessageSize", "-1", "within [1, 2147483647]"),
    ("slaveTimeout", "-3000", "within [1, 2147483647]"),
    ("brokerName", "", "1..127 characters of [%|a-zA-Z0-9_-]"),
    ("brokerName", "a/b", "1..127 characters of [%|a-zA-Z0-9_-]"),
    ("brokerClusterName", "\\u0000", "1..127 characters"),
    ("listenPort", "0", "within [1, 65535]"),
    ("haListenPort", "70000", "within [1, 65535]"),
    ("listenPort", "many", "expected an integer"),
    ("flushDiskType", "SOMETIMES", "expected one of"),
    ("syncFromLastFile", "perhaps", "expected true or false"),
    ("controllerAddr", "nowhere", "host:port"),
    ("storePathRootDir", "line\\nbreak", "non-empty text"),
]
CONTROLLER_CASES = [
    ("scanNotActiveBrokerInterval", "-1", "within [1, 2147483647]"),
    ("controllerRaftPortOffset", "0", "within [1, 65534]"),
    ("metricsPromExporterPort", "0", "within [1, 65535]"),
    ("controllerDLegerPeers", "n0-127.0.0.1:0", "id-host:port"),
    ("controllerRaftMinTimeoutMills", "100", "must be > 150"),
    ("controllerType", "Zookeeper", "expected one of"),
    ("maxRequestBodyBytes", "1" + "0" * 30, "within [1, 9223372036854775807]"),
]


def _run(command: list[str], conf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, "-c", str(conf)], capture_output=True, text=True, timeout=60, check=False
    )


def _check(done: subprocess.CompletedProcess[str], prog: str, key: str, words: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{prog}: config key '{key}': "), lines[0]
    assert words in lines[0], lines[0]


@pytest.mark.parametrize(
    ("key", "value", "words"), BROKER_CASES, ids=[f"{k}={v[:10]}" for k, v, _ in BROKER_CASES]
)
def test_mqbroker_refuses_a_bad_value_in_one_line(tmp_path: Path, key: str, value: str, words: str) -> None:
    conf = tmp_path / "broker.conf"
    values = {**BROKER, "storePathRootDir": str(tmp_path / "store"), key: value}
    conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    _check(_run(mqbroker_command(), conf), "mqbroker", key, words)
    assert not (tmp_path / "store").exists()  # refused before anything was created


@pytest.mark.parametrize(
    ("key", "value", "words"), CONTROLLER_CASES, ids=[f"{k}={v[:10]}" for k, v, _ in CONTROLLER_CASES]
)
def test_mqcontroller_refuses_a_bad_value_in_one_line(
    tmp_path: Path, key: str, value: str, words: str
) -> None:
    conf = tmp_path / "controller.conf"
    values = {**CONTROLLER, "controllerStorePath": str(tmp_path / "store"), key: value}
    conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    _check(_run(mqcontroller_command(), conf), "mqcontroller", key, words)
    assert not (tmp_path / "store").exists()
