"""The broker API codec (docs/architecture.md §4): put/read validation and reply shapes,
docs/reference-behaviour.md §15 statuses."""

import base64

import pytest

from mqha.broker.commitlog import MessageDraft
from mqha.broker.commitlog.codec import StoredMessage
from mqha.broker.protocol import (
    Appended,
    BrokerCode,
    PutOutcome,
    PutRequest,
    PutStatus,
    ReadRequest,
    code_and_http_status,
    envelope,
    parse_put_request,
    parse_read_request,
    put_reply,
    read_diverged_reply,
    read_reply,
)
from mqha.errors import RequestError

MAX = 4096


def parse(payload: object) -> PutRequest:
    return parse_put_request(payload, max_message_size=MAX)


def rejected(payload: object) -> str:
    with pytest.raises(RequestError) as info:
        parse(payload)
    assert info.value.code == BrokerCode.MESSAGE_ILLEGAL
    return info.value.remark


def test_single_message_with_all_fields() -> None:
    request = parse({"topic": "t1", "body": "héllo", "keys": "k", "properties": {"a": "b"}, "msgId": "ID1"})
    assert request == PutRequest(
        (MessageDraft(topic="t1", body="héllo".encode(), msg_id="ID1", keys="k", properties={"a": "b"}),),
        batch=False,
    )


def test_base64_body_and_batch_order() -> None:
    request = parse(
        {
            "messages": [
                {"topic": "t", "bodyBase64": base64.b64encode(b"\x00\xff").decode()},
                {"topic": "u", "body": "x"},
            ]
        }
    )
    assert request.batch and [d.body for d in request.drafts] == [b"\x00\xff", b"x"]
    assert request.body_bytes == 3


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ([1, 2], "must be a JSON object, got array"),
        ({"body": "x"}, "missing required field 'topic' in PutMessage"),
        ({"topic": 7, "body": "x"}, "field 'topic' of PutMessage: expected a string, got integer"),
        ({"topic": "t", "body": 12}, "field 'body' of PutMessage: expected a string, got integer"),
        ({"topic": "t", "body": True}, "got boolean"),
        ({"topic": "t"}, "exactly one of 'body' and 'bodyBase64'"),
        ({"topic": "t", "body": "x", "bodyBase64": "eA=="}, "exactly one of"),
        ({"topic": "t", "bodyBase64": "not base64!"}, "not valid base64"),
        ({"topic": "t", "body": ""}, "body is empty"),
        ({"topic": "bad topic", "body": "x"}, "is not 1..127 characters"),
        ({"topic": "t" * 128, "body": "x"}, "is not 1..127 characters"),
        ({"topic": "t", "body": "x", "color": "red"}, "unknown field 'color'"),
        (
            {"topic": "t", "body": "x", "properties": []},
            "field 'properties' of PutMessage: expected an object, got array",
        ),
        (
            {"topic": "t", "body": "x", "properties": {"a": 1}},
            "field 'properties' of PutMessage: expected an object of strings, found integer",
        ),
        ({"topic": "t", "body": "x", "properties": {"a": "\x01"}}, "separator inside"),
        (
            {"topic": "t", "body": "x", "keys": ["k"]},
            "field 'keys' of PutMessage: expected a string, got array",
        ),
        ({"topic": "t", "body": "x", "msgId": "é"}, "ASCII"),
        ({"topic": "t", "body": "x" * MAX}, "exceeds maxMessageSize 4096"),
        ({"messages": {}}, "field 'messages' of PutMessage: expected an array, got object"),
        ({"messages": []}, "'messages' is empty"),
        ({"messages": [{"topic": "t", "body": "x"}], "topic": "t"}, "unknown field 'topic'"),
    ],
)
def test_malformed_puts_are_refused_with_message_illegal(payload: object, fragment: str) -> None:
    assert fragment in rejected(payload)


