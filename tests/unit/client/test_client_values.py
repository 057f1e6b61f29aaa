"""Client cores: reply classification, statuses, controller address parsing (no IO)."""

from __future__ import annotations

import pytest

from mqha.client.producer import _message_json, classify_reply
from mqha.client.results import Message, SendResult, SendStatus
from mqha.client.route import parse_controllers

OK_SINGLE = {
    "code": 0,
    "codeName": "SUCCESS",
    "status": "PUT_OK",
    "offset": 0,
    "size": 90,
    "epoch": 1,
    "msgId": "A",
}
OK_BATCH = {
    "code": 0,
    "status": "PUT_OK",
    "results": [{"status": "PUT_OK", "offset": 0, "size": 9, "msgId": "A"}],
}


@pytest.mark.parametrize(
    ("http", "body", "kind"),
    [
        (200, OK_SINGLE, "done"),
        (200, OK_BATCH, "done"),
        (200, {"status": "FLUSH_SLAVE_TIMEOUT", "offset": 0}, "done"),  # stored, not replicated
        (200, {"status": "FLUSH_DISK_TIMEOUT", "offset": 0}, "done"),
        (503, {"status": "SERVICE_NOT_AVAILABLE", "masterAddress": "127.0.0.1:1"}, "refused"),  # a slave
        (503, {"status": "SERVICE_NOT_AVAILABLE", "remark": "fenced"}, "refused"),
        (503, {"status": "IN_SYNC_REPLICAS_NOT_ENOUGH"}, "refused"),
        (400, {"status": "MESSAGE_ILLEGAL", "remark": "topic"}, "invalid"),
        (413, {"code": 13}, "invalid"),
        (401, {"code": 16, "remark": "wrong username or password"}, "invalid"),  # nothing stored, no retry
        (403, {"code": 16}, "invalid"),
        (500, {"status": "UNKNOWN_ERROR"}, "unknown"),  # the put path may have appended
        (500, None, "unknown"),
        (502, "bad gateway", "unknown"),
        (200, {"status": "SOMETHING_NEW"}, "unknown"),
    ],
)
def test_classify_reply(http: int, body: object, kind: str) -> None:
    assert classify_reply(http, body).kind == kind


def test_refused_and_invalid_replies_name_the_reason() -> None:
    assert classify_reply(503, {"status": "SERVICE_NOT_AVAILABLE", "remark": "slave"}).error == (
        "SERVICE_NOT_AVAILABLE: slave"
    )
    assert classify_reply(400, {"remark": "bad topic"}).error == "MESSAGE_ILLEGAL: bad topic"
    assert classify_reply(401, {"remark": "no"}).error == "NO_PERMISSION: no"


def test_a_user_goes_as_http_basic_credentials_and_none_sends_no_header() -> None:
    from mqha.client import Consumer, Producer, User
    from mqha.security.basic import check_basic

    user = User("alice", "password-1")
    producer = Producer("127.0.0.1:1", "broker-a", user=user)
    consumer = Consumer("127.0.0.1:1", "broker-a", user=user)
    for client in (producer, consumer):
        assert check_basic(client._auth_headers()["Authorization"], [user]) is None
    assert Producer("127.0.0.1:1", "broker-a")._auth_headers() == {}
    assert Consumer("127.0.0.1:1", "broker-a")._auth_headers() == {}


def test_stored_statuses() -> None:
    assert {s for s in SendStatus if s.stored} == {
        SendStatus.PUT_OK,
        SendStatus.FLUSH_DISK_TIMEOUT,
        SendStatus.FLUSH_SLAVE_TIMEOUT,
    }
    assert not SendStatus.UNKNOWN.stored and not SendStatus.FAILED.stored


def test_only_put_ok_is_ok() -> None:
    def result(status: SendStatus) -> SendResult:
        return SendResult("id", status, "broker-a", started_at=1.0, completed_at=1.25)

    assert result(SendStatus.PUT_OK).ok
    assert not result(SendStatus.FLUSH_SLAVE_TIMEOUT).ok
    assert not result(SendStatus.UNKNOWN).ok
    assert result(SendStatus.PUT_OK).latency == 0.25


def test_parse_controllers() -> None:
    assert parse_controllers("127.0.0.1:1; 127.0.0.1:2;;127.0.0.1:1") == ["127.0.0.1:1", "127.0.0.1:2"]
    assert parse_controllers(["http://h:1/", "h:2"]) == ["h:1", "h:2"]
    with pytest.raises(ValueError, match="no controller"):
        parse_controllers(" ; ")


def test_message_json_text_binary_keys_properties() -> None:
    assert _message_json("t", "héllo", "M1", None, None) == {"topic": "t", "msgId": "M1", "body": "héllo"}
    assert _message_json("t", b"abc", "M2", "k", {"a": "b"}) == {
        "topic": "t",
        "msgId": "M2",
        "body": "abc",
        "keys": "k",
        "properties": {"a": "b"},
    }
    assert _message_json("t", b"\xff\x00", "M3", None, None)["bodyBase64"] == "/wA="


def test_message_next_offset_and_text() -> None:
    message = Message("broker-a", offset=100, size=42, msg_id="m", topic="t", body="ü".encode())
    assert message.next_offset == 142
    assert message.text() == "ü"
