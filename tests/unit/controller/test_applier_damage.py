"""``ControllerApplier``: an entry it cannot read stops the member (never a no-op), and members compare
their applied state's digest with the leader's (docs/raft.md §11)."""

from __future__ import annotations

import pytest

from mqha.controller.applier import DIGEST_SCHEME, DIGEST_TAG, DIGESTS_KEPT, ControllerApplier, state_digest
from mqha.controller.raft import DivergedState, UnreadableEntry
from mqha.controller.records import ApplyBrokerIdRecord, NoopRecord, encode_record

REGISTER = encode_record(ApplyBrokerIdRecord("c1", "b1", 1, "127.0.0.1:1", "code-1"))
OTHER = encode_record(ApplyBrokerIdRecord("c1", "b1", 1, "127.0.0.1:2", "code-2"))


@pytest.mark.parametrize(
    "data",
    [b"", b"{", REGISTER.replace(b"{", b"z", 1), b'{"record":"NoSuchRecord","version":1}', b"\xff\xfe"],
    ids=["empty", "brace", "flipped-brace", "unknown-type", "not-utf8"],
)
def test_an_entry_that_is_no_record_raises_and_changes_nothing(data: bytes) -> None:
    applier = ControllerApplier()
    applier.apply(REGISTER, 1)
    before = applier.state
    with pytest.raises(UnreadableEntry, match="not a record this controller can read"):
        applier.apply(data, 2)
    assert applier.state is before  # not applied, not even applied_index


def test_members_with_the_same_state_agree_and_compare() -> None:
    leader, follower = ControllerApplier(), ControllerApplier()
    for index, data in enumerate([REGISTER, None, encode_record(NoopRecord("x")), None, None], start=1):
        record = leader.digest_record() if data is None else data  # None: the leader's next digest
        leader.apply(record, index)
        follower.apply(record, index)
    assert follower.last_digest == leader.last_digest and leader.last_digest is not None
    assert leader.last_digest[0] == 5
    assert follower.digests_compared == leader.digests_compared == 2  # the records at 4 and 5 carried one


def test_a_member_whose_state_differs_stops_at_the_next_digest_claim() -> None:
    leader, follower = ControllerApplier(), ControllerApplier()
    leader.apply(REGISTER, 1)
    follower.apply(OTHER, 1)  # what a flipped bit that still decodes did (issue 45: master 3 -> 2)
    first = leader.digest_record()
    at_2 = state_digest(leader.state)  # the digest record at index 2 notes the state before it
    leader.apply(first, 2)
    follower.apply(first, 2)  # notes its own digest at 2; nothing to compare yet
    claim = leader.digest_record()
    assert claim == encode_record(NoopRecord(f"{DIGEST_TAG} 2 {at_2} {DIGEST_SCHEME}"))
    before = follower.state
    with pytest.raises(DivergedState, match="before raft index 2 differs from the leader's"):
        follower.apply(claim, 3)
    assert follower.state is before
    leader.apply(claim, 3)  # the leader agrees with itself


def test_only_the_last_digests_are_kept_and_a_restore_forgets_them() -> None:
    applier = ControllerApplier()
    for index in range(1, DIGESTS_KEPT + 5):
        applier.apply(applier.digest_record(), index)
    assert len(applier._digests) == DIGESTS_KEPT
    assert applier.last_digest is not None
    applier.restore(applier.snapshot())
    assert applier.last_digest is None and not applier._digests
    compared = applier.digests_compared
    # a claim about an index this member has no digest for is not compared (it restored since)
    applier.apply(encode_record(NoopRecord(f"{DIGEST_TAG} 3 0123 {DIGEST_SCHEME}")), 40)
    assert applier.digests_compared == compared


@pytest.mark.parametrize(
    "tag",
    [
        DIGEST_TAG,
        f"{DIGEST_TAG} x y {DIGEST_SCHEME}",
        f"{DIGEST_TAG} 1",
        "leader-barrier",
        f"{DIGEST_TAG} 1 ff",
    ],
)
def test_tags_without_a_claim_compare_nothing(tag: str) -> None:
    applier = ControllerApplier()
    applier.apply(encode_record(NoopRecord(tag)), 1)
    assert applier.digests_compared == 0


def test_a_claim_of_another_encoding_scheme_is_not_compared() -> None:
    """A rolling upgrade that changes how states encode must not look like divergence."""
    applier = ControllerApplier()
    applier.apply(applier.digest_record(), 1)
    applier.apply(encode_record(NoopRecord(f"{DIGEST_TAG} 1 0000 s999")), 2)  # differs, other scheme
    assert applier.digests_compared == 0 and applier.last_digest is not None
    applier.apply(encode_record(NoopRecord(f"{DIGEST_TAG} 1 {applier._digests[1]} {DIGEST_SCHEME}")), 3)
    assert applier.digests_compared == 1
