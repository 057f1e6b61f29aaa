"""mqadmin's topic commands (mqha.admin_cli.commands.topics): their calls and RocketMQ's lines."""

from __future__ import annotations

import json

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import topics
from mqha.admin_cli.commands.calls import Answer

LEADER = "127.0.0.1:9878"


def answer(payload: dict) -> Answer:
    return core.answer_from_http(LEADER, 200, {"code": 0, "codeName": "SUCCESS", "remark": "", **payload})


def test_calls() -> None:
    call = topics.update_topic_call("c1", "t", 8, 2, 6)
    assert (call.method, call.path) == ("POST", "/v1/topics/update")
    assert call.body == {
        "clusterName": "c1",
        "topicName": "t",
        "readQueueNums": 8,
        "writeQueueNums": 2,
        "perm": 6,
    }
    assert topics.delete_topic_call("c1", "t").body == {"clusterName": "c1", "topicName": "t"}
    assert topics.topic_route_call("a%b").path == "/v1/topics/route?topic=a%25b"
    assert topics.topic_list_call().path == "/v1/topics"


def test_options_parse() -> None:
    parser = core.build_parser(core.COMMANDS["updateTopic"])
    args = parser.parse_args(["-a", LEADER, "-c", "c1", "-t", "t", "-w", "2"])
    assert (args.clusterName, args.topic, args.readQueueNums, args.writeQueueNums, args.perm) == (
        "c1",
        "t",
        None,
        2,
        None,
    )


def test_update_topic_prints_rocketmqs_lines() -> None:
    reply = answer(
        {
            "topicName": "t",
            "clusterName": "c1",
            "readQueueNums": 8,
            "writeQueueNums": 2,
            "perm": 6,
            "brokerNames": ["a", "b"],
            "masterAddresses": {"a": "10.0.0.1:10911", "b": None},
        }
    )
    assert topics.format_update_topic(reply) == (
        "create topic to 10.0.0.1:10911 success.\n"
        "create topic to b success.\n"
        "TopicConfig [topicName=t, readQueueNums=8, writeQueueNums=2, perm=RW-, topicFilterType=SINGLE_TAG, "
        "topicSysFlag=0, order=false, attributes={}]\n"
    )
    assert [topics.perm_text(p) for p in (2, 4, 6, 7, 0)] == ["-W-", "R--", "RW-", "RWX", "---"]


def test_delete_topic_line() -> None:
    assert topics.format_delete_topic("c1", "t") == "delete topic [t] from cluster [c1] success.\n"


LIST = {
    "topicList": ["t1", "t2"],
    "topicQueues": {
        "t1": [{"brokerName": "a", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}],
        "t2": [{"brokerName": "x", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}],
    },
    "clusters": {"a": "c1", "x": "c2"},
}


def test_topic_list_one_per_line_or_rocketmqs_columns_with_c() -> None:
    pairs = topics.topic_list_of(answer(LIST), None)
    assert topics.format_topic_list(pairs, False) == "t1\nt2\n"
    only = topics.topic_list_of(answer(LIST), "c2")
    assert only == [("c2", "t2")]
    text = topics.format_topic_list(only, True).splitlines()
    assert text[0] == f"{'#Cluster Name':<20}  {'#Topic':<48}  {'#Consumer Group':<48}"
    assert text[1].split() == ["c2", "t2"]
    assert topics.topic_list_json(only) == {"topics": [{"clusterName": "c2", "topic": "t2"}]}


ROUTE = {
    "topic": "t",
    "brokerDatas": [{"cluster": "c1", "brokerName": "a", "brokerAddrs": {"0": "h:1", "2": "h:2"}}],
    "queueDatas": [
        {"brokerName": "a", "readQueueNums": 8, "writeQueueNums": 2, "perm": 6, "topicSysFlag": 0}
    ],
}


def test_topic_route_as_json_and_as_a_list() -> None:
    doc = json.loads(topics.format_topic_route(answer(ROUTE), False))
    assert doc == {
        "brokerDatas": ROUTE["brokerDatas"],
        "filterServerTable": {},
        "queueDatas": ROUTE["queueDatas"],
    }
    lines = topics.format_topic_route(answer(ROUTE), True).splitlines()
    assert lines[0].split() == [
        "#ClusterName",
        "#BrokerName",
        "#BrokerAddrs",
        "#ReadQueue",
        "#WriteQueue",
        "#Perm",
    ]
    assert lines[1].split() == ["c1", "a", "{0=h:1,", "2=h:2}", "8", "2", "6"]
    assert lines[2].split() == ["Total:", "1", "8", "2"]
