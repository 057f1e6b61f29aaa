"""Consumer groups' committed queue positions in the controllers' replicated state (core;
docs/architecture.md §4.5, §13).

mqproxy hands messages out POP style and keeps what is in flight in its memory; what a consumer group
has acknowledged -- per (consumer group, topic, broker set, queue) the position below which every
message is acknowledged -- it commits here, batched, so it survives a proxy restart and a second proxy
starts where the first left off (RocketMQ keeps it in each broker's ``consumerOffset.json``; mqha's
controllers are the one replicated store the proxies share).

The merge rule is ``ControllerState.raised_offsets``: an offset only rises. So an update that raises
nothing writes nothing (a proxy sends the positions it has in use each period; only the raised ones
cost a Raft entry), and the reply is every named queue's offset as the state then holds it -- which
may be above what the caller sent, when another proxy serving the group got further.
"""

from __future__ import annotations

from mqha.codes import ResponseCode
from mqha.controller.records import ConsumerOffsetEntry, UpdateConsumerOffsetRecord
from mqha.controller.replies import write_result
from mqha.controller.result import ControllerResult
from mqha.controller.state import ControllerState, OffsetKey
from mqha.wire import offsets_api
from mqha.wire.controller_api import Reply

__all__ = [
    "CONSUMER_OFFSETS_LOCK_KEY",
    "handle_query_consumer_offset",
    "handle_update_consumer_offset",
]

CONSUMER_OFFSETS_LOCK_KEY = "consumer-offsets/"
"""The write-path lock of offset updates (``/`` is not a name character: it meets no broker set's).
One for all: an update is one Raft entry whatever it names, and the merge needs no ordering."""


def _data(key: OffsetKey, offset: int) -> offsets_api.ConsumerOffsetData:
    group, topic, broker, queue_id = key
    return offsets_api.ConsumerOffsetData(
        consumer_group=group, topic=topic, broker_name=broker, queue_id=queue_id, commit_offset=offset
    )


def handle_update_consumer_offset(
    state: ControllerState, request: offsets_api.UpdateConsumerOffsetRequest
) -> ControllerResult:
    raised = state.raised_offsets((entry.key, entry.commit_offset) for entry in request.offsets)
    named = dict.fromkeys(entry.key for entry in request.offsets)
    after = {key: raised.get(key, state.consumer_offsets.get(key)) for key in named}
    payload = offsets_api.ConsumerOffsetsPayload(
        offsets=tuple(_data(key, offset) for key, offset in sorted(after.items()) if offset is not None)
    )
    reply = Reply(ResponseCode.SUCCESS, "", payload)
    if not raised:
        return ControllerResult.read(reply)
    record = UpdateConsumerOffsetRecord(
        offsets=tuple(ConsumerOffsetEntry(*key, offset) for key, offset in sorted(raised.items()))
    )
    return write_result(state, record, reply)


def handle_query_consumer_offset(
    state: ControllerState, request: offsets_api.QueryConsumerOffsetRequest
) -> ControllerResult:
    found = sorted(
        (key, offset)
        for key, offset in state.consumer_offsets.items()
        if key[0] == request.consumer_group and (request.topic is None or key[1] == request.topic)
    )
    payload = offsets_api.ConsumerOffsetsPayload(offsets=tuple(_data(key, offset) for key, offset in found))
    return ControllerResult.read(Reply(ResponseCode.SUCCESS, "", payload))
