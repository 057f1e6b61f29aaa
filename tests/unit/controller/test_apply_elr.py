"""``apply`` and the election rule's replicated state (docs/architecture.md §3.2, §9.6): the ELR and the
acknowledged watermark through every record, their invariants over random histories, and the decoding
of version 1 records and snapshots."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.controller.apply import apply, replay
from mqha.controller.records import (
    AckedDataLost,
    AlterSyncStateSetRecord,
    ApplyBrokerIdRecord,
    CleanBrokerDataRecord,
    ElectMasterRecord,
    Record,
    decode_record,
    encode_record,
)
from mqha.controller.state import BrokerGroupState, ControllerState, ReplicaInfo, decode_state, encode_state

REPLICAS = {b: ReplicaInfo(f"a{b}", None, f"a{b};{b}") for b in (1, 2, 3)}
G = BrokerGroupState("c1", "g1", REPLICAS, 1, 4, frozenset({1, 2, 3}), 7, {}, 100)
S = ControllerState({"g1": G}, applied_index=20)


def after(state: ControllerState, record: Record) -> BrokerGroupState:
    new_state, outcome = apply(state, record, state.applied_index + 1)
    assert outcome.accepted, outcome.remark
    group = new_state.group("g1")
    assert group is not None
    return group


def test_a_shrink_credits_the_removed_members_with_the_confirm_offset() -> None:
    group = after(S, AlterSyncStateSetRecord("g1", 1, frozenset({1}), 4, 7, confirm_offset=150))
    assert (group.eligible_replicas, group.acked_watermark) == ({2: 150, 3: 150}, 150)


def test_a_shrink_without_confirm_offset_credits_the_watermark() -> None:
    group = after(S, AlterSyncStateSetRecord("g1", 1, frozenset({1, 2}), 4, 7))
    assert (group.eligible_replicas, group.acked_watermark) == ({3: 100}, 100)


def test_nothing_known_acknowledged_credits_nobody() -> None:
    state = ControllerState({"g1": replace(G, acked_watermark=-1)}, 20)
    assert after(state, AlterSyncStateSetRecord("g1", 1, frozenset({1}), 4, 7)).eligible_replicas == {}


def test_an_expansion_takes_the_added_members_out_of_the_elr() -> None:
    state = ControllerState(
        {"g1": replace(G, sync_state_set=frozenset({1}), eligible_replicas={2: 90, 3: 80})}, 20
    )
    group = after(state, AlterSyncStateSetRecord("g1", 1, frozenset({1, 2}), 4, 7, confirm_offset=120))
    assert (group.eligible_replicas, group.acked_watermark) == ({3: 80}, 120)


def test_the_watermark_never_goes_down_without_a_declared_loss() -> None:
    group = after(S, AlterSyncStateSetRecord("g1", 1, frozenset({1}), 4, 7, confirm_offset=50))
    assert group.acked_watermark == 100 and group.eligible_replicas == {2: 50, 3: 50}


def test_an_election_releases_the_elr_the_new_master_acknowledges_past_every_credit() -> None:
    # The new master answers puts past every credit as soon as it serves: no member stays eligible
    # (a credit would outlive the acks it stood for), and the first put after a failover waits for no
    # release.
    state = ControllerState({"g1": replace(G, eligible_replicas={4: 90})}, 20)
    group = after(state, ElectMasterRecord("c1", "g1", 2, 4, 7, acked_watermark=130))
    assert (group.master_broker_id, group.sync_state_set) == (2, frozenset({2}))
    assert (group.eligible_replicas, group.acked_watermark) == ({}, 130)


def test_a_declared_loss_resets_the_watermark() -> None:
    state = ControllerState({"g1": replace(G, sync_state_set=frozenset({1}), eligible_replicas={2: 100})}, 20)
    lost = AckedDataLost(60, 100)
    group = after(state, ElectMasterRecord("c1", "g1", 3, 4, 7, acked_watermark=100, acked_data_lost=lost))
    assert (group.master_broker_id, group.acked_watermark, group.eligible_replicas) == (3, 60, {})


def test_clearing_the_master_folds_the_decision_watermark_and_keeps_the_elr() -> None:
    state = ControllerState({"g1": replace(G, eligible_replicas={})}, 20)
    group = after(state, ElectMasterRecord("c1", "g1", None, 4, 7, acked_watermark=170))
    assert (group.master_broker_id, group.sync_state_set, group.acked_watermark) == (
        None,
        G.sync_state_set,
        170,
    )


def test_a_clean_removes_the_ids_from_the_elr() -> None:
    state = ControllerState(
        {"g1": replace(G, sync_state_set=frozenset({1}), eligible_replicas={2: 1, 3: 1})}, 20
    )
    assert after(state, CleanBrokerDataRecord("c1", "g1", frozenset({3}), 4, 7)).eligible_replicas == {2: 1}


# --------------------------------------------------------------------------------------------------
# Invariants over random histories: the ELR holds registered ids outside the SyncStateSet, with credits
# not above the watermark; the watermark only falls by a declared loss.

ids = st.integers(1, 4)


@st.composite
def histories(draw: st.DrawFn) -> list[Record]:
    records: list[Record] = [ApplyBrokerIdRecord("c1", "g1", b, f"a{b}", f"a{b};{b}") for b in (1, 2, 3)]
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["elect", "alter", "clean", "apply"]))
        me, se = draw(st.integers(0, 6)), draw(st.integers(0, 6))  # often fenced, sometimes not
        if kind == "elect":
            lost = draw(st.one_of(st.none(), st.tuples(st.integers(0, 50), st.integers(50, 99))))
            records.append(
                ElectMasterRecord(
                    "c1",
                    "g1",
                    draw(st.one_of(st.none(), ids)),
                    me,
                    se,
                    acked_watermark=draw(st.integers(-1, 99)),
                    acked_data_lost=None if lost is None else AckedDataLost(*lost),
                )
            )
        elif kind == "alter":
            new_set = frozenset(draw(st.sets(ids, min_size=1)))
            confirm = draw(st.one_of(st.none(), st.integers(-1, 99)))
            records.append(AlterSyncStateSetRecord("g1", draw(ids), new_set, me, se, confirm_offset=confirm))
        elif kind == "clean":
            records.append(
                CleanBrokerDataRecord("c1", "g1", frozenset(draw(st.sets(ids, min_size=1))), me, se)
            )
        else:
            b = draw(ids)
            records.append(ApplyBrokerIdRecord("c1", "g1", b, f"a{b}", f"a{b};{b}"))
    return records


@settings(max_examples=300, deadline=None)
@given(histories())
def test_elr_invariants_hold_over_any_history(records: list[Record]) -> None:
    state = ControllerState.empty()
    for index, record in enumerate(records, start=1):
        before = state.group("g1")
        state, _ = apply(state, record, index)
        group = state.group("g1")
        if group is None:
            continue
        assert set(group.eligible_replicas) <= set(group.replicas)
        assert not set(group.eligible_replicas) & group.sync_state_set
        assert all(credit <= group.acked_watermark for credit in group.eligible_replicas.values())
        if before is not None and group.acked_watermark < before.acked_watermark:
            assert isinstance(record, ElectMasterRecord) and record.acked_data_lost is not None
        assert decode_state(encode_state(state)) == state  # the snapshot keeps every field


# --------------------------------------------------------------------------------------------------
# Versions: version 1 records and snapshots still read (journals and dumps written before).


def test_version_1_records_decode_with_the_new_fields_at_their_defaults() -> None:
    elect_v1 = b'{"expectedMasterEpoch":3,"expectedSyncStateSetEpoch":4,"brokerName":"g1","clusterName":"c1",'
    elect_v1 += b'"newMasterBrokerId":2,"record":"ElectMaster","unclean":false,"version":1}'
    record = decode_record(elect_v1)
    assert isinstance(record, ElectMasterRecord)
    assert (record.version, record.acked_watermark, record.acked_data_lost) == (1, -1, None)
    alter_v1 = b'{"brokerName":"g1","expectedMasterEpoch":2,"expectedSyncStateSetEpoch":5,"masterBrokerId":1,'
    alter_v1 += b'"newSyncStateSet":[1,3],"record":"AlterSyncStateSet","version":1}'
    alter = decode_record(alter_v1)
    assert isinstance(alter, AlterSyncStateSetRecord) and (alter.version, alter.confirm_offset) == (1, None)
    # A version 1 journal replays to the reference's state: no ELR, nothing known acknowledged.
    state = replay([ApplyBrokerIdRecord("c1", "g1", b, f"a{b}", f"a{b};{b}") for b in (1, 2, 3)])
    state = replay([record], state, 4)
    group = state.group("g1")
    assert group is not None and (group.eligible_replicas, group.acked_watermark) == ({}, -1)


def test_version_2_records_round_trip() -> None:
    record = ElectMasterRecord("c1", "g1", 2, 3, 4, acked_watermark=9, acked_data_lost=AckedDataLost(5, 9))
    doc = json.loads(encode_record(record))
    assert doc["version"] == 2 and doc["ackedDataLost"] == {"fromOffset": 5, "toOffset": 9}
    assert decode_record(encode_record(record)) == record


def test_a_version_1_snapshot_reads_as_no_elr_and_an_unknown_watermark() -> None:
    doc = json.loads(encode_state(S))
    doc["version"] = 1
    for group in doc["groups"]:
        del group["eligibleReplicas"], group["ackedWatermark"]
    state = decode_state(json.dumps(doc).encode())
    group = state.group("g1")
    assert group is not None and (group.eligible_replicas, group.acked_watermark) == ({}, -1)
    assert json.loads(encode_state(S))["version"] == 2  # no topics: still readable by older controllers


def test_a_release_empties_the_elr_and_keeps_the_set_and_its_epoch() -> None:
    group = replace(G, sync_state_set=frozenset({1, 2}), eligible_replicas={3: 90})
    state = ControllerState({"g1": group}, 20)
    record = AlterSyncStateSetRecord(
        "g1", 1, frozenset({1, 2}), 4, 7, confirm_offset=130, release_eligible=True
    )
    group = after(state, record)
    assert group.eligible_replicas == {} and group.sync_state_set == {1, 2}
    assert (group.sync_state_set_epoch, group.acked_watermark) == (7, 130)


def test_a_release_with_a_shrink_credits_nobody() -> None:
    record = AlterSyncStateSetRecord("g1", 1, frozenset({1}), 4, 7, confirm_offset=150, release_eligible=True)
    group = after(S, record)
    assert (group.eligible_replicas, group.sync_state_set_epoch) == ({}, 8)


def test_a_release_from_a_stale_set_epoch_is_refused() -> None:
    record = AlterSyncStateSetRecord("g1", 1, frozenset({1, 2, 3}), 4, 6, release_eligible=True)
    _, outcome = apply(S, record, S.applied_index + 1)
    assert not outcome.accepted
