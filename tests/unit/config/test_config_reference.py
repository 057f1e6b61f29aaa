"""Every config key of both processes does something (issue 30): used by the code, mapped to an mqha
mechanism, or refused at start with one line naming what to use instead; and docs/config.md is the
reference generated from the same tables.

The walk is generic: a key added to either table is checked without touching this file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from mqha.broker.config import BROKER_CONFIG, check_broker_config
from mqha.cluster.config_reference import reference
from mqha.config import MAPPED, REFUSED, USED, ConfigSpec, Key
from mqha.controller.config import CONTROLLER_CONFIG, load_controller_config
from mqha.errors import ConfigError
from mqha.proxy.config import PROXY_CONFIG

ROOT = Path(__file__).resolve().parents[3]
BROKER_BASE = {"brokerName": "broker-a", "enableControllerMode": "true", "controllerAddr": "127.0.0.1:9878"}
CONTROLLER_BASE = {"controllerDLegerPeers": "n0-127.0.0.1:9878", "controllerDLegerSelfId": "n0"}
PROXY_BASE = {"controllerAddr": "127.0.0.1:9878"}
SPECS = {
    "broker": (BROKER_CONFIG, BROKER_BASE),
    "controller": (CONTROLLER_CONFIG, CONTROLLER_BASE),
    "proxy": (PROXY_CONFIG, PROXY_BASE),
}
# Tools that write config files for others (the launcher, chaos, benchmarks) do not count as a use.
NOT_USERS = ("mqha/cluster/", "mqha/chaos/", "mqha/bench/", "mqha/testing/")


def _keys() -> Iterator[tuple[str, Key]]:
    for process, (spec, _) in SPECS.items():
        for key in spec.keys.values():
            yield process, key


KEYS = list(_keys())
IDS = [f"{process}:{key.name}" for process, key in KEYS]


@cache
def used_strings() -> frozenset[str]:
    """String constants the runtime code reads: every literal of mqha/ except a ``Key(...)``'s name,
    docstrings and the tools in ``NOT_USERS``."""
    found: set[str] = set()
    for path in (ROOT / "mqha").rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(NOT_USERS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Key" and node.args:
                skip.add(id(node.args[0]))
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                skip.add(id(node.value))  # a docstring or a bare string
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                found.add(node.value)
    return frozenset(found)


def another_value(key: Key) -> str:
    """A valid text value of ``key`` that is not its default."""
    if key.kind is bool:
        return "false" if key.default else "true"
    if key.choices:
        accepted = key.support.accepted or ()
        return next(c for c in key.choices if c != key.default and c not in accepted)
    if key.kind is int:
        default = key.default if isinstance(key.default, int) else 1
        low, high = key.rule.bounds if key.rule is not None and key.rule.bounds else (0, 2**31 - 1)
        return str(default + 1 if default + 1 <= high else max(low, default - 1))
    for candidate in ("x", "localhost:1", "localhost:1,localhost:2"):
        if candidate != key.default:
            try:
                if key.rule is None or key.rule.test(candidate):
                    return candidate
            except Exception:
                continue
    raise AssertionError(f"no test value for {key.name}")


def resolve(process: str, given: dict[str, str]) -> dict[str, object]:
    spec, base = SPECS[process]
    return spec.resolve({**base, **given})


@pytest.mark.parametrize(("process", "key"), KEYS, ids=IDS)
def test_every_key_is_used_mapped_or_refused(process: str, key: Key) -> None:
    assert key.support.kind in (USED, MAPPED, REFUSED)
    assert key.doc, f"{key.name}: say what the key means (docs/config.md)"
    if key.support.kind in (USED, MAPPED):
        assert key.name in used_strings(), f"{process} key {key.name} is accepted but nothing reads it"
    if key.support.kind in (MAPPED, REFUSED):
        assert key.support.note, f"{key.name}: say what it maps to, or what to use instead"
    if key.support.kind == REFUSED:
        value = another_value(key)
        with pytest.raises(ConfigError) as refused:
            resolve(process, {key.name: value})
        line = str(refused.value)
        assert "\n" not in line and f"mqha does not support {key.name}=" in line and key.support.note in line
        if not callable(key.default):  # the default itself is accepted (a RocketMQ file loads)
            resolve(
                process,
                {key.name: str(key.default).lower() if isinstance(key.default, bool) else str(key.default)},
            )


@pytest.mark.parametrize("key", [k for k in BROKER_CONFIG.keys.values() if k.runtime], ids=lambda k: k.name)
def test_each_broker_runtime_key_is_applied_by_the_running_broker(key: Key) -> None:
    source = (ROOT / "mqha/broker/__main__.py").read_text(encoding="utf-8")
    apply = source[source.index("def apply_config") :].split("\n    def ", 1)[0]
    assert f'"{key.name}"' in apply


def test_a_mapped_value_and_a_refused_one_of_the_same_key() -> None:
    assert resolve("controller", {"metricsExporterType": "PROM"})["metricsExporterType"] == "PROM"
    with pytest.raises(ConfigError, match="mqha does not support metricsExporterType=LOG"):
        resolve("controller", {"metricsExporterType": "LOG"})
    with pytest.raises(ConfigError, match="does not support controllerType=jRaft"):
        resolve("controller", {"controllerType": "jRaft"})
    # RocketMQ's sample broker config for controller mode loads (brokerId=-1, brokerRole=SLAVE)
    check_broker_config(resolve("broker", {"brokerId": "-1", "brokerRole": "SLAVE"}))
    with pytest.raises(ConfigError, match="does not support brokerRole=SYNC_MASTER"):
        resolve("broker", {"brokerRole": "SYNC_MASTER"})


def test_addresses_peers_cannot_reach_are_refused(tmp_path: Path) -> None:
    for given, key in (
        ({"listenPort": "0"}, "listenPort"),
        ({"brokerIP1": "0.0.0.0"}, "brokerIP1"),
        ({"listenPort": "9000", "haListenPort": "9000"}, "haListenPort"),
        ({"brokerIP1": "127.0.0.1", "haListenPort": "9878"}, "haListenPort"),
    ):
        with pytest.raises(ConfigError) as refused:
            check_broker_config(resolve("broker", given))
        assert str(refused.value).startswith(f"config key '{key}'")
    conf = tmp_path / "c.conf"
    conf.write_text("controllerDLegerPeers=n0-0.0.0.0:9878\ncontrollerDLegerSelfId=n0\n")
    with pytest.raises(ConfigError, match="controllerDLegerPeers"):
        load_controller_config(str(conf))


def test_broker_ip_defaults_to_the_primary_address() -> None:
    from mqha.config import primary_address

    assert resolve("broker", {})["brokerIP1"] == primary_address()


def test_docs_config_md_is_the_generated_reference() -> None:
    """Regenerate with ``mqha config-reference > docs/config.md`` after changing a key table."""
    assert (ROOT / "docs/config.md").read_text(encoding="utf-8") == reference()


def test_every_key_of_every_spec_is_in_the_reference() -> None:
    text = reference()
    spec: ConfigSpec
    for spec, _ in SPECS.values():
        for name in spec.keys:
            assert f"| `{name}` |" in text


def test_controller_reads_saved_changes_over_its_file_and_says_where_each_came_from(tmp_path: Path) -> None:
    from mqha.config import with_values
    from mqha.controller.config import load_controller_layers

    store = tmp_path / "controller.properties"
    conf = tmp_path / "controller.conf"
    conf.write_text(
        "# my cluster\ncontrollerDLegerPeers=n0-127.0.0.1:9878\ncontrollerDLegerSelfId=n0\n"
        f"configStorePath={store}\nscanNotActiveBrokerInterval=500\n"
    )
    values, sources = load_controller_layers(str(conf))
    assert values["scanNotActiveBrokerInterval"] == 500 and sources["scanNotActiveBrokerInterval"] == str(
        conf
    )
    store.write_text(with_values("", {"scanNotActiveBrokerInterval": 600}))
    values, sources = load_controller_layers(str(conf))
    assert values["scanNotActiveBrokerInterval"] == 600 and sources["scanNotActiveBrokerInterval"] == str(
        store
    )
    assert sources["controllerDLegerSelfId"] == str(conf) and sources["electMasterMaxRetryCount"] == "default"
    # A bad key in the saved file is reported with the file that set it.
    store.write_text("mappedFileSize=4096\n")
    with pytest.raises(ConfigError, match=f"set in {store}"):
        load_controller_layers(str(conf))


def test_with_values_rewrites_a_key_in_place_and_keeps_the_rest() -> None:
    from mqha.config import with_values

    text = "# comment\na=1\nb = 2\na=3\n"
    assert with_values(text, {"a": 5, "c": True}) == "# comment\na=5\nb = 2\nc=true\n"
    assert with_values("", {"k": "C:\\data"}) == "k=C:\\\\data\n"
