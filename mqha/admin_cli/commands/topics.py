"""mqadmin's topic commands (updateTopic, deleteTopic, topicList, topicRoute, consumerProgress;
docs/architecture.md §4.5, §6): their controller and broker calls, and RocketMQ's output lines and the
``--json`` shapes. No I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from mqha.admin_cli.commands.calls import Answer, HttpCall

TOPIC_LIST_HEADER = f"{'#Cluster Name':<20}  {'#Topic':<48}  {'#Consumer Group':<48}"
ROUTE_LIST_FORMAT = "{:<45} {:<32} {:<50} {:<10} {:<11} {:<5}"


# Both writes are idempotent on the controller (the last word on a topic's queues wins; deleting an
# absent topic succeeds), so a lost answer may be sent again: not marked ``write``.
def update_topic_call(cluster: str, topic: str, read: int, write: int, perm: int) -> HttpCall:
    body = {
        "clusterName": cluster,
        "topicName": topic,
        "readQueueNums": read,
        "writeQueueNums": write,
        "perm": perm,
    }
    return HttpCall("POST", "/v1/topics/update", body)


def delete_topic_call(cluster: str, topic: str) -> HttpCall:
    return HttpCall("POST", "/v1/topics/delete", {"clusterName": cluster, "topicName": topic})


def topic_list_call() -> HttpCall:
    return HttpCall("GET", "/v1/topics")


def topic_route_call(topic: str) -> HttpCall:
    return HttpCall("GET", f"/v1/topics/route?{urlencode({'topic': topic})}")


def perm_text(perm: int) -> str:
    """RocketMQ's ``PermName.perm2String``: ``R``, ``W``, ``X`` (inherit) or ``-`` each."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def format_update_topic(answer: Answer) -> str:
    """``create topic to <master> success.`` per broker set (its name when it has no master), then
    RocketMQ's ``TopicConfig [...]`` line."""
    p = answer.payload
    masters: Mapping[str, Any] = p.get("masterAddresses") or {}
    lines = [f"create topic to {masters.get(name) or name} success." for name in p.get("brokerNames") or ()]
    lines.append(
        f"TopicConfig [topicName={p.get('topicName')}, readQueueNums={p.get('readQueueNums')}, "
        f"writeQueueNums={p.get('writeQueueNums')}, perm={perm_text(int(p.get('perm') or 0))}, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}]"
    )
    return "\n".join(lines) + "\n"


def update_topic_json(answer: Answer) -> dict[str, Any]:
    p = answer.payload
    keys = ("topicName", "clusterName", "readQueueNums", "writeQueueNums", "perm", "brokerNames")
    return {key: p.get(key) for key in keys}


def format_delete_topic(cluster: str, topic: str) -> str:
    # RocketMQ prints a second line for the name server; mqha has none (the controller is both).
    return f"delete topic [{topic}] from cluster [{cluster}] success.\n"


def topic_list_of(answer: Answer, cluster: str | None) -> list[tuple[str, str]]:
    """(cluster, topic) pairs, sorted; with ``cluster``, only topics with queues in that cluster."""
    p = answer.payload
    clusters: Mapping[str, str] = p.get("clusters") or {}
    queues: Mapping[str, Any] = p.get("topicQueues") or {}
    pairs: set[tuple[str, str]] = set()
    for topic in p.get("topicList") or ():
        for data in queues.get(topic) or ():
            pairs.add((clusters.get(data.get("brokerName"), ""), topic))
        if cluster is None and not queues.get(topic):
            pairs.add(("", topic))
    return sorted(pair for pair in pairs if cluster is None or pair[0] == cluster)


def consumer_groups_of(answer: Answer) -> dict[str, list[str]]:
    """Topic -> the consumer groups the controllers hold offsets of in it."""
    return {topic: list(groups) for topic, groups in (answer.payload.get("consumerGroups") or {}).items()}


def format_topic_list(
    pairs: list[tuple[str, str]], with_cluster: bool, groups: Mapping[str, list[str]] | None = None
) -> str:
    """RocketMQ's topicList: one topic per line; with ``-c`` its header and a row per (cluster, topic,
    consumer group), the group column empty for a topic no group has consumed."""
    if not with_cluster:
        return "".join(f"{topic}\n" for topic in dict.fromkeys(topic for _, topic in pairs))
    rows = [TOPIC_LIST_HEADER]
    for c, topic in pairs:
        for group in (groups or {}).get(topic) or [""]:
            rows.append(f"{c:<20}  {topic:<48}  {group:<48}".rstrip())
    return "\n".join(rows) + "\n"


def topic_list_json(
    pairs: list[tuple[str, str]], groups: Mapping[str, list[str]] | None = None
) -> dict[str, Any]:
    entries = []
    for c, topic in pairs:
        entry: dict[str, Any] = {"clusterName": c or None, "topic": topic}
        if (groups or {}).get(topic):
            entry["consumerGroups"] = list((groups or {})[topic])
        entries.append(entry)
    return {"topics": entries}


