"""``mqha chaos --flush-disk-type``: the brokers' ``flushDiskType`` per group."""

from __future__ import annotations

import pytest

from mqha.chaos.configs import group_flush_types

GROUPS = ["broker-a", "broker-b", "broker-c"]


def test_one_type_for_every_group_or_both_in_turn() -> None:
    assert group_flush_types("SYNC_FLUSH", GROUPS) == dict.fromkeys(GROUPS, "SYNC_FLUSH")
    assert group_flush_types("ASYNC_FLUSH", GROUPS[:1]) == {"broker-a": "ASYNC_FLUSH"}
    assert group_flush_types("mixed", GROUPS) == {
        "broker-a": "ASYNC_FLUSH",
        "broker-b": "SYNC_FLUSH",
        "broker-c": "ASYNC_FLUSH",
    }
    with pytest.raises(ValueError, match="SYNC_FLUSH"):
        group_flush_types("sync", GROUPS)
