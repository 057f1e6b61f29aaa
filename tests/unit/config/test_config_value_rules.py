"""Every key of the controller's and the broker's config refuses a bad value with a ConfigError naming it.

Issue 23 part 4: wrong types and values outside a key's rule (ports 1..65535, periods and sizes > 0,
names by the wire's name rule, ...) end in ONE line naming the key and the rule, never a traceback.
Each int key must carry a range and each text key a rule or choices, unless listed below as free text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest

from mqha.broker.config import BROKER_CONFIG, check_broker_config
from mqha.config import ConfigSpec, Key
from mqha.controller.config import CONTROLLER_CONFIG, load_controller_config
from mqha.controller.config_store import check_config
from mqha.errors import ConfigError
from mqha.process import one_line

BROKER_BASE = {"brokerName": "broker-a", "enableControllerMode": "true", "controllerAddr": "127.0.0.1:9878"}
CONTROLLER_BASE = {"controllerDLegerPeers": "n0-127.0.0.1:9878", "controllerDLegerSelfId": "n0"}

FREE_TEXT = {
    # Any text is a valid value of these: unused compatibility keys, secrets, lists checked elsewhere.
    "rocketmqHome",
    "metricsGrpcExporterTarget",
    "metricsGrpcExporterHeader",
    "metricsPromExporterHost",
    "metricsLabel",
    "configBlackList",
    "controllerRaftPassword",
    "consoleAnalysisReportDir",
    "controllerAddr",  # check_broker_config: host:port;host:port
    "controllerDLegerPeers",  # parse_peers: id-host:port;...
    "innerClientAuthenticationCredentials",
    "adminAuthToken",
    "initAuthenticationUser",
    "tls.server.certPath",
    "tls.server.keyPath",
    "tls.client.trustCertPath",
}
SPECS = {"broker": (BROKER_CONFIG, BROKER_BASE), "controller": (CONTROLLER_CONFIG, CONTROLLER_BASE)}


def _keys() -> Iterator[tuple[str, Key]]:
    for process, (spec, _) in SPECS.items():
        for key in spec.keys.values():
            yield process, key


def bad_values(key: Key) -> list[str]:
    """Text values ``key`` must refuse: wrong types, and both sides of its range or rule."""
    if key.kind is bool:
        return ["yes", "1", ""]
    if key.kind is int:
        values = ["x", "1.5", "", "0x10", "9" * 5000]
        if key.rule is not None and key.rule.bounds is not None:
            low, high = key.rule.bounds
            values += [str(low - 1), str(high + 1)]
        return values
    if key.choices:
        return ["", "nope", key.choices[0].lower() + "x"]
    if key.rule is not None:
        # An optional list whose default is empty takes empty (and blank) as "none".
        return (["", " "] if key.default != "" else []) + ["a\x01b", "line\nbreak"]
    return []


CASES = [(process, key.name, value) for process, key in _keys() for value in bad_values(key)]


def resolve(process: str, given: Mapping[str, str]) -> None:
    """What ``-c`` runs before starting anything: parse, rules, cross-key checks."""
    spec, base = SPECS[process]
    values = spec.resolve({**base, **given})
    if process == "broker":
        check_broker_config(values)
    else:
        check_config(values)


def test_every_key_has_a_rule_or_is_listed_as_free_text() -> None:
    unruled = {
        key.name
        for _, key in _keys()
        if key.kind is not bool and key.rule is None and not key.choices and key.name not in FREE_TEXT
    }
    assert not unruled, (
        f"give these keys a Rule (mqha/config.py) or list them as free text: {sorted(unruled)}"
    )
    for _, key in _keys():
        if key.kind is int:
            assert key.rule is not None and key.rule.bounds is not None, f"{key.name} needs a range"


def test_the_defaults_and_the_bases_are_valid() -> None:
    for process in SPECS:
        resolve(process, {})


@pytest.mark.parametrize(
    ("process", "name", "value"), CASES, ids=[f"{p}-{n}-{v[:12]!r}" for p, n, v in CASES]
)
def test_a_bad_value_is_one_line_naming_the_key(process: str, name: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        resolve(process, {name: value})
    assert err.value.key == name
    line = one_line(str(err.value))
    assert "\n" not in line and len(line) < 400, line
    assert f"config key '{name}'" in line
    assert any(word in line for word in ("must be", "expected")), line


@pytest.mark.parametrize(
    ("given", "key", "words"),
    [
        ({"maxMessageSize": "-1"}, "maxMessageSize", "within [1, 2147483647]"),
        ({"slaveTimeout": "-5"}, "slaveTimeout", "within [1, 2147483647]"),
        ({"brokerName": ""}, "brokerName", "1..127 characters of [%|a-zA-Z0-9_-]"),
        ({"brokerName": "a/b"}, "brokerName", "[%|a-zA-Z0-9_-]"),
        ({"brokerClusterName": "A" * 128}, "brokerClusterName", "1..127"),
        ({"listenPort": "0"}, "listenPort", "within [1, 65535]"),
        ({"listenPort": "65535"}, "haListenPort", "within [1, 65535], got 65536"),
        ({"brokerIP1": "a b"}, "brokerIP1", "host"),
        ({"controllerAddr": "nowhere"}, "controllerAddr", "host:port"),
        ({"controllerAddr": "127.0.0.1:9878;127.0.0.1:0"}, "controllerAddr", "host:port"),
        (
            {"maxMessageSize": "2000000", "mappedFileSizeCommitLog": "1000000"},
            "mappedFileSizeCommitLog",
            "larger",
        ),
    ],
)
def test_broker_rules_of_the_issue(given: dict[str, str], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        resolve("broker", given)
    assert err.value.key == key
    assert words in str(err.value)


def test_controller_peers_and_port_offset(tmp_path: object) -> None:
    from pathlib import Path

    conf = Path(str(tmp_path)) / "c.conf"
    cases = [
        ({"controllerDLegerPeers": "n0-127.0.0.1:0"}, "controllerDLegerPeers"),
        ({"controllerDLegerPeers": "n0-a b:1"}, "controllerDLegerPeers"),
        ({"controllerDLegerPeers": "n0-127.0.0.1:65535"}, "controllerRaftPortOffset"),
        ({"controllerRaftPortOffset": "0"}, "controllerRaftPortOffset"),
        ({"controllerType": "Zookeeper"}, "controllerType"),
    ]
    for given, key in cases:
        conf.write_text("".join(f"{k}={v}\n" for k, v in {**CONTROLLER_BASE, **given}.items()))
        with pytest.raises(ConfigError) as err:
            load_controller_config(str(conf))
        assert err.value.key == key, (given, err.value)


def test_config_files_that_are_not_text_are_one_line(tmp_path: object) -> None:
    from pathlib import Path

    conf = Path(str(tmp_path)) / "c.conf"
    conf.write_bytes(b"brokerName=\xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        BROKER_CONFIG.load(str(conf))
    conf.write_text("a\\nb=1\n")
    with pytest.raises(ConfigError) as err:
        BROKER_CONFIG.load(str(conf))
    assert "\n" not in one_line(str(err.value))


def test_a_spec_with_rules_still_types_values() -> None:
    spec = ConfigSpec([Key("n", int, 1, rule=None)])
    assert spec.coerce("n", " 7 ") == 7
