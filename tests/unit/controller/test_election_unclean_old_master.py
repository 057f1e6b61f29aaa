"""An old master back from an unclean restart is not re-elected over an in-sync replica that holds
more (found by mqha.sim, seeds 67 and 328: under ASYNC_FLUSH its power cut took acknowledged messages
the slave held; the watermark, a heartbeat old, did not cover them, its confirm checkpoint lagged, and
re-electing it made the slave truncate them)."""

from __future__ import annotations

from mqha.codes import ResponseCode
from mqha.controller import operations as ops
from mqha.controller.apply import replay
from mqha.controller.election import ElectionPolicy
from mqha.controller.liveness import BrokerLiveInfo, LivenessSnapshot
from mqha.controller.records import (
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    ElectMasterRecord,
    UpdateBrokerAddressRecord,
)
from mqha.wire.controller_api import ElectMasterPayload, ElectMasterRequest

NAME = "broker-a"


def _state():  # type: ignore[no-untyped-def]
    records = []
    for broker_id in (1, 2):
        addr = f"b{broker_id}:10911"
        records.append(ApplyBrokerIdRecord("c", NAME, broker_id, addr, f"{addr};1;s{broker_id}"))
        records.append(UpdateBrokerAddressRecord("c", NAME, broker_id, addr, f"b{broker_id}:10912"))
    records.append(ElectMasterRecord("c", NAME, 1, 0, 0))
    records.append(AlterSyncStateSetRecord(NAME, 1, frozenset({1, 2}), 1, 1))
    return replay(records)


def _info(broker_id: int, max_offset: int, clean: bool) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        "c",
        NAME,
        broker_id,
        f"b{broker_id}:10911",
        epoch=1,
        max_offset=max_offset,
        last_seen_ms=1_000,
        incarnation=f"{broker_id:032x}",
        clean_shutdown=clean,
    )


def _elect(old_master_clean: bool) -> int | None:
    state = _state()
    live = LivenessSnapshot.of(1_000, [_info(1, 24, old_master_clean), _info(2, 40, True)])
    request = ElectMasterRequest(broker_name=NAME, broker_id=1)  # the old master asks, as it restarted
    result = ops.handle_elect_master(state, request, live, ElectionPolicy())
    assert result.reply.code == ResponseCode.SUCCESS, result.reply
    payload = result.reply.payload
    assert isinstance(payload, ElectMasterPayload)
    return payload.master_broker_id


def test_an_uncleanly_restarted_master_that_lost_a_tail_gives_way() -> None:
    assert _elect(old_master_clean=False) == 2


def test_a_cleanly_restarted_master_is_re_elected() -> None:
    assert _elect(old_master_clean=True) == 1
