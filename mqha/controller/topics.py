"""Topic decisions of the controller (core): updateTopic, deleteTopic, topicList, topicRoute.

(state, request) -> ``ControllerResult``, as ``mqha.controller.operations`` for the broker sets
(docs/architecture.md §4.5). A write names the broker sets it touches (the cluster's sets when it was
decided), so ``apply`` needs no look-up and replays the same anywhere. Reads list registered broker sets
only: a topic keeps its queues for a set that was cleaned, and finds them back when the set registers
again.
"""

from __future__ import annotations

from mqha.codes import ResponseCode
from mqha.controller.records import DeleteTopicRecord, UpdateTopicRecord
from mqha.controller.replies import reject_result, write_result
from mqha.controller.result import ControllerResult
from mqha.controller.state import ControllerState, TopicState
from mqha.wire import controller_api as api
from mqha.wire.controller_api import Reply

__all__ = [
    "handle_delete_topic",
    "handle_topic_list",
    "handle_topic_route",
    "handle_update_topic",
    "no_route_remark",
    "topic_lock_key",
]

SUCCESS = ResponseCode.SUCCESS


def topic_lock_key(topic: str) -> str:
    """The write-path lock of a topic: ``/`` is not a name character, so it never meets a broker set's."""
    return f"topic/{topic}"


def no_route_remark(topic: str) -> str:
    """RocketMQ's TOPIC_NOT_EXIST remark of a route query (the controller stands for the name server)."""
    return f"No topic route info in name server for the topic: {topic}"


def _no_cluster(cluster: str) -> ControllerResult:
    return reject_result(
        ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
        f"no broker set of cluster '{cluster}' is registered with the controller "
        "(make sure the specified clusterName exists)",
    )


def handle_update_topic(state: ControllerState, request: api.UpdateTopicRequest) -> ControllerResult:
    groups = state.groups_of_cluster(request.cluster_name)
    if not groups:
        return _no_cluster(request.cluster_name)
    names = tuple(group.broker_name for group in groups)
    record = UpdateTopicRecord(
        topic_name=request.topic_name,
        broker_names=names,
        read_queue_nums=request.read_queue_nums,
        write_queue_nums=request.write_queue_nums,
        perm=request.perm,
    )
    payload = api.UpdateTopicPayload(
        topic_name=request.topic_name,
        cluster_name=request.cluster_name,
        read_queue_nums=request.read_queue_nums,
        write_queue_nums=request.write_queue_nums,
        perm=request.perm,
        broker_names=names,
        master_addresses={group.broker_name: group.master_address for group in groups},
    )
    return write_result(state, record, Reply(SUCCESS, "", payload))


def handle_delete_topic(state: ControllerState, request: api.DeleteTopicRequest) -> ControllerResult:
    """Removes the topic from the cluster's sets (and from sets no longer registered at all). As in
    RocketMQ, deleting a topic that is not there succeeds; then nothing is written."""
    topic = state.topics.get(request.topic_name)
    in_cluster = {group.broker_name for group in state.groups_of_cluster(request.cluster_name)}
    names = (
        ()
        if topic is None
        else tuple(sorted(name for name in topic.queues if name in in_cluster or state.group(name) is None))
    )
    if not names:
        return ControllerResult.read(Reply(SUCCESS))
    record = DeleteTopicRecord(topic_name=request.topic_name, broker_names=names)
    return write_result(state, record, Reply(SUCCESS))


def _queue_datas(state: ControllerState, topic: TopicState) -> tuple[api.TopicQueueData, ...]:
    return tuple(
        api.TopicQueueData(
            broker_name=name,
            read_queue_nums=queues.read_queue_nums,
            write_queue_nums=queues.write_queue_nums,
            perm=queues.perm,
        )
        for name, queues in sorted(topic.queues.items())
        if state.group(name) is not None
    )


def handle_topic_list(state: ControllerState) -> ControllerResult:
    topics = {name: _queue_datas(state, topic) for name, topic in sorted(state.topics.items())}
    named = {q.broker_name for datas in topics.values() for q in datas}
    clusters = {name: group.cluster_name for name, group in sorted(state.groups.items()) if name in named}
    consumers: dict[str, set[str]] = {}
    for group, topic, _, _ in state.consumer_offsets:
        if topic in topics:
            consumers.setdefault(topic, set()).add(group)
    payload = api.TopicListPayload(
        topic_list=tuple(topics),
        topic_queues=topics,
        clusters=clusters,
        consumer_groups={topic: tuple(sorted(groups)) for topic, groups in sorted(consumers.items())},
    )
    return ControllerResult.read(Reply(SUCCESS, "", payload))


def handle_topic_route(state: ControllerState, request: api.TopicRouteRequest) -> ControllerResult:
    topic = state.topics.get(request.topic)
    datas = () if topic is None else _queue_datas(state, topic)
    if not datas:
        return reject_result(ResponseCode.TOPIC_NOT_EXIST, no_route_remark(request.topic))
    brokers = []
    for data in datas:
        group = state.groups[data.broker_name]
        addrs = {broker_id: info.address for broker_id, info in group.replicas.items()}
        if group.master_broker_id is not None:  # RocketMQ lists the master as id 0
            addrs.pop(group.master_broker_id, None)
            addrs[0] = group.replicas[group.master_broker_id].address
        brokers.append(
            api.TopicBrokerData(cluster=group.cluster_name, broker_name=group.broker_name, broker_addrs=addrs)
        )
    payload = api.TopicRoutePayload(topic=request.topic, broker_datas=tuple(brokers), queue_datas=datas)
    return ControllerResult.read(Reply(SUCCESS, "", payload))
