"""Identity file codec (docs/reference-behaviour.md §9.3): formats, what counts as loaded, the config check.
No files."""

from __future__ import annotations

import contextlib
import itertools
import zlib
from pathlib import Path

import pytest

from mqha.errors import StorageError
from mqha.replicas_manager import identity
from mqha.replicas_manager.actions import BrokerIdentity, TempBrokerIdentity
from mqha.replicas_manager.identity import (
    DamagedIdentity,
    check_names,
    check_store,
    format_identity,
    format_store_id,
    format_temp_identity,
    parse_identity,
    parse_store_id,
    parse_temp_identity,
    register_check_code,
    temp_path,
)

STORE = "0123456789abcdef0123456789abcdef"


def test_formats_spec_9_3() -> None:
    assert format_identity(BrokerIdentity("c1", "b1", 3)) == "c1#b1#3"  # an older broker's, unbound
    bound = format_identity(BrokerIdentity("c1", "b1", 3, STORE))
    assert bound == f"c1#b1#3#{STORE}#{zlib.crc32(f'c1#b1#3#{STORE}'.encode()):08x}"
    code = register_check_code("127.0.0.1:10911", 1700000000123)
    assert code == "127.0.0.1:10911;1700000000123"
    assert register_check_code("127.0.0.1:10911", 1, STORE) == f"127.0.0.1:10911;1;{STORE}"
    temp = format_temp_identity(TempBrokerIdentity("c1", "b1", 3, code))
    assert temp.startswith("c1#b1#3#127.0.0.1:10911;1700000000123#") and len(temp.rsplit("#", 1)[1]) == 8
    assert temp_path("/s/brokerIdentity") == "/s/brokerIdentity-temp"


def test_round_trip_and_trailing_newline() -> None:
    for record in (BrokerIdentity("DefaultCluster", "broker-a", 12), BrokerIdentity("c", "b", 1, STORE)):
        assert parse_identity(format_identity(record) + "\n") == record
    temp = TempBrokerIdentity("c", "b", 1, f"10.0.0.1:1;2;{STORE}")
    assert parse_temp_identity(format_temp_identity(temp)) == temp
    assert parse_temp_identity("c#b#1#10.0.0.1:1;2") == TempBrokerIdentity("c", "b", 1, "10.0.0.1:1;2")
    assert parse_store_id(format_store_id(STORE) + "\n") == STORE


@pytest.mark.parametrize("text", ["", "c1#b1", "c1#b1#", "#b1#3", "c1#b1#x", "c1#b1#-1"])
def test_not_loaded_metadata_is_absent(text: str) -> None:
    assert parse_identity(text) is None


@pytest.mark.parametrize("text", ["c1#b1#3#extra", f"c1#b1#3#{STORE}", f"c1#b1#3#{STORE}#00000000"])
def test_metadata_with_more_fields_must_check_out(text: str) -> None:
    with pytest.raises(DamagedIdentity):
        parse_identity(text)


def flips(text: str) -> list[str]:
    """Every single-bit flip of ``text`` that still decodes as UTF-8 (others fail at the read)."""
    data, out = text.encode(), []
    for i, bit in itertools.product(range(len(data)), range(8)):
        flipped = bytearray(data)
        flipped[i] ^= 1 << bit
        with contextlib.suppress(UnicodeDecodeError):
            out.append(bytes(flipped).decode())
    return out


def test_a_flipped_bit_is_detected_never_read_as_another_identity() -> None:
    # The flip (#1 -> #3) and every other one of a checksummed file.
    text = format_identity(BrokerIdentity("DefaultCluster", "broker-a", 1, STORE))
    for damaged in flips(text):
        try:
            parsed = parse_identity(damaged)
        except DamagedIdentity:
            continue
        assert parsed is None, damaged  # whitespace at the ends: still the same text, or not loaded
    for damaged in flips(format_store_id(STORE)):
        with pytest.raises(DamagedIdentity):
            parse_store_id(damaged)
    temp = format_temp_identity(TempBrokerIdentity("c", "b", 1, f"10.0.0.1:1;2;{STORE}"))
    for damaged in flips(temp):
        parsed_temp = parse_temp_identity(damaged)
        assert parsed_temp is None or parsed_temp.broker_id == 1, damaged


@pytest.mark.parametrize("text", ["c1#b1#3", "c1#b1#3#", "c1##3#a;1", "c1#b1#z#a;1"])
def test_not_loaded_temp_is_absent(text: str) -> None:
    assert parse_temp_identity(text) is None


def test_an_identity_of_another_store_refuses_naming_both_and_the_reset_command() -> None:
    check_store("/s/brokerIdentity", BrokerIdentity("c1", "b1", 3, STORE), STORE)  # fine
    check_store("/s/brokerIdentity", BrokerIdentity("c1", "b1", 3), STORE)  # an older broker's: unbound
    with pytest.raises(StorageError) as info:
        check_store("/s/brokerIdentity", BrokerIdentity("c1", "b1", 3, STORE), "f" * 32)
    message = str(info.value)
    assert STORE in message and "f" * 32 in message and "mqha store reset-identity" in message


def test_files_damaged_bound_and_made(tmp_path: Path) -> None:
    path = str(tmp_path / "brokerIdentity")
    store_path = identity.store_id_path(str(tmp_path))
    store = identity.ensure_store_id(store_path)
    assert identity.ensure_store_id(store_path) == store  # made once
    Path(path).write_text("c1#b1#3")  # an older broker's file
    older, _ = identity.load(path, "c1", "b1", store)
    assert older == BrokerIdentity("c1", "b1", 3)
    bound = identity.bind_to_store(path, older, store)
    assert identity.load(path, "c1", "b1", store) == (bound, None) and bound.store_id == store
    Path(path).write_text(Path(path).read_text().replace("#3#", "#1#"))  # a flipped id
    with pytest.raises(StorageError, match="damaged"):
        identity.load(path, "c1", "b1", store)
    Path(store_path).write_text(store + "#00000000")
    with pytest.raises(StorageError, match="store id file is damaged"):
        identity.ensure_store_id(store_path)


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
