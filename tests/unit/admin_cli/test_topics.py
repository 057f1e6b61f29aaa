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


def test_consumer_progress_calls_rows_and_lines() -> None:
    assert topics.consumer_offsets_call("g", None).path == "/v1/consumer-offsets?consumerGroup=g"
    assert topics.consumer_offsets_call("g", "t").path == "/v1/consumer-offsets?consumerGroup=g&topic=t"
    assert (
        topics.queue_stats_call("t", {3: 7, 0: 120}).path
        == "/v1/queues?topic=t&consumerOffsets=0%3A120%2C3%3A7"
    )
    committed = topics.committed_of(
        answer(
            {
                "offsets": [
                    {
                        "consumerGroup": "g",
                        "topic": "t",
                        "brokerName": "b1",
                        "queueId": 0,
                        "commitOffset": 120,
                    },
                    {"consumerGroup": "g", "topic": "t", "brokerName": "b1", "queueId": 1, "commitOffset": 0},
                ]
            }
        )
    )
    assert committed == {"t": {"b1": {0: 120, 1: 0}}}
    stats = {
        "queues": [
            {"queueId": 0, "minOffset": 0, "maxOffset": 301, "count": 3, "pending": 1},
            {"queueId": 2, "minOffset": 50, "maxOffset": 51, "count": 1},
        ]
    }
    rows = topics.progress_rows("t", "b1", stats, committed["t"]["b1"])
    assert [(r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"]) for r in rows] == [
        (0, 3, 2, 1),
        (1, 0, 0, 0),  # committed, no message there (yet)
        (2, 1, 0, 1),  # never consumed: all of it is backlog
    ]
    unreachable = topics.progress_rows("t", "b2", None, {0: 5})
    assert unreachable[0]["brokerOffset"] is None and unreachable[0]["diff"] is None
    text = topics.format_consumer_progress(rows + unreachable)
    lines = text.splitlines()
    assert lines[0].split("  ")[0].rstrip() == "#Topic"
    assert [c for c in lines[0].split(" ") if c] == [
        "#Topic",
        "#Broker",
        "Name",
        "#QID",
        "#Broker",
        "Offset",
        "#Consumer",
        "Offset",
        "#Diff",
    ]
    assert lines[1].split() == ["t", "b1", "0", "3", "2", "1"]
    assert lines[4].split() == ["t", "b2", "0", "N/A", "N/A", "N/A"]
    assert lines[-2:] == ["", "Consume Diff Total: 2"]


def test_topic_list_with_consumer_groups() -> None:
    groups = topics.consumer_groups_of(answer({**LIST, "consumerGroups": {"t2": ["g1", "g2"]}}))
    only = topics.topic_list_of(answer(LIST), "c2")
    text = topics.format_topic_list(only, True, groups).splitlines()
    assert [line.split() for line in text[1:]] == [["c2", "t2", "g1"], ["c2", "t2", "g2"]]
    assert topics.topic_list_json(only, groups) == {
        "topics": [{"clusterName": "c2", "topic": "t2", "consumerGroups": ["g1", "g2"]}]
    }
