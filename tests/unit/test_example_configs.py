"""The example configs in conf/ load with the real loaders and agree with each other (README, conf/README.md).

Each ``conf/**/*.conf`` goes through what ``mqcontroller -c`` / ``mqbroker -c`` / ``mqproxy -c`` run before
starting anything (``load_controller_config`` + ``check_config``; ``load_broker_config``;
``load_proxy_layers``), chosen by the file name: ``controller*.conf``, ``broker*.conf`` or
``proxy*.conf``. A file with any other name fails, so no example goes untested.
No process, no socket, no directory is created: the loaders check text only.
"""

from pathlib import Path
from typing import Any

import pytest

from mqha.broker import __main__ as broker_main
from mqha.broker.config import load_broker_config
from mqha.config import parse_properties
from mqha.controller import __main__ as controller_main
from mqha.controller.config import load_controller_config, parse_peers
from mqha.controller.config_store import check_config
from mqha.proxy import __main__ as proxy_main
from mqha.proxy.config import load_proxy_layers
from mqha.security.credentials import MASK, SECRET_KEYS, masked

CONF = Path(__file__).resolve().parents[2] / "conf"
CONF_FILES = sorted(path.relative_to(CONF).as_posix() for path in CONF.rglob("*.conf"))
CLUSTER_CONTROLLERS = [f"controller-cluster/controller-n{i}.conf" for i in range(3)]
BROKER_A = ["broker-a/broker-a-host1.conf", "broker-a/broker-a-host2.conf"]
STANDALONE_CONTROLLER = "controller-standalone.conf"
STANDALONE_BROKER = "broker-standalone.conf"
STANDALONE_PROXY = "proxy-standalone.conf"


def kind_of(name: str) -> str:
    base = Path(name).name
    if base.startswith("controller"):
        return "controller"
    if base.startswith("broker"):
        return "broker"
    if base.startswith("proxy"):
        return "proxy"
    raise AssertionError(
        f"conf/{name}: name it controller*.conf, broker*.conf or proxy*.conf so a loader checks it"
    )


def load(name: str) -> dict[str, Any]:
    """The effective config of conf/<name>, exactly as the process's ``-c`` would load it."""
    path = str(CONF / name)
    if kind_of(name) == "controller":
        values = load_controller_config(path)
        check_config(values)
        return values
    if kind_of(name) == "proxy":
        return load_proxy_layers(path)[0]
    return load_broker_config(path)


def test_the_examples_are_there() -> None:
    expected = {*CLUSTER_CONTROLLERS, *BROKER_A, STANDALONE_CONTROLLER, STANDALONE_BROKER, STANDALONE_PROXY}
    assert expected <= set(CONF_FILES)


@pytest.mark.parametrize("name", CONF_FILES)
def test_every_file_loads_with_its_process_loader(name: str) -> None:
    values = load(name)
    given = parse_properties((CONF / name).read_text(encoding="utf-8"))
    assert given, f"conf/{name} sets no key"
    for key in given:  # every key the file sets is one the loader knows (it would have raised otherwise)
        assert key in values


@pytest.mark.parametrize("name", CONF_FILES)
def test_print_flag_accepts_every_file(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``mqcontroller -c FILE -p`` / ``mqbroker -c FILE -p``: the CLI path itself, printing only."""
    main = {"controller": controller_main.main, "broker": broker_main.main, "proxy": proxy_main.main}[
        kind_of(name)
    ]
    main(["-c", str(CONF / name), "-p"])
    printed = parse_properties(capsys.readouterr().out)
    expected = masked(load(name))  # secrets are printed as MASK
    assert printed == {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in expected.items()}
    given = parse_properties((CONF / name).read_text(encoding="utf-8"))
    assert all(printed[key] == MASK for key in SECRET_KEYS if given.get(key))


def test_every_file_is_listed_in_conf_readme() -> None:
    readme = (CONF / "README.md").read_text(encoding="utf-8")
    missing = [name for name in CONF_FILES if f"`{name}`" not in readme]
    assert not missing, f"conf/README.md does not list {missing}"


def test_cluster_controllers_agree() -> None:
    configs = [load(name) for name in CLUSTER_CONTROLLERS]
    for key in (
        "controllerDLegerPeers",
        "controllerDLegerGroup",
        "controllerRaftPortOffset",
        "controllerRaftPassword",
        "adminAuthToken",
    ):
        assert len({c[key] for c in configs}) == 1, f"{key} differs between the controllers"
    peers = parse_peers(configs[0]["controllerDLegerPeers"])
    self_ids = [c["controllerDLegerSelfId"] for c in configs]
    assert len(set(self_ids)) == len(self_ids) == 3
    assert set(self_ids) == {p.node_id for p in peers}  # one file per peer, each self id among them
    assert len({p.host for p in peers}) == 3, "three controllers on three hosts"
    assert all(not p.host.startswith("127.") for p in peers)
    for c in configs:
        assert c["controllerRaftPassword"] and c["adminAuthToken"]
        assert c["enableElectUncleanMaster"] is False
        assert c["controllerJournalFsync"] is True


def test_broker_a_points_at_the_cluster_controllers() -> None:
    peers = parse_peers(load(CLUSTER_CONTROLLERS[0])["controllerDLegerPeers"])
    api_addresses = [p.api_address for p in peers]
    brokers = [load(name) for name in BROKER_A]
    for b in brokers:
        assert b["controllerAddr"].split(";") == api_addresses
        assert b["brokerName"] == "broker-a"
        assert b["enableControllerMode"] is True
        assert b["allAckInSyncStateSet"] is True
        assert b["haListenPort"] == b["listenPort"] + 1
        assert not b["brokerIP1"].startswith("127.") and b["brokerIP1"] != "0.0.0.0"
        assert b["brokerIP1"] not in {p.host for p in peers}
    assert len({b["brokerIP1"] for b in brokers}) == len(brokers), "replicas on separate hosts"
    assert len({b["brokerClusterName"] for b in brokers}) == 1


def test_standalone_pair() -> None:
    controller = load(STANDALONE_CONTROLLER)
    peers = parse_peers(controller["controllerDLegerPeers"])
    assert [p.node_id for p in peers] == [controller["controllerDLegerSelfId"]]
    broker = load(STANDALONE_BROKER)
    assert broker["controllerAddr"] == peers[0].api_address
    assert broker["brokerIP1"] == peers[0].host
    assert broker["storePathRootDir"] != controller["controllerStorePath"]
    proxy = load(STANDALONE_PROXY)
    assert proxy["controllerAddr"] == peers[0].api_address