def route_json(answer: Answer) -> dict[str, Any]:
    """RocketMQ's ``TopicRouteData`` as JSON (``filterServerTable`` always empty)."""
    p = answer.payload
    return {
        "brokerDatas": list(p.get("brokerDatas") or ()),
        "filterServerTable": {},
        "queueDatas": list(p.get("queueDatas") or ()),
    }


def format_topic_route(answer: Answer, list_format: bool) -> str:
    """RocketMQ's topicRoute: the route as indented JSON, or (``-l``) a row per broker set and a total."""
    route = route_json(answer)
    if not list_format:
        return json.dumps(route, indent=4, sort_keys=True) + "\n"
    datas = {d.get("brokerName"): d for d in route["queueDatas"]}
    lines = [
        ROUTE_LIST_FORMAT.format(
            "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"
        )
    ]
    total_read = total_write = 0
    for broker in sorted(route["brokerDatas"], key=lambda b: (b.get("cluster"), b.get("brokerName"))):
        data = datas.get(broker.get("brokerName")) or {}
        read, write = int(data.get("readQueueNums") or 0), int(data.get("writeQueueNums") or 0)
        total_read, total_write = total_read + read, total_write + write
        addrs = broker.get("brokerAddrs") or {}
        addr_text = "{" + ", ".join(f"{k}={addrs[k]}" for k in sorted(addrs, key=int)) + "}"
        lines.append(
            ROUTE_LIST_FORMAT.format(
                broker.get("cluster"), broker.get("brokerName"), addr_text, read, write, data.get("perm")
            )
        )
    lines.append(
        ROUTE_LIST_FORMAT.format("Total:", len(route["brokerDatas"]), "", total_read, total_write, "")
    )
    return "\n".join(line.rstrip() for line in lines) + "\n"


# ------------------------------------------------------------------------------ consumerProgress

PROGRESS_FORMAT = "{:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {}"
"""RocketMQ's consumerProgress columns that mqha has (no #Inflight, #LastTime: in-flight state is in
the proxies)."""


def consumer_offsets_call(group: str, topic: str | None) -> HttpCall:
    query = {"consumerGroup": group} | ({"topic": topic} if topic else {})
    return HttpCall("GET", f"/v1/consumer-offsets?{urlencode(query)}")


def committed_of(answer: Answer) -> dict[str, dict[str, dict[int, int]]]:
    """The group's committed offsets: topic -> broker set -> queue id -> offset (a queue position)."""
    out: dict[str, dict[str, dict[int, int]]] = {}
    for entry in answer.payload.get("offsets") or ():
        queues = out.setdefault(entry["topic"], {}).setdefault(entry["brokerName"], {})
        queues[int(entry["queueId"])] = int(entry["commitOffset"])
    return out


def queue_stats_call(topic: str, positions: Mapping[int, int]) -> HttpCall:
    """A broker's ``GET /v1/queues``: the topic's queues, with the backlog behind each position."""
    query = {"topic": topic}
    if positions:
        query["consumerOffsets"] = ",".join(f"{q}:{o}" for q, o in sorted(positions.items()))
    return HttpCall("GET", f"/v1/queues?{urlencode(query)}")


def progress_rows(
    topic: str, broker: str, stats: Mapping[str, Any] | None, positions: Mapping[int, int]
) -> list[dict[str, Any]]:
    """One row per queue of ``broker`` that has messages or a committed offset: offsets as message
    counts in the broker's queue index (RocketMQ's are consume-queue indices, also counts), the
    positions (commit-log offsets) beside them. ``stats`` None: the broker set could not be asked."""
    known = {int(q["queueId"]): q for q in (stats or {}).get("queues") or ()}
    rows = []
    for queue_id in sorted(set(known) | set(positions)):
        q = known.get(queue_id, {})
        count = int(q.get("count") or 0)
        pending = int(q.get("pending", count)) if stats is not None else None
        rows.append(
            {
                "topic": topic,
                "brokerName": broker,
                "queueId": queue_id,
                "brokerOffset": count if stats is not None else None,
                "consumerOffset": None if pending is None else count - pending,
                "diff": pending,
                "commitOffset": positions.get(queue_id),
                "maxOffset": q.get("maxOffset"),
            }
        )
    return rows


def format_consumer_progress(rows: list[dict[str, Any]]) -> str:
    """RocketMQ's consumerProgress -g: a row per queue, then ``Consume Diff Total``; a broker set
    that could not be asked shows ``N/A``."""

    def shown(value: Any) -> str:
        return "N/A" if value is None else str(value)

    lines = [
        PROGRESS_FORMAT.format(
            "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff"
        )
    ]
    for row in rows:
        lines.append(
            PROGRESS_FORMAT.format(
                row["topic"],
                row["brokerName"],
                row["queueId"],
                shown(row["brokerOffset"]),
                shown(row["consumerOffset"]),
                shown(row["diff"]),
            )
        )
    total = sum(row["diff"] or 0 for row in rows)
    return "\n".join(lines) + f"\n\nConsume Diff Total: {total}\n"
