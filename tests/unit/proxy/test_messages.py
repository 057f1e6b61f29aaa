"""v2 messages <-> mqha's put and read bodies (mqha.proxy.messages): what a client sends is stored
faithfully, comes back the way the official clients check it, and what mqha cannot store is refused
with the v2 code a client understands."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.proxy.messages import (
    BORN_HOST,
    QUEUE_ID,
    TAGS,
    MessageRefused,
    StoredView,
    put_fields,
    v2_message,
)
from mqha.proxy.v2 import definition as d

MAX_BODY = 4 * 1024 * 1024


def message(**system: Any) -> Any:
    out = d.Message()
    out.topic.name = system.pop("topic", "TopicTest")
    out.body = system.pop("body", b"hello")
    for name, value in system.pop("user", {}).items():
        out.user_properties[name] = value
    props = out.system_properties
    props.message_id = system.pop("message_id", "0102FC0000000000000000000001")
    props.keys.extend(system.pop("keys", []))
    for name, value in system.items():
        if name == "born_ms":
            props.born_timestamp.FromMilliseconds(value)
        else:
            setattr(props, name, value)
    return out


def stored_json(fields: Any, *, offset: int = 100, store_ts: int = 1_700_000_000_500) -> dict[str, Any]:
    """What the broker's read API answers for a message put with ``fields`` (§8.4)."""
    item: dict[str, Any] = {
        "offset": offset,
        "size": 200,
        "msgId": fields.msg_id,
        "topic": fields.topic,
        "storeTimestamp": store_ts,
        "bornTimestamp": store_ts if fields.born_timestamp is None else fields.born_timestamp,
        "properties": fields.properties,
    }
    try:
        item["body"] = fields.body.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        item["body"] = None
        item["bodyBase64"] = base64.b64encode(fields.body).decode()
    if fields.keys:
        item["keys"] = fields.keys
    return item


def test_every_field_a_client_sets_is_stored_and_comes_back() -> None:
    sent = message(
        keys=["k1", "order-1"],
        tag="TagA",
        born_host="10.0.0.7",
        born_ms=1_700_000_000_000,
        message_type=d.MessageType.NORMAL,
        user={"seq": "1", "région": "é"},
    )
    fields = put_fields(sent, 3, MAX_BODY)
    assert (fields.topic, fields.body, fields.msg_id) == (
        "TopicTest",
        b"hello",
        "0102FC0000000000000000000001",
    )
    assert fields.keys == "k1 order-1" and fields.born_timestamp == 1_700_000_000_000
    assert fields.properties == {
        "seq": "1",
        "région": "é",
        TAGS: "TagA",
        BORN_HOST: "10.0.0.7",
        QUEUE_ID: "3",
    }

    view = StoredView.from_json(stored_json(fields))
    assert view.queue_id == 3
    back = v2_message(view, queue_offset=7, store_host="127.0.0.1:9000")
    props = back.system_properties
    assert back.topic.name == "TopicTest" and back.body == b"hello"
    assert dict(back.user_properties) == {"seq": "1", "région": "é"}
    assert props.message_id == sent.system_properties.message_id and props.tag == "TagA"
    assert list(props.keys) == ["k1", "order-1"] and props.born_host == "10.0.0.7"
    assert props.born_timestamp.ToMilliseconds() == 1_700_000_000_000
    assert props.store_timestamp.ToMilliseconds() == 1_700_000_000_500
    assert (props.queue_id, props.queue_offset, props.store_host) == (3, 7, "127.0.0.1:9000")
    assert props.body_encoding == d.Encoding.IDENTITY and props.message_type == d.MessageType.NORMAL
    # MD5 in upper-case hex: the one digest Java, Python and Node all check alike.
    assert props.body_digest.type == d.DigestType.MD5
    assert props.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()


def test_a_record_of_mqhas_own_client_reads_as_queue_0_born_when_stored() -> None:
    view = StoredView.from_json(
        {"offset": 0, "size": 90, "msgId": "ABC", "topic": "orders", "body": "x", "storeTimestamp": 5}
    )
    back = v2_message(view, queue_offset=0)
    assert back.system_properties.queue_id == 0 and not back.system_properties.HasField("tag")
    assert back.system_properties.born_timestamp.ToMilliseconds() == 5 and not back.user_properties


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"topic": "bad topic"}, d.Code.ILLEGAL_TOPIC),
        ({"message_id": ""}, d.Code.ILLEGAL_MESSAGE_ID),
        ({"message_id": "é"}, d.Code.ILLEGAL_MESSAGE_ID),
        ({"body": b""}, d.Code.MESSAGE_BODY_EMPTY),
        ({"body": b"x" * 11}, d.Code.MESSAGE_BODY_TOO_LARGE),
        ({"keys": ["two words"]}, d.Code.ILLEGAL_MESSAGE_KEY),
        ({"keys": ["a\x01b"]}, d.Code.ILLEGAL_MESSAGE_KEY),
        ({"tag": "a|b"}, d.Code.ILLEGAL_MESSAGE_TAG),
        ({"tag": ""}, d.Code.ILLEGAL_MESSAGE_TAG),
        ({"user": {TAGS: "x"}}, d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({"user": {QUEUE_ID: "1"}}, d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({"user": {"a": "b\x02c"}}, d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({"message_type": d.MessageType.FIFO}, d.Code.UNSUPPORTED),
        ({"message_type": d.MessageType.TRANSACTION}, d.Code.UNSUPPORTED),
        ({"message_group": "g"}, d.Code.UNSUPPORTED),
    ],
)
def test_what_mqha_cannot_store_faithfully_is_refused_with_a_v2_code(
    change: dict[str, Any], code: int
) -> None:
    with pytest.raises(MessageRefused) as refused:
        put_fields(message(**change), 0, 10)
    assert refused.value.code == code and str(refused.value)


def test_no_born_timestamp_leaves_it_to_the_store() -> None:
    assert put_fields(message(), 0, MAX_BODY).born_timestamp is None


@given(
    body=st.binary(min_size=1, max_size=64),
    tag=st.text(st.characters(blacklist_characters="|\x01\x02", blacklist_categories=("Cs",)), min_size=1),
    user=st.dictionaries(
        st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1),
        st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",))),
        max_size=4,
    ).filter(lambda props: not {TAGS, BORN_HOST, QUEUE_ID, "KEYS", "UNIQ_KEY"} & set(props)),
    queue=st.integers(0, 1023),
)
def test_round_trip_of_any_body_tag_and_properties(
    body: bytes, tag: str, user: dict[str, str], queue: int
) -> None:
    fields = put_fields(message(body=body, tag=tag, user=user), queue, MAX_BODY)
    back = v2_message(StoredView.from_json(stored_json(fields)), queue_offset=0)
    assert back.body == body and back.system_properties.tag == tag
    assert dict(back.user_properties) == user and back.system_properties.queue_id == queue
