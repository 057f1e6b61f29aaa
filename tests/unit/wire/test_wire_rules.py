"""The wire's value rules (docs/architecture.md §8): names, addresses, ids, nesting depth.

Requests carry the strict types of ``mqha.wire.types``; log records and snapshots keep the older length
bounds so that a journal written before the rules still replays.
"""

from __future__ import annotations

import msgspec
import pytest

from mqha.errors import RequestError
from mqha.wire import controller_api as api
from mqha.wire.codec import MAX_JSON_DEPTH, decode_any
from mqha.wire.records import ApplyBrokerIdRecord, decode_record, encode_record
from mqha.wire.types import MAX_BROKER_ID, NAME_RULE, is_valid_address, is_valid_name

GOOD_NAMES = ["broker-a", "DefaultCluster", "c1", "a_b", "%RETRY%x", "a|b", "A" * 127, "0"]
BAD_NAMES = ["", "\x00", "a/b", "a.b", "a b", "é", "A" * 128, "bs1\n", "\nbs1", "a\tb"]
GOOD_ADDRESSES = [
    "127.0.0.1:10911",
    "h:1",
    "broker-0.svc.cluster.local:65535",
    "[::1]:80",
    "[fe80::1%eth0]:9",
]
BAD_ADDRESSES = [
    "",
    "h",
    "h:",
    ":1",
    "h:0",
    "h:65536",
    "h:01",
    "a b:1",
    "h\x00:1",
    "h:1\n",
    "[::1:1",
    "h:1:2",
]


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_names_pass_everywhere(name: str) -> None:
    assert is_valid_name(name)
    body = {"clusterName": name, "brokerName": name, "appliedBrokerId": 1, "registerCheckCode": "h:1;5"}
    assert api.ApplyBrokerIdRequest.from_json(body).broker_name == name


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_2005_naming_the_field_and_the_rule(name: str) -> None:
    assert not is_valid_name(name)
    body = {"clusterName": "c1", "brokerName": name, "appliedBrokerId": 1, "registerCheckCode": "h:1;5"}
    with pytest.raises(RequestError) as err:
        api.ApplyBrokerIdRequest.from_json(body)
    assert err.value.remark == f"field 'brokerName' of ApplyBrokerIdRequest: expected {NAME_RULE}"
    with pytest.raises(RequestError) as err:
        api.GetSyncStateDataRequest.from_json({"brokerNames": ["ok", name]})
    assert "brokerNames[1]" in err.value.remark and NAME_RULE in err.value.remark


def test_an_empty_optional_name_means_not_given() -> None:
    assert api.ElectMasterRequest.from_json({"brokerName": "", "clusterName": ""}).broker_name == ""
    for bad in ("a/b", "\n"):
        with pytest.raises(RequestError, match=r"empty or 1\.\.127"):
            api.ElectMasterRequest.from_json({"brokerName": bad})


@pytest.mark.parametrize("address", GOOD_ADDRESSES)
def test_good_addresses(address: str) -> None:
    assert is_valid_address(address)
    body = {
        "clusterName": "c",
        "brokerName": "b",
        "brokerId": 1,
        "brokerAddress": address,
        "haAddress": address,
    }
    assert api.RegisterBrokerRequest.from_json(body).broker_address == address


@pytest.mark.parametrize("address", BAD_ADDRESSES)
def test_bad_addresses_and_check_codes(address: str) -> None:
    assert not is_valid_address(address)
    for field in ("brokerAddress", "haAddress"):
        body = {"clusterName": "c", "brokerName": "b", "brokerId": 1, "brokerAddress": "h:1", field: address}
        with pytest.raises(RequestError, match=f"field '{field}' .*host:port"):
            api.RegisterBrokerRequest.from_json(body)
    apply = {"clusterName": "c", "brokerName": "b", "appliedBrokerId": 1, "registerCheckCode": f"{address};1"}
    with pytest.raises(RequestError, match="registerCheckCode"):
        api.ApplyBrokerIdRequest.from_json(apply)


@pytest.mark.parametrize("broker_id", [2**64 - 1, 2**63, 2**63 - 1, -2, -5, 1.0, True, "1"])
def test_ids_outside_minus_one_to_max_broker_id_are_refused(broker_id: object) -> None:
    body = {"clusterName": "c", "brokerName": "b", "appliedBrokerId": broker_id, "registerCheckCode": "h:1;1"}
    with pytest.raises(RequestError, match="appliedBrokerId"):
        api.ApplyBrokerIdRequest.from_json(body)
    body["appliedBrokerId"] = MAX_BROKER_ID
    assert api.ApplyBrokerIdRequest.from_json(body).applied_broker_id == 2**63 - 2


def test_records_written_before_the_rules_still_decode() -> None:
    """A journal may hold names, addresses and ids the requests refuse now: replay must not drop them."""
    record = ApplyBrokerIdRecord(
        cluster_name="c.1", broker_name="a/b", broker_id=2**63 - 1, broker_address="x", register_check_code=""
    )
    assert decode_record(encode_record(record)) == record


def test_untyped_bodies_are_bounded_in_depth() -> None:
    assert decode_any(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH) is not None
    for depth in (MAX_JSON_DEPTH + 1, 1000, 100_000):
        with pytest.raises(msgspec.DecodeError, match="nested deeper"):
            decode_any(b'{"a":' * depth + b"1" + b"}" * depth)
    assert decode_any(b'{"k": [1, {"x": 2}]}') == {"k": [1, {"x": 2}]}
    with pytest.raises(msgspec.DecodeError):
        decode_any(b"{")


def test_struct_bodies_of_any_depth_are_a_type_error_not_a_recursion() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(RequestError, match="must be a JSON object"):
        api.ApplyBrokerIdRequest.decode(deep)
    with pytest.raises(RequestError, match="clusterName"):
        api.ApplyBrokerIdRequest.decode(b'{"clusterName":' + deep + b"}")
