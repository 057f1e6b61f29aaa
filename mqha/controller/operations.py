"""Controller decisions, one ``handle_*`` per API of docs/reference-behaviour.md §5: (state, request,
liveness, config) -> result.

Nothing here mutates anything. Every check runs in the spec's order and the first failure wins, with
the reference's response code and remark (our own wording where the spec gives none). Writes return
records carrying the epochs they were decided against; the reply of a write is computed by applying
the records to the decision's state and building it from the ``Outcome`` (Kafka's "response from
replay"), with the same ``reply_from_outcome`` the shell uses on the committed outcome, so prediction
and final reply cannot drift apart.

Deviations from the reference applied here (docs/architecture.md §7):
- the first election (masterEpoch 0) still takes the requester as is, but it must be registered;
- the next broker id is ``max(registered ids) + 1``; ids below 1 are refused by ApplyBrokerId;
- a partial clean that names the current master clears it (in ``apply``), so the master is always
  in the SyncStateSet;
- a controller-triggered election without a candidate in a set that never had a master answers 2004
  but writes nothing (the reference bumps masterEpoch to 1, which wedges the set);
- elect replies also carry ``masterHaAddress`` (the master's HA address travels via the controller).

The payload builders and ``reply_from_outcome`` are in ``replies`` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from mqha.codes import ResponseCode
from mqha.controller.broker_claims import Claim, handle_claim, handle_store_claim
from mqha.controller.election import (
    ElectionPolicy,
    ElectionResult,
    Verdict,
    asker,
    attempt_verdict,
    found,
    restart_keeps_master,
)
from mqha.controller.liveness import LivenessView
from mqha.controller.records import (
    AckedDataLost,
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    CleanBrokerDataRecord,
    ElectMasterRecord,
    UpdateBrokerAddressRecord,
)
from mqha.controller.replies import (
    NO_MASTER_ELECT_PAYLOAD,
    alter_payload,
    elect_payload,
    member_group,
    register_payload,
    reject_result,
    replica_info_payload,
    reply_from_outcome,
    write_result,
)
from mqha.controller.result import ControllerResult
from mqha.controller.state import BrokerGroupState, ControllerState
from mqha.wire import controller_api as api
from mqha.wire.controller_api import Reply

__all__ = [
    "NO_MASTER_ELECT_PAYLOAD",
    "alter_payload",
    "elect_payload",
    "handle_alter_sync_state_set",
    "handle_apply_broker_id",
    "handle_clean_broker_data",
    "handle_elect_master",
    "handle_get_next_broker_id",
    "handle_get_replica_info",
    "handle_get_sync_state_data",
    "handle_register_broker",
    "member_group",
    "register_payload",
    "replica_info_payload",
    "replicas_info",
    "reply_from_outcome",
]

Code = ResponseCode
SUCCESS = ResponseCode.SUCCESS
_write, _reject = write_result, reject_result

# --------------------------------------------------------------------------------------------------
# §5.1 GetNextBrokerId — read.


def handle_get_next_broker_id(
    state: ControllerState, request: api.GetNextBrokerIdRequest
) -> ControllerResult:
    group = state.group(request.broker_name)
    next_id = 1 if group is None else group.next_broker_id
    payload = api.NextBrokerIdPayload(
        cluster_name=request.cluster_name, broker_name=request.broker_name, next_broker_id=next_id
    )
    return ControllerResult.read(Reply(SUCCESS, "", payload))


# --------------------------------------------------------------------------------------------------
# §5.2 ApplyBrokerId — write.


def handle_apply_broker_id(state: ControllerState, request: api.ApplyBrokerIdRequest) -> ControllerResult:
    name, broker_id = request.broker_name, request.applied_broker_id
    group = state.group(name)
    if group is None:
        if broker_id != 1:
            return _reject(
                Code.CONTROLLER_BROKER_ID_INVALID,
                f"Broker-set: {name} hasn't been registered in controller, but broker try to apply "
                f"brokerId: {broker_id}",
            )
    else:
        existing = group.replicas.get(broker_id)
        taken = existing is not None and existing.register_check_code != request.register_check_code
        if taken or broker_id < 1:
            return _reject(
                Code.CONTROLLER_BROKER_ID_INVALID,
                f"Fail to apply brokerId: {broker_id} in broker-set: {name}",
            )
    record = ApplyBrokerIdRecord(
        cluster_name=request.cluster_name,
        broker_name=name,
        broker_id=broker_id,
        broker_address=request.broker_address,
        register_check_code=request.register_check_code,
    )
    return _write(state, record, Reply(SUCCESS))


# --------------------------------------------------------------------------------------------------
# §5.3 RegisterBroker — write (only when the address changed).


def handle_register_broker(
    state: ControllerState, request: api.RegisterBrokerRequest, liveness: LivenessView
) -> ControllerResult:
    name, broker_id = request.broker_name, request.broker_id
    group = state.group(name)
    if group is None:
        return _reject(
            Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
            f"Broker-set: {name} hasn't been registered in controller",
        )
    replica = group.replicas.get(broker_id)
    if replica is None:
        return _reject(
            Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
            f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}",
        )
    claim = Claim(name, broker_id, request.broker_address, request.incarnation)
    # Another live process holds the id, or another store applied it (docs/architecture.md §3.2, §9.4).
    refusal = handle_claim(liveness.info(name, broker_id), claim, liveness.now_ms)
    if refusal is None:
        refusal = handle_store_claim(name, broker_id, replica.register_check_code, request.store_id)
    if refusal is not None:
        return ControllerResult.read(refusal)
    master = group.master_broker_id
    master_alive = master is not None and liveness.is_alive(name, master)
    if master == broker_id and not restart_keeps_master(request.lossy_recovery, request.clean_shutdown):
        master_alive = False  # a master back from a crash: its election decides (docs/architecture.md §3.2)
    address_changed = replica.address != request.broker_address
    ha_changed = request.ha_address is not None and replica.ha_address != request.ha_address
    if not (address_changed or ha_changed):
        return ControllerResult.read(Reply(SUCCESS, "", register_payload(group, master_alive)))
    record = UpdateBrokerAddressRecord(
        cluster_name=request.cluster_name,
        broker_name=name,
        broker_id=broker_id,
        broker_address=request.broker_address,
        ha_address=request.ha_address,
    )
    # The draft's payload carries the decision's liveness judgement to ``reply_from_outcome``.
    draft = Reply(
        SUCCESS,
        "",
        api.RegisterBrokerPayload(
            cluster_name=group.cluster_name,
            broker_name=name,
            master_broker_id=master if master_alive else None,
        ),
    )
    return _write(state, record, draft)


# --------------------------------------------------------------------------------------------------
# §5.4 ElectMaster — write.


def handle_elect_master(
    state: ControllerState,
    request: api.ElectMasterRequest,
    liveness: LivenessView,
    policy: ElectionPolicy,
    waited_ms: int | None = None,
) -> ControllerResult:
    """``waited_ms``: how long this set has been waiting for a complete replica (None: it was not;
    docs/architecture.md §3.2). The result carries the policy's decision (``election``)."""
    result, decided = _decide_elect_master(state, request, liveness, policy, waited_ms)
    return decided if result is None else replace(decided, election=result)


