"""``mqha chaos --config NAME`` (``mqha.chaos.configs``): names, settings, refusals, the soak matrix."""

from __future__ import annotations

import pytest

from mqha.chaos.configs import DEFAULT, MATRIX, parse_config


def test_the_default_is_what_a_run_without_config_uses() -> None:
    config = parse_config(DEFAULT)
    assert (config.flush_disk_type, config.replicas) == ("ASYNC_FLUSH", 3)
    assert config.broker_settings == {"allAckInSyncStateSet": "true", "minInSyncReplicas": "1"}


def test_parts_in_any_order_and_unnamed_ones_default() -> None:
    config = parse_config("r2-isr2-sync")
    assert config.name == "sync-isr2-min1-r2"
    assert config.broker_settings == {
        "allAckInSyncStateSet": "false",
        "minInSyncReplicas": "1",
        "inSyncReplicas": "2",
    }


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("fast", "unknown config part 'fast'"),
        ("isrx", "isr takes a number"),
        ("isr3-r2", "inSyncReplicas 3 exceeds the 2 replicas"),
        ("min3-r2", "minInSyncReplicas 3 exceeds"),
    ],
)
def test_a_bad_name_is_refused_naming_the_part(name: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_config(name)


def test_the_matrix_covers_every_dimension_with_canonical_names() -> None:
    configs = [parse_config(name) for name in MATRIX]
    assert [c.name for c in configs] == list(MATRIX)
    assert {c.flush_disk_type for c in configs} == {"SYNC_FLUSH", "ASYNC_FLUSH"}
    assert {c.all_ack for c in configs} == {True, False}
    assert {c.min_in_sync_replicas for c in configs} == {1, 2}
    assert {c.replicas for c in configs} == {2, 3}
