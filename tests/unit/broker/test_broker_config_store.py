"""``updateBrokerConfig``'s store (mqha.broker.config_store): runtime keys applied and written into the
broker's -c file in place; other keys, secrets and bad values refused with nothing changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mqha.broker.config import load_broker_config
from mqha.broker.config_store import RUNTIME_KEYS, BrokerConfigStore
from mqha.codes import ResponseCode

CONF = (
    "# broker-a, host 1\nbrokerName=broker-a\nenableControllerMode=true\ncontrollerAddr=127.0.0.1:9878\n"
    "haMaxTimeSlaveNotCatchup=3000\nadminAuthToken=secret-token\n"
)


def _store(tmp_path: Path) -> tuple[BrokerConfigStore, Path, list[dict[str, Any]]]:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    applied: list[dict[str, Any]] = []
    store = BrokerConfigStore(
        load_broker_config(str(conf)), str(conf), lambda changes: applied.append(dict(changes))
    )
    return store, conf, applied


def test_a_runtime_key_is_applied_and_written_into_the_file_in_place(tmp_path: Path) -> None:
    store, conf, applied = _store(tmp_path)
    assert "haMaxTimeSlaveNotCatchup" in RUNTIME_KEYS
    assert store.update({"haMaxTimeSlaveNotCatchup": "16000"}) == (ResponseCode.SUCCESS, "")
    assert applied == [{"haMaxTimeSlaveNotCatchup": 16000}]
    assert conf.read_text() == CONF.replace("haMaxTimeSlaveNotCatchup=3000", "haMaxTimeSlaveNotCatchup=16000")
    assert load_broker_config(str(conf))["haMaxTimeSlaveNotCatchup"] == 16000  # what a restart reads
    assert store.document()["config"]["adminAuthToken"] != "secret-token"  # masked


def test_other_keys_secrets_and_bad_values_are_refused_and_change_nothing(tmp_path: Path) -> None:
    store, conf, applied = _store(tmp_path)
    code, remark = store.update({"listenPort": 1})
    assert code == ResponseCode.NO_PERMISSION and "restart" in remark and str(conf) in remark
    code, remark = store.update({"adminAuthToken": "x"})
    assert code == ResponseCode.NO_PERMISSION and "secret" in remark
    code, remark = store.update({"haMaxTimeSlaveNotCatchup": 0})
    assert code == ResponseCode.SYSTEM_ERROR and "haMaxTimeSlaveNotCatchup" in remark
    assert store.update([1])[0] == ResponseCode.SYSTEM_ERROR
    assert applied == [] and conf.read_text() == CONF