def _other_cluster(group: BrokerGroupState, cluster_name: str | None) -> str | None:
    """Why an admin's ``-c`` does not fit the set (None: it fits, or none was given). Deviation: the
    reference ignores the name of electMaster and checks cleanBrokerData's liveness under it (a wrong
    one cleans a living set); mqha refuses another cluster's set (docs/architecture.md §7)."""
    if not cluster_name or cluster_name == group.cluster_name:
        return None
    name, registered = group.broker_name, group.cluster_name
    return f"Broker-set: {name} is registered in cluster {registered}, not in {cluster_name}"


def _decide_elect_master(
    state: ControllerState,
    request: api.ElectMasterRequest,
    liveness: LivenessView,
    policy: ElectionPolicy,
    waited_ms: int | None,
) -> tuple[ElectionResult | None, ControllerResult]:
    name = request.broker_name
    group = state.group(name)
    if group is None:
        return None, _reject(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
    if request.designate_elect and (wrong := _other_cluster(group, request.cluster_name)) is not None:
        return None, _reject(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, wrong)
    requested = request.requested_id
    if group.is_first_election and requested is not None:
        # Reference: the requester wins the first election unchecked. Deviation: it must be registered.
        if not group.is_registered(requested):
            return None, _reject(
                Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"BrokerId: {requested} hasn't been registered in broker-set: {name}",
            )
        result = ElectionResult(requested)
    else:
        # A broker asking to be elected is not a preference; only a designated (admin) election is.
        prefer = requested if request.designate_elect else None
        result = policy.elect(group, liveness, prefer=prefer, waited_ms=waited_ms)

    old_master = group.master_broker_id
    verdict = attempt_verdict(
        found(result, old_master, waited_ms),
        asker(requested, request.designate_elect, old_master),
        master_to_clear=not group.is_first_election and old_master is not None,
    )
    return result, _carry_out(state, group, verdict, result)


def _carry_out(
    state: ControllerState, group: BrokerGroupState, verdict: Verdict, result: ElectionResult
) -> ControllerResult:
    """The records and the answer of an election attempt's verdict (``mqha.controller.election.after``)."""
    name, old_master = group.broker_name, group.master_broker_id
    if verdict is Verdict.REELECT:  # the master asked for itself: it restarted (handle_register_broker)
        return _write(state, _elect_record(group, old_master, result), Reply(SUCCESS))
    if verdict is Verdict.STILL_MASTER:
        return _reject(
            Code.CONTROLLER_MASTER_STILL_EXIST,
            f"The old master {old_master} is still alive, not need to elect new master for broker {name}",
            elect_payload(group, with_member_group=False),
        )
    if verdict is Verdict.ELECT:
        remark = ""
        if result.lost is not None:
            remark = (
                f"acknowledged data lost: offsets [{result.lost[0]}, {result.lost[1]}) of {name} are on no "
                f"live replica; broker {result.broker_id} elected with its log ending at {result.lost[0]}"
            )
        return _write(state, _elect_record(group, result.broker_id, result), Reply(SUCCESS, remark))
    wait = f"; {result.describe_wait()}" if result.waiting else ""
    if verdict is Verdict.REFUSE:
        return _reject(
            Code.CONTROLLER_ELECT_MASTER_FAILED,
            "Failed to elect a new master" + wait,
            NO_MASTER_ELECT_PAYLOAD,
        )
    # Deviation: a set that never had a master has none to clear. The reference still bumps masterEpoch
    # to 1, after which no first election is possible and, with an empty SyncStateSet, no clean election
    # either: the set would be stuck for good.
    no_master = "Old master has down and failed to elect a new broker master"
    if not group.is_first_election:
        no_master += wait
    if verdict is Verdict.HOLD:
        return _reject(Code.CONTROLLER_MASTER_NOT_AVAILABLE, no_master, NO_MASTER_ELECT_PAYLOAD)
    # Controller trigger without a candidate: the master is cleared and the failure reported.
    draft = Reply(Code.CONTROLLER_MASTER_NOT_AVAILABLE, no_master)
    return _write(state, _elect_record(group, None, result), draft)


def _elect_record(
    group: BrokerGroupState, new_master: int | None, result: ElectionResult | None = None
) -> ElectMasterRecord:
    """The election of ``new_master`` (None: the master is cleared), decided against the set's epochs,
    with the decision's watermark and any declared loss (docs/architecture.md §3.2)."""
    lost = None if result is None or result.lost is None else AckedDataLost(*result.lost)
    return ElectMasterRecord(
        cluster_name=group.cluster_name,
        broker_name=group.broker_name,
        new_master_broker_id=new_master,
        expected_master_epoch=group.master_epoch,
        expected_sync_state_set_epoch=group.sync_state_set_epoch,
        unclean=bool(result is not None and result.unclean),
        acked_watermark=-1 if result is None else result.watermark,
        acked_data_lost=lost,
    )


# --------------------------------------------------------------------------------------------------
# §5.5 AlterSyncStateSet — write.


def handle_alter_sync_state_set(
    state: ControllerState, request: api.AlterSyncStateSetRequest, liveness: LivenessView
) -> ControllerResult:
    name = request.broker_name
    new_set = request.sync_state_set
    fail = Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    group = state.group(name)
    if group is None:
        return _reject(fail, "Broker metadata is not existed")
    release = request.release_eligible
    if new_set == group.sync_state_set and not release:
        return _reject(
            fail, "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet"
        )
    if group.master_broker_id is None or group.master_broker_id != request.master_broker_id:
        return _reject(
            Code.CONTROLLER_INVALID_MASTER,
            f"Rejecting alter syncStateSet of {name}: broker {request.master_broker_id} is not the current "
            f"master ({group.master_broker_id})",
        )
    if request.master_epoch != group.master_epoch:
        return _reject(
            Code.CONTROLLER_FENCED_MASTER_EPOCH,
            f"Rejecting alter syncStateSet of {name}: masterEpoch {request.master_epoch} is not the current "
            f"masterEpoch {group.master_epoch}",
        )
    if request.sync_state_set_epoch != group.sync_state_set_epoch:
        return _reject(
            Code.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            f"Rejecting alter syncStateSet of {name}: syncStateSetEpoch {request.sync_state_set_epoch} "
            f"is not the current syncStateSetEpoch {group.sync_state_set_epoch}",
        )
    for broker_id in sorted(new_set):  # ascending, as the reference's HashSet of small Longs
        if not group.is_registered(broker_id):
            return _reject(
                Code.CONTROLLER_INVALID_REPLICAS,
                f"Rejecting alter syncStateSet of {name}: replica {broker_id} is not registered",
            )
        if not liveness.is_alive(name, broker_id):
            return _reject(
                Code.CONTROLLER_BROKER_NOT_ALIVE,
                f"Rejecting alter syncStateSet of {name}: replica {broker_id} is not alive",
            )
    if group.master_broker_id not in new_set:
        return _reject(
            fail,
            f"Rejecting alter syncStateSet of {name}: the new syncStateSet does not contain the master "
            f"{group.master_broker_id}",
        )
    stale = _stale_incarnation(group, new_set, request.member_incarnations, liveness)
    if stale is not None:
        return _reject(Code.CONTROLLER_INVALID_REPLICAS, f"Rejecting alter syncStateSet of {name}: {stale}")
    if release and new_set == group.sync_state_set and not group.eligible_replicas:
        return ControllerResult((), Reply(SUCCESS, "", alter_payload(group)))  # nothing to release: no write
    record = AlterSyncStateSetRecord(
        broker_name=name,
        master_broker_id=group.master_broker_id,
        new_sync_state_set=new_set,
        expected_master_epoch=group.master_epoch,
        expected_sync_state_set_epoch=group.sync_state_set_epoch,
        confirm_offset=request.confirm_offset,
        release_eligible=release,
    )
    return _write(state, record, Reply(SUCCESS))


def _stale_incarnation(
    group: BrokerGroupState,
    new_set: frozenset[int],
    reported: Mapping[int, str] | None,
    liveness: LivenessView,
) -> str | None:
    """Why an expansion names a replica process that is not the one alive now, or None (KIP-903's lesson,
    docs/architecture.md §3.2): each added member must be the incarnation the master saw catch up.

    A master that reports no incarnations at all (``reported`` None: an older broker) is not checked.
    """
    if reported is None:
        return None
    for broker_id in sorted(new_set - group.sync_state_set - {group.master_broker_id}):
        info = liveness.info(group.broker_name, broker_id)
        alive = None if info is None else info.incarnation
        seen = reported.get(broker_id)
        if seen is None and alive is None:
            continue
        if seen != alive:
            return (
                f"replica {broker_id} caught up as incarnation {seen or 'unknown'}, but the replica alive "
                f"now is incarnation {alive or 'unknown'} (it restarted since; it must catch up again)"
            )
    return None


# --------------------------------------------------------------------------------------------------
# §5.6 GetReplicaInfo and §5.7 GetSyncStateData — reads.


def handle_get_replica_info(state: ControllerState, request: api.GetReplicaInfoRequest) -> ControllerResult:
    group = state.group(request.broker_name)
    if group is None:
        return _reject(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
    return ControllerResult.read(Reply(SUCCESS, "", replica_info_payload(group)))


def replicas_info(group: BrokerGroupState, liveness: LivenessView) -> api.ReplicasInfo:
    in_sync: list[api.ReplicaIdentity] = []
    not_in_sync: list[api.ReplicaIdentity] = []
    for broker_id, info in sorted(group.replicas.items()):
        identity = api.ReplicaIdentity(
            broker_name=group.broker_name,
            broker_id=broker_id,
            broker_address=info.address,
            alive=liveness.is_alive(group.broker_name, broker_id),
        )
        (in_sync if broker_id in group.sync_state_set else not_in_sync).append(identity)
    return api.ReplicasInfo(
        master_broker_id=group.master_broker_id,
        master_address=group.master_address,
        master_epoch=group.master_epoch,
        sync_state_set_epoch=group.sync_state_set_epoch,
        in_sync_replicas=tuple(in_sync),
        not_in_sync_replicas=tuple(not_in_sync),
    )


def handle_get_sync_state_data(
    state: ControllerState, request: api.GetSyncStateDataRequest, liveness: LivenessView
) -> ControllerResult:
    names = list(request.broker_names)
    if request.cluster_name is not None:
        names += [group.broker_name for group in state.groups_of_cluster(request.cluster_name)]
    if not names:
        # The reference's processor never sets a code for an empty list.
        return _reject(Code.SYSTEM_ERROR, "not set any response code")
    table = {}
    for name in names:
        group = state.group(name)
        if group is not None:  # unknown names are skipped silently
            table[name] = replicas_info(group, liveness)
    payload = api.SyncStateDataPayload(replicas_info_table=table)
    return ControllerResult.read(Reply(SUCCESS, "", payload))


# --------------------------------------------------------------------------------------------------
# §5.10 CleanBrokerData — write.


def _parse_ids(raw: tuple[int, ...] | str | None) -> tuple[int, ...] | str | None:
    """The ids to clean: a tuple, None when blank, or an error message when malformed."""
    if raw is None:
        return None
    if isinstance(raw, str):
        if not raw.strip():
            return None
        ids = []
        for part in raw.split(";"):
            text = part.strip()
            if not text:
                continue
            try:
                ids.append(int(text, 10))
            except ValueError:
                return f'For input string: "{text}"'
        return tuple(ids) if ids else None
    return tuple(raw) if raw else None


def handle_clean_broker_data(
    state: ControllerState, request: api.CleanBrokerDataRequest, liveness: LivenessView
) -> ControllerResult:
    name = request.broker_name
    invalid = Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    group = state.group(name)
    if group is not None and (wrong := _other_cluster(group, request.cluster_name)) is not None:
        return _reject(invalid, wrong)
    ids: tuple[int, ...] | None = None
    if not request.clean_living_broker:
        parsed = _parse_ids(request.broker_controller_ids_to_clean)
        if parsed is None:
            if group is not None and group.master_broker_id is not None:
                return _reject(invalid, f"Broker {name} is still alive, clean up failure")
        elif isinstance(parsed, str):
            return _reject(
                invalid,
                "Please set the option <brokerControllerIdsToClean> according to the format, "
                f"exception: {parsed}",
            )
        else:
            for broker_id in sorted(set(parsed)):
                if liveness.is_alive(name, broker_id):
                    return _reject(invalid, f"Broker [{name},  {broker_id}] is still alive, clean up failure")
            ids = parsed
    # With cleanLivingBroker the id list is ignored and the whole set goes (docs/reference-behaviour.md §5.10
    # step 2).
    if group is None:
        return _reject(invalid, f"Broker {name} is not existed,clean broker data failure.")
    record = CleanBrokerDataRecord(
        cluster_name=request.cluster_name,
        broker_name=name,
        broker_ids=frozenset(ids) if ids is not None else None,
        expected_master_epoch=group.master_epoch,
        expected_sync_state_set_epoch=group.sync_state_set_epoch,
    )
    return _write(state, record, Reply(SUCCESS))
