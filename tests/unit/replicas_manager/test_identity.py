"""Identity file codec (docs/reference-behaviour.md §9.3): formats, what counts as loaded, the config check.
No files."""

from __future__ import annotations

import pytest

from mqha.errors import StorageError
from mqha.replicas_manager.actions import BrokerIdentity, TempBrokerIdentity
from mqha.replicas_manager.identity import (
    check_names,
    format_identity,
    format_temp_identity,
    parse_identity,
    parse_temp_identity,
    register_check_code,
    temp_path,
)


def test_formats_spec_9_3() -> None:
    assert format_identity(BrokerIdentity("c1", "b1", 3)) == "c1#b1#3"
    code = register_check_code("127.0.0.1:10911", 1700000000123)
    assert code == "127.0.0.1:10911;1700000000123"
    assert (
        format_temp_identity(TempBrokerIdentity("c1", "b1", 3, code))
        == "c1#b1#3#127.0.0.1:10911;1700000000123"
    )
    assert temp_path("/s/brokerIdentity") == "/s/brokerIdentity-temp"


def test_round_trip_and_trailing_newline() -> None:
    record = BrokerIdentity("DefaultCluster", "broker-a", 12)
    assert parse_identity(format_identity(record) + "\n") == record
    temp = TempBrokerIdentity("c", "b", 1, "10.0.0.1:1;2")
    assert parse_temp_identity(format_temp_identity(temp)) == temp


@pytest.mark.parametrize("text", ["", "c1#b1", "c1#b1#", "#b1#3", "c1#b1#x", "c1#b1#3#extra", "c1#b1#-1"])
def test_not_loaded_metadata_is_absent(text: str) -> None:
    assert parse_identity(text) is None


@pytest.mark.parametrize("text", ["c1#b1#3", "c1#b1#3#", "c1##3#a;1", "c1#b1#z#a;1"])
def test_not_loaded_temp_is_absent(text: str) -> None:
    assert parse_temp_identity(text) is None


def test_mismatched_names_refuse_with_one_message_naming_file_and_values() -> None:
    check_names("/s/brokerIdentity", BrokerIdentity("c1", "b1", 3), "c1", "b1")  # fine
    with pytest.raises(StorageError) as info:
        check_names("/s/brokerIdentity", BrokerIdentity("other", "b1", 3), "c1", "b1")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("/s/brokerIdentity: ")
    for part in ("brokerClusterName='other'", "brokerClusterName='c1'", "brokerName='b1'", "id 3"):
        assert part in message
    with pytest.raises(StorageError, match="brokerName='b9'"):
        check_names("/s/x-temp", TempBrokerIdentity("c1", "b9", 3, "a;1"), "c1", "b1")
