"""Raft timing and housekeeping knobs, the ``SyncObjConf`` built from them, and the lease's quorum math.

Pure: builds objects, opens nothing (docs/raft.md §2.6).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pysyncobj import SyncObjConf
from pysyncobj.encryptor import HAS_CRYPTO

from mqha.controller.raft.addresses import split_address, store_paths
from mqha.errors import ConfigError

# PySyncObj caches peer DNS answers for 600 s (P22); ReplicatedLog.start() lowers that to these.
DNS_CACHE_SECONDS = 5.0
DNS_FAIL_CACHE_SECONDS = 1.0


@dataclass(frozen=True)
class RaftTuning:
    """Timing and housekeeping knobs, in seconds (docs/raft.md §2.6). Defaults: the measured fast profile."""

    append_entries_period: float = 0.05  # heartbeat; PySyncObj requires raft_min_timeout > 3x this
    raft_min_timeout: float = 0.2  # election timeout range: failover ~0.2-0.4 s
    raft_max_timeout: float = 0.4
    leader_fallback_timeout: float | None = None  # no majority for this long: step down; None: max timeout
    lease_timeout: float | None = None  # serve only if a majority acked within this; None: raft_min_timeout
    connection_retry_time: float = 0.1  # <= min timeout / 2, or a restarted member forces elections (P7)
    connection_timeout: float = 3.5
    log_compaction_min_entries: int = 5000
    log_compaction_min_time: float = 300.0
    # PySyncObj's split lets each member compact only in 30 % of its third of every
    # log_compaction_min_time: under load the journal grows for minutes and a restarted member stalls
    # its tick (and so its votes) for seconds replaying it. Our snapshot is small; compact on count.
    log_compaction_split: bool = False
    bind_retries: int = 5  # then start() fails instead of retrying forever (P13)
    bind_retry_time: float = 0.5
    barrier_timeout: float = 2.0  # per attempt of the leader's no-op; retried while still leader
    state_digest_interval: float = 10.0  # the serving leader proposes a state digest this often; 0: never
    commands_queue_size: int = 100_000
    max_pending_connections: int = 64  # controllerRaftMaxPendingConnections: unknown incoming connections

    @property
    def effective_leader_fallback_timeout(self) -> float:
        return self.raft_max_timeout if self.leader_fallback_timeout is None else self.leader_fallback_timeout

    @property
    def effective_lease_timeout(self) -> float:
        return self.raft_min_timeout if self.lease_timeout is None else self.lease_timeout

    def validate(self) -> RaftTuning:
        """PySyncObj's own ``validate()`` asserts; we name the offending field instead."""
        checks = [
            ("append_entries_period", self.append_entries_period > 0, "must be > 0"),
            (
                "raft_min_timeout",
                self.raft_min_timeout > 3 * self.append_entries_period,
                "must be > 3 x append_entries_period",
            ),
            ("raft_max_timeout", self.raft_max_timeout > self.raft_min_timeout, "must be > raft_min_timeout"),
            (
                "leader_fallback_timeout",
                self.effective_leader_fallback_timeout > self.append_entries_period,
                "must be > append_entries_period",
            ),
            (
                "lease_timeout",
                self.append_entries_period
                < self.effective_lease_timeout
                <= self.effective_leader_fallback_timeout,
                "must be > append_entries_period and <= leader_fallback_timeout",
            ),
            ("connection_retry_time", self.connection_retry_time >= 0, "must be >= 0"),
            (
                "connection_timeout",
                self.connection_timeout >= self.raft_max_timeout,
                "must be >= raft_max_timeout",
            ),
            ("log_compaction_min_entries", self.log_compaction_min_entries >= 2, "must be >= 2"),
            ("log_compaction_min_time", self.log_compaction_min_time > 0, "must be > 0"),
            ("bind_retries", self.bind_retries > 0, "must be > 0 (0 means retry forever)"),
            ("bind_retry_time", self.bind_retry_time > 0, "must be > 0"),
            ("barrier_timeout", self.barrier_timeout > 0, "must be > 0"),
            ("state_digest_interval", self.state_digest_interval >= 0, "must be >= 0"),
            ("commands_queue_size", self.commands_queue_size > 0, "must be > 0"),
        ]
        for name, ok, message in checks:
            if not ok:
                raise ConfigError(name, f"{message} (got {getattr(self, name)!r})")
        return self


def build_conf(
    self_address: str,
    store_dir: str,
    tuning: RaftTuning,
    *,
    password: str | None = None,
    on_state_changed: Callable[[int, int], None] | None = None,
    on_ready: Callable[[], None] | None = None,
    dynamic_membership: bool = False,
) -> SyncObjConf:
    """The ``SyncObjConf`` of one member. Pure: builds an object, opens nothing. ``dynamic_membership``:
    the voter set lives in the log (members named by raftIds, docs/raft.md §10)."""
    tuning.validate()
    split_address(self_address)
    if password and not HAS_CRYPTO:
        raise ConfigError("controllerRaftPassword", "Raft encryption needs the 'cryptography' package")
    journal_file, dump_file = store_paths(store_dir)
    return SyncObjConf(
        bindAddress=self_address,  # never the library default 0.0.0.0 (P9)
        password=password or None,
        appendEntriesUseBatch=False,  # send at once: ~0.5 ms commits instead of ~100 ms (P1)
        appendEntriesPeriod=tuning.append_entries_period,
        raftMinTimeout=tuning.raft_min_timeout,
        raftMaxTimeout=tuning.raft_max_timeout,
        leaderFallbackTimeout=tuning.effective_leader_fallback_timeout,  # default 30 s (P6)
        connectionRetryTime=tuning.connection_retry_time,
        connectionTimeout=tuning.connection_timeout,
        commandsWaitLeader=False,  # fail fast; callers decide about retries
        commandsQueueSize=tuning.commands_queue_size,
        journalFile=journal_file,
        fullDumpFile=dump_file,  # always with journalFile (P2)
        logCompactionMinEntries=tuning.log_compaction_min_entries,
        logCompactionMinTime=tuning.log_compaction_min_time,
        logCompactionSplit=tuning.log_compaction_split,
        maxBindRetries=tuning.bind_retries,
        bindRetryTime=tuning.bind_retry_time,
        dynamicMembershipChange=dynamic_membership,
        onStateChanged=on_state_changed,
        onReady=on_ready,
    )


def quorum_ack_age(ack_times: list[float], partner_count: int, now: float) -> float | None:
    """Seconds since a majority (us + partners) last acknowledged us, from partners' last ack times.

    None when too few partners ever acked. With no partners the quorum is ourselves: age 0.
    """
    needed = (partner_count + 1) // 2  # partners that, with us, form a majority of partner_count + 1
    if needed == 0:
        return 0.0
    if len(ack_times) < needed:
        return None
    return now - sorted(ack_times, reverse=True)[needed - 1]
