"""Pure helpers of mqha/controller/raft/ (addresses.py, tuning.py): address math, tuning validation,
SyncObjConf, quorum ack age."""

from __future__ import annotations

import pytest
from pysyncobj.encryptor import HAS_CRYPTO

from mqha.controller.raft import (
    RaftTuning,
    api_address_of,
    build_conf,
    quorum_ack_age,
    raft_address_of,
    store_paths,
)
from mqha.errors import ConfigError


def test_raft_port_is_api_port_plus_offset_and_back() -> None:  # docs/architecture.md §3
    assert raft_address_of("127.0.0.1:9878") == "127.0.0.1:9879"
    assert raft_address_of("10.0.0.5:9878", 10) == "10.0.0.5:9888"
    assert api_address_of("127.0.0.1:9879") == "127.0.0.1:9878"
    assert api_address_of(raft_address_of("h:1000", 7), 7) == "h:1000"


@pytest.mark.parametrize("address", ["9878", "host:", ":9878", "host:abc", "host:0", "host:70000"])
def test_malformed_addresses_are_refused(address: str) -> None:
    with pytest.raises(ValueError, match="host:port"):
        raft_address_of(address)


def test_store_paths_are_inside_the_store_dir() -> None:
    assert store_paths("/data/ctl") == ("/data/ctl/raft.journal", "/data/ctl/raft.dump")


def test_default_tuning_is_the_fast_profile_and_valid() -> None:
    tuning = RaftTuning().validate()
    timeouts = (tuning.append_entries_period, tuning.raft_min_timeout, tuning.raft_max_timeout)
    assert timeouts == (0.05, 0.2, 0.4)
    assert tuning.effective_leader_fallback_timeout == 0.4  # near the election timeout, not 30 s
    assert tuning.effective_lease_timeout == 0.2
    assert RaftTuning(leader_fallback_timeout=0.3, lease_timeout=0.25).effective_lease_timeout == 0.25


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"append_entries_period": 0.1}, "raft_min_timeout"),  # min timeout must exceed 3 heartbeats
        ({"raft_max_timeout": 0.2}, "raft_max_timeout"),
        ({"leader_fallback_timeout": 0.04}, "leader_fallback_timeout"),
        ({"lease_timeout": 0.5}, "lease_timeout"),  # longer than the step-down timeout
        ({"lease_timeout": 0.05}, "lease_timeout"),  # no longer than one heartbeat
        ({"connection_timeout": 0.3}, "connection_timeout"),
        ({"log_compaction_min_entries": 1}, "log_compaction_min_entries"),
        ({"bind_retries": 0}, "bind_retries"),  # 0 would mean: retry forever
        ({"barrier_timeout": 0}, "barrier_timeout"),
    ],
)
def test_invalid_tuning_names_the_field(overrides: dict[str, float], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        RaftTuning(**overrides).validate()  # type: ignore[arg-type]
    assert info.value.key == field


def test_conf_follows_the_recommended_settings() -> None:
    conf = build_conf("127.0.0.1:9879", "/data/ctl", RaftTuning(log_compaction_min_entries=50))
    conf.validate()  # PySyncObj's own assertions hold
    assert conf.bindAddress == "127.0.0.1:9879"  # never 0.0.0.0
    assert conf.appendEntriesUseBatch is False
    assert (conf.raftMinTimeout, conf.raftMaxTimeout, conf.leaderFallbackTimeout) == (0.2, 0.4, 0.4)
    assert conf.connectionRetryTime == 0.1
    assert conf.commandsWaitLeader is False
    assert conf.dynamicMembershipChange is False
    assert (conf.journalFile, conf.fullDumpFile) == ("/data/ctl/raft.journal", "/data/ctl/raft.dump")
    assert conf.logCompactionMinEntries == 50
    assert conf.maxBindRetries == 5
    assert conf.password is None


def test_conf_with_password() -> None:
    if HAS_CRYPTO:
        assert build_conf("127.0.0.1:9879", "/d", RaftTuning(), password="s3cret").password == "s3cret"
    else:
        with pytest.raises(ConfigError) as info:
            build_conf("127.0.0.1:9879", "/d", RaftTuning(), password="s3cret")
        assert info.value.key == "controllerRaftPassword"


def test_conf_refuses_a_bad_self_address() -> None:
    with pytest.raises(ValueError):
        build_conf("localhost", "/d", RaftTuning())


@pytest.mark.parametrize(
    ("acks", "partners", "expected"),
    [
        ([9.9, 9.7], 2, 0.1),  # 3 members: the freshest partner ack makes a majority with us
        ([9.7], 2, 0.3),
        ([], 2, None),  # nobody acked yet
        ([9.9, 9.0, 9.8, 9.5], 4, 0.2),  # 5 members: the second freshest
        ([9.9], 4, None),
        ([], 0, 0.0),  # a single-member cluster is its own quorum
    ],
)
def test_quorum_ack_age(acks: list[float], partners: int, expected: float | None) -> None:
    age = quorum_ack_age(acks, partners, now=10.0)
    assert age == (None if expected is None else pytest.approx(expected))
