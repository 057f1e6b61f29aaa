"""Store identities and how a blank store decides its role (docs/raft.md §10): pure functions and the
``storage.json`` file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.controller.raft import identity as ids
from mqha.controller.raft import storage_file
from mqha.controller.raft.addresses import JOURNAL_FILE_NAME
from mqha.controller.raft.members import StoreNode

ADDRESSES = {"n0": "127.0.0.1:9001", "n1": "127.0.0.1:9011", "n2": "127.0.0.1:9021"}


def _pending(node: str) -> ids.StorageIdentity:
    return ids.pending(node)


def _answer(identity: ids.StorageIdentity, **changes: object) -> ids.PeerAnswer:
    doc = {**identity.to_json(), "raftId": identity.raft_id(ADDRESSES[identity.node_id]), **changes}
    return ids.PeerAnswer.from_json(doc)


def test_a_raft_id_names_the_address_and_the_store() -> None:
    storage = ids.new_storage_id()
    raft_id = ids.raft_id("127.0.0.1:9001", storage)
    assert ids.split_raft_id(raft_id) == ("127.0.0.1:9001", storage)
    node = StoreNode(raft_id)
    assert (node.id, node.address, node.port, node.storage_id) == (raft_id, "127.0.0.1:9001", 9001, storage)
    assert node != StoreNode(ids.raft_id("127.0.0.1:9001", ids.new_storage_id()))  # a new store: a new member


@pytest.mark.parametrize(
    "bad", ["127.0.0.1:9001", "127.0.0.1:9001/xyz", "9001/" + "a" * 32, "h:p/" + "a" * 32, "/" + "a" * 32]
)
def test_malformed_raft_ids_are_refused(bad: str) -> None:
    with pytest.raises(ids.IdentityError):
        ids.split_raft_id(bad)


def test_every_pending_peer_answering_bootstraps_the_same_voter_set_on_every_node() -> None:
    stores = {node: _pending(node) for node in ADDRESSES}
    decisions = []
    for node, identity in stores.items():
        answers = {other: _answer(stores[other]) for other in ADDRESSES if other != node}
        decision = ids.decide_start(identity, ADDRESSES[node], answers)
        assert isinstance(decision, ids.StorageIdentity)
        decisions.append(decision)
    assert {d.role for d in decisions} == {ids.VOTER}
    assert len({(d.cluster_id, d.bootstrap_voters) for d in decisions}) == 1
    assert set(decisions[0].bootstrap_voters) == {s.raft_id(ADDRESSES[n]) for n, s in stores.items()}


def test_a_missing_answer_waits_instead_of_bootstrapping() -> None:
    me, other = _pending("n0"), _pending("n1")
    decision = ids.decide_start(me, ADDRESSES["n0"], {"n1": _answer(other), "n2": None})
    assert isinstance(decision, ids.Wait) and "n2" in decision.reason


def test_a_blank_store_joins_an_existing_cluster_as_an_observer() -> None:
    """The issue's case: B's store was wiped; C (and A) belong to a cluster whose voter set names B's
    old store. B must not come back as a voter."""
    old = {n: _pending(n) for n in ADDRESSES}
    voters = tuple(sorted(s.raft_id(ADDRESSES[n]) for n, s in old.items()))
    cluster = ids.cluster_id_of(voters)
    wiped_b = _pending("n1")
    c = dataclasses.replace(
        old["n2"], role=ids.VOTER, cluster_id=cluster, bootstrap_voters=voters, voters=voters
    )
    decision = ids.decide_start(wiped_b, ADDRESSES["n1"], {"n0": None, "n2": _answer(c)})
    assert isinstance(decision, ids.StorageIdentity)
    assert decision.role == ids.OBSERVER and decision.cluster_id == cluster
    assert decision.storage_id == wiped_b.storage_id  # the new store keeps its own new id


def test_a_node_named_in_the_voter_set_joins_as_a_voter() -> None:
    me = _pending("n0")
    voters = (me.raft_id(ADDRESSES["n0"]),)
    peer = dataclasses.replace(_pending("n1"), role=ids.VOTER, cluster_id="c" * 16, bootstrap_voters=voters)
    decision = ids.decide_start(me, ADDRESSES["n0"], {"n1": _answer(peer, voters=list(voters))})
    assert isinstance(decision, ids.StorageIdentity) and decision.role == ids.VOTER


def test_two_clusters_answering_is_refused() -> None:
    me = _pending("n0")
    a = dataclasses.replace(_pending("n1"), role=ids.VOTER, cluster_id="a" * 16)
    b = dataclasses.replace(_pending("n2"), role=ids.VOTER, cluster_id="b" * 16)
    decision = ids.decide_start(me, ADDRESSES["n0"], {"n1": _answer(a), "n2": _answer(b)})
    assert isinstance(decision, ids.Wait) and "different clusters" in decision.reason


@given(st.lists(st.sampled_from([None, "pending", "cluster"]), min_size=2, max_size=2))
def test_a_blank_store_never_becomes_a_voter_of_a_cluster_that_does_not_name_it(
    kinds: list[str | None],
) -> None:
    me = _pending("n0")
    answers: dict[str, ids.PeerAnswer | None] = {}
    for node, kind in zip(("n1", "n2"), kinds, strict=True):
        peer = _pending(node)
        if kind == "cluster":
            peer = dataclasses.replace(
                peer, role=ids.VOTER, cluster_id="c" * 16, voters=(peer.raft_id(ADDRESSES[node]),)
            )
        answers[node] = None if kind is None else _answer(peer)
    decision = ids.decide_start(me, ADDRESSES["n0"], answers)
    if "cluster" in kinds:
        assert isinstance(decision, ids.StorageIdentity) and decision.role == ids.OBSERVER
    elif None in kinds:
        assert isinstance(decision, ids.Wait)
    else:
        assert isinstance(decision, ids.StorageIdentity) and decision.role == ids.VOTER


def test_storage_json_round_trips_durably_and_refuses_damage(tmp_path: Path) -> None:
    assert storage_file.load(str(tmp_path)) is None  # blank
    identity = dataclasses.replace(_pending("n0"), role=ids.OBSERVER, cluster_id="c" * 16)
    storage_file.save(str(tmp_path), identity)
    assert storage_file.load(str(tmp_path)) == identity
    path = Path(storage_file.storage_file(str(tmp_path)))
    path.write_text(json.dumps({**identity.to_json(), "role": "leader"}))
    with pytest.raises(ids.IdentityError, match="role"):
        storage_file.load(str(tmp_path))
    path.write_text("{torn")
    with pytest.raises(ids.IdentityError):
        storage_file.load(str(tmp_path))


def test_raft_files_without_an_identity_are_not_silently_adopted(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_FILE_NAME).write_bytes(b"\0" * 16)
    with pytest.raises(ids.IdentityError, match="predates storage identities"):
        storage_file.load(str(tmp_path))


def test_a_voter_whose_journal_is_gone_refuses_to_start(tmp_path: Path) -> None:
    """A store that kept storage.json but lost its Raft files forgot its votes: not a voter any more."""
    identity = dataclasses.replace(_pending("n0"), role=ids.VOTER, cluster_id="c" * 16)
    storage_file.save(str(tmp_path), identity)
    with pytest.raises(ids.IdentityError, match="journal is gone"):
        storage_file.load(str(tmp_path))
    (tmp_path / JOURNAL_FILE_NAME).write_bytes(b"\0" * 16)
    assert storage_file.load(str(tmp_path)) == identity
