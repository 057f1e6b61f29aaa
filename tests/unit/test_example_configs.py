"""The example configs in conf/ load with the real loaders and agree with each other (README, conf/README.md).

Each ``conf/**/*.conf`` goes through what ``mqcontroller -c`` / ``mqbroker -c`` / ``mqproxy -c`` run before
starting anything (``load_controller_config`` + ``check_config``; ``load_broker_config``;
``load_proxy_layers``), chosen by the file name: ``controller*.conf``, ``broker*.conf`` or
``proxy*.conf``. A file with any other name fails, so no example goes untested.
No process or socket is created: the loaders check text only.

The secrets in conf/ are ``CHANGE-ME-...`` placeholders, which every process refuses at start naming
the key; the other tests load copies with each placeholder replaced by a secret (the same one for the
same placeholder, so files that must agree still do).
"""

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.broker import __main__ as broker_main
from mqha.broker.config import load_broker_config
from mqha.config import parse_properties
from mqha.controller import __main__ as controller_main
from mqha.controller.config import load_controller_config, parse_peers
from mqha.controller.config_store import check_config
from mqha.errors import ConfigError
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
PLACEHOLDER = re.compile(r"CHANGE-ME[-A-Za-z]*")
_ready: dict[str, Path] = {}


@pytest.fixture(scope="module", autouse=True)
def ready_copies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """conf/ with every placeholder replaced by a secret derived from it, as an operator would."""
    root = tmp_path_factory.mktemp("conf-ready")
    for name in CONF_FILES:
        text = (CONF / name).read_text(encoding="utf-8")
        ready = PLACEHOLDER.sub(lambda m: hashlib.sha256(m.group().encode()).hexdigest()[:32], text)
        _ready[name] = root / name
        _ready[name].parent.mkdir(parents=True, exist_ok=True)
        _ready[name].write_text(ready, encoding="utf-8")
    yield
    _ready.clear()


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
    """The effective config of conf/<name> (placeholders replaced), as the process's ``-c`` loads it."""
    path = str(_ready[name])
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
    main(["-c", str(_ready[name]), "-p"])
    printed = parse_properties(capsys.readouterr().out)
    expected = masked(load(name))  # secrets are printed as MASK
    assert printed == {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in expected.items()}
    given = parse_properties((CONF / name).read_text(encoding="utf-8"))
    assert all(printed[key] == MASK for key in SECRET_KEYS if given.get(key))


@pytest.mark.parametrize("name", [n for n in CONF_FILES if PLACEHOLDER.search((CONF / n).read_text())])
def test_a_file_with_placeholders_is_refused_naming_a_secret_key(name: str) -> None:
    """Started unedited, an example would run with secrets everyone can read: it stops instead."""
    with pytest.raises(ConfigError) as caught:
        loaders = {"controller": load_controller_config, "broker": load_broker_config}
        loaders[kind_of(name)](str(CONF / name))
    assert caught.value.key in SECRET_KEYS and "placeholder" in str(caught.value)


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
