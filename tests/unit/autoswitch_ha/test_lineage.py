"""When a slave may serve reads (docs/architecture.md §4 "Reads on a slave")."""

from hypothesis import given
from hypothesis import strategies as st

from mqha.autoswitch_ha.lineage import Following, slave_read_refusal

A = Following("127.0.0.1:10912", 3)


def test_a_slave_serves_once_verified_against_the_master_it_follows() -> None:
    assert slave_read_refusal(A, A, None) is None
    assert slave_read_refusal(A, A, "an old problem") is None  # verified wins


def test_a_new_master_or_epoch_stops_reads_until_the_next_handshake() -> None:
    for verified in (None, Following("127.0.0.1:10912", 2), Following("127.0.0.1:20912", 3)):
        refusal = slave_read_refusal(A, verified, None)
        assert refusal is not None and "not yet verified" in refusal and "epoch 3" in refusal


def test_a_failed_handshake_is_named() -> None:
    refusal = slave_read_refusal(A, None, "emptying the replica failed: disk I/O error")
    assert refusal is not None and "not consistent" in refusal and "disk I/O error" in refusal


def test_no_master_yet() -> None:
    refusal = slave_read_refusal(Following(None, -1), None, None)
    assert refusal is not None and "no master yet" in refusal


addresses = st.sampled_from([None, "127.0.0.1:1", "127.0.0.1:2"])
followings = st.builds(Following, addresses, st.integers(-1, 3))


@given(following=followings, verified=st.none() | followings, problem=st.none() | st.text(max_size=5))
def test_reads_are_served_exactly_when_verified_against_the_current_master(
    following: Following, verified: Following | None, problem: str | None
) -> None:
    assert (slave_read_refusal(following, verified, problem) is None) is (verified == following)