def test_a_bad_message_names_its_index_and_rejects_the_whole_batch() -> None:
    good = {"topic": "t", "body": "x"}
    assert rejected({"messages": [good, good, {"topic": "t", "body": 3}]}).startswith("messages[2]: ")


def test_batch_size_is_bounded() -> None:
    with pytest.raises(RequestError, match="at most 2 messages"):
        parse_put_request({"messages": [{"topic": "t", "body": "x"}] * 3}, max_message_size=MAX, max_batch=2)


def test_read_request_defaults_and_bounds() -> None:
    assert parse_read_request({}) == ReadRequest(offset=0, max_messages=32)
    assert parse_read_request({"offset": "100", "maxMessages": "5"}) == ReadRequest(100, 5)
    for query in ({"offset": "-1"}, {"offset": "x"}, {"maxMessages": "0"}, {"maxMessages": "5000"}):
        with pytest.raises(RequestError):
            parse_read_request(query)
    assert parse_read_request({"offset": "100", "epoch": "3"}) == ReadRequest(100, 32, epoch=3)
    for query in ({"epoch": "x"}, {"epoch": "-2"}, {"epoch": str(2**31)}):
        with pytest.raises(RequestError, match="epoch"):
            parse_read_request(query)


def test_a_diverged_read_names_where_to_continue() -> None:
    reply = read_diverged_reply(150, 1, 100, confirm_offset=90, max_offset=120)
    assert reply["code"] == BrokerCode.PULL_OFFSET_MOVED and reply["status"] == "OFFSET_DIVERGED"
    assert reply["nextOffset"] == 100 and reply["messages"] == []
    assert "epoch 1" in reply["remark"]
    assert "lastEpoch" not in read_reply([], 0, 0, 0)
    assert read_reply([], 0, 0, 0, last_epoch=4)["lastEpoch"] == 4


def test_status_codes_spec_15() -> None:
    assert code_and_http_status(PutStatus.PUT_OK) == (BrokerCode.SUCCESS, 200)
    assert code_and_http_status(PutStatus.FLUSH_SLAVE_TIMEOUT) == (BrokerCode.FLUSH_SLAVE_TIMEOUT, 200)
    # The send processor maps IN_SYNC_REPLICAS_NOT_ENOUGH to SYSTEM_ERROR (docs/reference-behaviour.md §15
    # step 1).
    assert code_and_http_status(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH) == (BrokerCode.SYSTEM_ERROR, 503)
    assert code_and_http_status(PutStatus.SERVICE_NOT_AVAILABLE) == (BrokerCode.SERVICE_NOT_AVAILABLE, 503)
    assert envelope(12) == {"code": 12, "codeName": "FLUSH_SLAVE_TIMEOUT", "remark": ""}


def test_put_replies_single_and_batch() -> None:
    single = PutRequest((MessageDraft("t", b"x"),), batch=False)
    ok = PutOutcome(PutStatus.PUT_OK, (Appended(0, 90, "A"),), epoch=3)
    assert put_reply(single, ok) == (
        200,
        {
            "code": 0,
            "codeName": "SUCCESS",
            "remark": "",
            "status": "PUT_OK",
            "offset": 0,
            "size": 90,
            "epoch": 3,
            "msgId": "A",
        },
    )
    batch = PutRequest((MessageDraft("t", b"x"), MessageDraft("t", b"y")), batch=True)
    timeout = PutOutcome(
        PutStatus.FLUSH_SLAVE_TIMEOUT, (Appended(0, 90, "A"), Appended(90, 90, "B")), epoch=3
    )
    status, body = put_reply(batch, timeout)
    assert status == 200 and body["code"] == 12 and body["status"] == "FLUSH_SLAVE_TIMEOUT"
    assert [r["offset"] for r in body["results"]] == [0, 90]
    assert {r["status"] for r in body["results"]} == {"FLUSH_SLAVE_TIMEOUT"}


def test_rejections_carry_no_results_and_a_master_address() -> None:
    slave = PutOutcome(PutStatus.SERVICE_NOT_AVAILABLE, remark="slave", extra={"masterAddress": "h:1"})
    status, body = put_reply(PutRequest((), batch=False), slave)
    assert status == 503
    assert body == {
        "code": 14,
        "codeName": "SERVICE_NOT_AVAILABLE",
        "remark": "slave",
        "status": "SERVICE_NOT_AVAILABLE",
        "masterAddress": "h:1",
    }
    status, body = put_reply(PutRequest((), batch=True), PutOutcome(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH))
    assert (status, body["code"], body["remark"]) == (503, 1, "in-sync replicas not enough")


def test_read_reply_decodes_text_and_falls_back_to_base64() -> None:
    def stored(offset: int, body: bytes) -> StoredMessage:
        return StoredMessage(offset, 80, "M", "t", "", {}, body, 1, 2, 0)

    body = read_reply([stored(0, b"hi"), stored(80, b"\xff")], 160, 160, 200)
    assert body["nextOffset"] == 160 and body["confirmOffset"] == 160
    assert body["messages"][0]["body"] == "hi"
    assert body["messages"][1]["body"] is None and body["messages"][1]["bodyBase64"] == "/w=="


def test_born_timestamp_is_the_producers_when_given_and_read_back() -> None:
    request = parse({"topic": "t1", "body": "x", "bornTimestamp": 1_700_000_000_000})
    assert request.drafts[0].born_ts == 1_700_000_000_000
    assert parse({"topic": "t1", "body": "x"}).drafts[0].born_ts is None  # the store timestamp
    assert "bornTimestamp" in rejected({"topic": "t1", "body": "x", "bornTimestamp": -1})
    assert "bornTimestamp" in rejected({"topic": "t1", "body": "x", "bornTimestamp": "1"})
    stored = StoredMessage(0, 80, "M", "t", "", {}, b"x", 1_700_000_000_000, 1_700_000_000_005, 0)
    assert read_reply([stored], 80, 80, 80)["messages"][0]["bornTimestamp"] == 1_700_000_000_000


def test_a_read_that_meets_a_damaged_record_says_so() -> None:
    """docs/architecture.md §4.7: the messages before it with 200, none with 503; never a 400."""
    from mqha.broker.commitlog.codec import StoredMessage
    from mqha.broker.protocol import read_corrupted_reply
    from mqha.wire.broker_api import MESSAGE_CORRUPTED

    message = StoredMessage(0, 80, "m1", "t", "", {}, b"x", 1, 1, 0)
    status, body = read_corrupted_reply([message], 80, "bad CRC", 500, 600)
    assert status == 200 and body["code"] == 0 and body["status"] == MESSAGE_CORRUPTED
    assert (body["nextOffset"], body["corruptOffset"], len(body["messages"])) == (80, 80, 1)
    status, body = read_corrupted_reply([], 80, "bad CRC", 500, 600, topic="t", queueId=0)
    assert status == 503 and body["code"] == 14 and body["status"] == MESSAGE_CORRUPTED
    assert body["messages"] == [] and body["topic"] == "t" and "offset 80" in body["remark"]


def test_repairs_ask_the_in_sync_replicas_first_the_master_first() -> None:
    from mqha.broker.membership import _repair_order
    from mqha.wire.controller_api import ReplicaIdentity, ReplicasInfo

    def replica(broker_id: int, alive: bool = True) -> ReplicaIdentity:
        return ReplicaIdentity(
            broker_name="b", broker_id=broker_id, broker_address=f"h:{broker_id}", alive=alive
        )

    entry = ReplicasInfo(
        master_broker_id=3,
        in_sync_replicas=(replica(1), replica(3), replica(4, alive=False)),
        not_in_sync_replicas=(replica(2), replica(5, alive=False)),
    )
    assert _repair_order(entry) == ("h:3", "h:1", "h:2")
