"""Whom to elect: the master election policy (docs/reference-behaviour.md §6), with a total order
instead of a collapsing sorted set, and the completeness rule of docs/architecture.md §3.2 (KIP-966's
Eligible Leader Replicas).

The watermark ``W`` is the highest offset the decision knows was acknowledged: the set's replicated
``acked_watermark``, the current master's last heartbeat confirm offset (soft) and every alive
replica's confirm offset before recovery (soft, until the set's masterEpoch moves on). A candidate is
*complete* when it is alive and either a SyncStateSet member still in the process (incarnation) it
joined with (it holds whatever the set acknowledged; its heartbeat's maxOffset may just be older than
the master's last ack point) or its reported maxOffset is at least ``W``.

Strategy, per candidate pool -- the SyncStateSet, then the ELR (replicas that left the SyncStateSet
holding everything acknowledged up to a credited offset), then (only when unclean election is enabled)
every registered replica:

1. keep the candidates that are alive and complete; none -> this pool yields nothing;
2. the old master, if it is among them;
3. otherwise the best by the total order of docs/architecture.md §7: epoch desc, maxOffset desc,
   electionPriority asc, brokerId asc. A candidate without heartbeat info ranks as the
   docs/reference-behaviour.md §7.1 defaults (epoch -1, maxOffset -1, priority Integer.MAX_VALUE).

No complete candidate in any pool, but someone alive who could be elected: if a SyncStateSet member,
or an ELR member credited with at least ``W``, is not alive it might be complete, and the set *waits*
for it (no election) until
``uncleanRecoveryTimeoutMills`` have passed since the first attempt that had to wait (-1: until an
operator forces one); it also waits for every other replica that is down (it may hold more on its
disk than all alive candidates, and a declared loss is final). After that, or when there is nobody to
wait for, the most advanced log (the same total order) among the alive SyncStateSet and ELR members
and, when one of them is alive, every other alive replica (with unclean election: every alive
replica) is elected, and ``[its maxOffset, W)`` is declared lost: gone from every replica.

A designated election (admin ``electMaster -b``) is obeyed at once: the designated broker, if alive in
one of the pools (there is no fallback to another broker), whatever it holds; any loss is declared the
same way.

The reference ranks with a sorted set (equal candidates collapse, the survivor depends on insertion
order) and narrows the offset gap to 32 bits; the explicit final tie-break on broker id and Python's
unbounded ints make the result a pure function of the inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mqha.controller.liveness import BrokerLiveInfo
from mqha.controller.state import FrozenMap
from mqha.wire.controller_api import INT32_MAX

WAIT_FOREVER = -1
"""``uncleanRecoveryTimeoutMills = -1``: wait until an operator forces an election."""


@dataclass(frozen=True)
class ElectionResult:
    """The outcome of one election decision.

    ``broker_id`` is the chosen broker (None: no candidate, or the set waits: ``waiting_for`` names the
    replicas it waits for). ``unclean``: the new master came from outside the SyncStateSet and ELR.
    ``watermark``: the decision's ``W``. ``lost``: ``(fromOffset, toOffset)`` of acknowledged data the
    new master lacks and no live replica holds, declared lost. ``incomplete``: alive candidates skipped
    because they lack acknowledged data (with ``reports``: the members that have reported).
    """

    broker_id: int | None
    unclean: bool = False
    watermark: int = -1
    lost: tuple[int, int] | None = None
    waiting_for: tuple[int, ...] = ()
    incomplete: tuple[int, ...] = field(default=())
    reports: bool = False
    """The set waits for fresh reports of alive members (``waiting_for``), not for replicas to come back."""

    @property
    def waiting(self) -> bool:
        return bool(self.waiting_for)

    def describe_wait(self) -> str:
        """The remark of an election that waits."""
        who = ", ".join(str(b) for b in self.waiting_for)
        short = ", ".join(str(b) for b in self.incomplete) or "none"
        if self.reports:
            return (
                f"waiting for the SyncStateSet members' reports since the master was lost (acknowledgements "
                f"by count): broker(s) {who}; reported: {short}"
            )
        return (
            f"waiting for a replica that holds every acknowledged message (up to offset {self.watermark}): "
            f"broker(s) {who} not alive; alive but incomplete: {short}"
        )


NO_CANDIDATE = ElectionResult(None)


def rank_key(broker_id: int, info: BrokerLiveInfo | None) -> tuple[int, int, int, int]:
    """Sort key: smaller is better (epoch desc, maxOffset desc, priority asc, id asc)."""
    if info is None:
        return (1, 1, INT32_MAX, broker_id)
    return (-info.epoch, -info.max_offset, info.election_priority, broker_id)


def _max_offset(info: BrokerLiveInfo | None) -> int:
    return -1 if info is None else info.max_offset


def _should_wait(waited_ms: int | None, timeout_ms: int) -> bool:
    """Wait while the timeout has not passed since the first attempt that had to wait (None: this one)."""
    if timeout_ms == WAIT_FOREVER:
        return True
    if timeout_ms <= 0:
        return False
    return (waited_ms or 0) < timeout_ms


@dataclass(frozen=True)
class ElectionInputs:
    """Everything one election decision looks at, as plain values: no clock, no IO, no callbacks.

    ``ElectionPolicy.inputs`` gathers it from the replicated state and a liveness view; a test or a
    simulator can build it by hand.
    """

    sync_state_set: frozenset[int]
    replicas: frozenset[int] = frozenset()
    """Every registered replica of the set (a loss that must be declared is made as small as they allow)."""
    alive: frozenset[int] = frozenset()
    """The replicas alive in this node's heartbeat table."""
    reports: Mapping[int, BrokerLiveInfo] = field(default_factory=FrozenMap)
    """The last heartbeat of each replica this node has one of (alive or not)."""
    old_master: int | None = None
    prefer: int | None = None
    """A designated (admin) election's broker: obeyed at once or not at all."""
    unclean: bool = False
    """``enableElectUncleanMaster``: every replica is a last pool."""
    eligible: Mapping[int, int] = field(default_factory=FrozenMap)
    """The ELR: broker id -> credited offset."""
    watermark: int = -1
    """``W``: the highest offset known acknowledged (``election_watermark``)."""
    waited_ms: int | None = None
    """How long the set has been waiting for a complete replica (None: it was not)."""
    wait_timeout_ms: int = 0
    """``uncleanRecoveryTimeoutMills``."""
    joined_as: Mapping[int, str] = field(default_factory=FrozenMap)
    """The incarnation with which each SyncStateSet member joined (soft; absent: unknown)."""
    acks_needed: int | None = None
    """``inSyncReplicas`` N >= 2 of a set that acknowledges by count (None: every member acks)."""
    fresh_since_ms: int = 0
    """By count: a report from a broker that does not say its known masterEpoch counts from here on."""
    fence_epoch: int | None = None
    """By count: the cleared masterEpoch its members report from behind (None: no fence yet)."""

    def __post_init__(self) -> None:
        for name in ("sync_state_set", "replicas", "alive"):
            if not isinstance(getattr(self, name), frozenset):
                object.__setattr__(self, name, frozenset(getattr(self, name)))
        for name in ("reports", "eligible", "joined_as"):
            if not isinstance(getattr(self, name), FrozenMap):
                object.__setattr__(self, name, FrozenMap(getattr(self, name)))

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.alive

    def info(self, broker_id: int) -> BrokerLiveInfo | None:
        return self.reports.get(broker_id)

    def max_offset(self, broker_id: int) -> int:
        return _max_offset(self.reports.get(broker_id))

    def rank(self, broker_id: int) -> tuple[int, int, int, int]:
        return rank_key(broker_id, self.reports.get(broker_id))

    @property
    def pools(self) -> list[list[int]]:
        """The candidate pools in order: the SyncStateSet, the ELR, then (unclean) every other replica."""
        in_sync, elr = self.sync_state_set, set(self.eligible)
        pools = [sorted(in_sync), sorted(elr - in_sync)]
        if self.unclean:
            pools.append(sorted(self.replicas - in_sync - elr))
        return pools


def elect(inputs: ElectionInputs) -> ElectionResult:
    """docs/reference-behaviour.md §6 ``DefaultElectPolicy.elect`` with the rule of docs/architecture.md
    §3.2: whom to elect, or whom the set waits for."""
    bar = inputs.watermark  # what a candidate must hold to be complete
    by_membership = True  # a member still in the process it joined with holds every acknowledgement
    old_alive = inputs.old_master is not None and inputs.is_alive(inputs.old_master)
    if inputs.acks_needed is not None and inputs.prefer is None and not old_alive:
        counted = _by_count(inputs, inputs.acks_needed)
        if isinstance(counted, ElectionResult):
            return counted
        bar = counted
        by_membership = False  # membership proves nothing: an acknowledgement needed N copies
    if inputs.prefer is not None:
        return _designated(inputs, inputs.prefer)
    for pool in inputs.pools:
        ready = [b for b in pool if _complete(inputs, b, bar, by_membership)]
        if not ready:
            continue
        best = min(ready, key=inputs.rank)
        old = inputs.old_master
        if old is not None and old in ready and not _lost_a_tail(inputs, old, best):
            return _result(inputs, old, lost_ok=False)
        return _result(inputs, best, lost_ok=False)
    return _declare_or_wait(inputs)


def _lost_a_tail(inputs: ElectionInputs, old_master: int, best: int) -> bool:
    """The old master restarted uncleanly and holds less than ``best``: it may have lost a tail of
    acknowledged messages that the watermark (a heartbeat old) does not cover, and its confirm
    checkpoint may lag as well; re-electing it would make ``best`` truncate them (mqha.sim seeds 67,
    328)."""
    info = inputs.info(old_master)
    unclean = info is not None and info.clean_shutdown is False
    return unclean and inputs.max_offset(best) > inputs.max_offset(old_master)


def _complete(inputs: ElectionInputs, broker_id: int, bar: int, by_membership: bool) -> bool:
    """Alive and holding every acknowledged message (docs/architecture.md §3.2)."""
    if not inputs.is_alive(broker_id):
        return False
    info = inputs.info(broker_id)
    if (
        by_membership
        and broker_id in inputs.sync_state_set
        and info is not None
        and info.incarnation is not None
        and inputs.joined_as.get(broker_id) == info.incarnation
    ):
        # The very process that joined the SyncStateSet holds everything the set acknowledged
        # (that is what being in it means); its heartbeat's maxOffset may just lag by one. A member
        # that restarted since is judged by what it reports (its log may have lost a tail).
        return True
    return _max_offset(info) >= bar


def _result(inputs: ElectionInputs, chosen: int, lost_ok: bool) -> ElectionResult:
    top = inputs.max_offset(chosen)
    watermark = inputs.watermark
    lost = (max(top, 0), watermark) if lost_ok and top < watermark else None
    unclean = chosen not in inputs.sync_state_set and chosen not in inputs.eligible
    return ElectionResult(chosen, unclean=unclean, watermark=watermark, lost=lost)


def _designated(inputs: ElectionInputs, prefer: int) -> ElectionResult:
    """Designation is strict: the designated broker if alive in a pool, whatever it holds, else nothing."""
    for pool in inputs.pools:
        if prefer in pool:
            return _result(inputs, prefer, lost_ok=True) if inputs.is_alive(prefer) else NO_CANDIDATE
    return NO_CANDIDATE


def _declare_or_wait(inputs: ElectionInputs) -> ElectionResult:
    """Nobody alive holds every acknowledged message: whoever is alive could only be elected by declaring
    a loss; with nobody alive there is nothing to decide (and nothing to wait for)."""
    watermark, in_sync, elr = inputs.watermark, inputs.sync_state_set, inputs.eligible
    eligible_ids = sorted(in_sync | set(elr))
    candidates = [b for b in eligible_ids if inputs.is_alive(b)]
    if not candidates and not inputs.unclean:
        return ElectionResult(None, watermark=watermark)
    # A loss will be declared, and a declared loss is final: any alive replica with a longer log (one
    # that left the set, or whose credit was released) makes it smaller, and every replica that is
    # down may have more on its disk than all of them -- the set waits to hear from it first.
    outside = sorted(inputs.replicas - set(eligible_ids))
    candidates += [b for b in outside if inputs.is_alive(b)]
    if not candidates:
        return ElectionResult(None, watermark=watermark)
    waitable = tuple(
        b for b in eligible_ids if not inputs.is_alive(b) and (b in in_sync or elr[b] >= watermark)
    )
    waitable += tuple(b for b in outside if not inputs.is_alive(b))
    if waitable and _should_wait(inputs.waited_ms, inputs.wait_timeout_ms):
        return ElectionResult(None, watermark=watermark, waiting_for=waitable, incomplete=tuple(candidates))
    return _result(inputs, min(candidates, key=inputs.rank), lost_ok=True)


UNKNOWABLE = 2**63
"""A bar no log reaches: who holds every acknowledged message cannot be known from the alive replicas."""


def _by_count(inputs: ElectionInputs, acks_needed: int) -> int | ElectionResult:
    """The completeness bar of a set that acknowledges by count, or the wait for fresh reports.

    An acknowledgement needed N copies, the master's and N - 1 members': which members hold it is not
    known, and their heartbeats may be older than the master's last acknowledgements (the issue-27 soak
    lost 3 acknowledged messages to an election that trusted membership and ranked by such reports).
    So (1) every alive member's report must be fresh: received after the set lost its master
    (``fresh_since_ms``, the start of the wait) -- the set waits for those that are not, at most until
    they would have expired (their ``timeout_ms``; a session ping keeps a member alive without a report);
    (2) with N >= 2, when at least N members are down (the old master among them, whether the set still
    names it or an election cleared it), the alive ones may all lack an acknowledged message: nobody is
    complete (the set waits for the others as for any incomplete set); (3) otherwise the longest alive
    log holds every acknowledged message: the bar is the highest of the watermark and the alive members'
    maxOffsets. Called only when the old master is not alive, so the alive members are the others."""
    alive = [b for b in sorted(inputs.sync_state_set) if inputs.is_alive(b)]
    stale = []
    patience = 0
    for broker_id in alive:
        info = inputs.info(broker_id)
        if info is None or not _behind_fence(info, inputs.fence_epoch, inputs.fresh_since_ms):
            stale.append(broker_id)
            patience = max(patience, 0 if info is None else info.timeout_ms)
    if stale and (inputs.waited_ms or 0) < patience:
        fresh = tuple(b for b in alive if b not in stale)
        return ElectionResult(
            None, watermark=inputs.watermark, waiting_for=tuple(stale), incomplete=fresh, reports=True
        )
    # the old master too, known or not (a cleared one)
    down = sum(1 for b in inputs.sync_state_set if not inputs.is_alive(b))
    if acks_needed >= 2 and down >= acks_needed:
        return UNKNOWABLE
    return max([inputs.watermark, *(inputs.max_offset(b) for b in alive)])


def _behind_fence(info: BrokerLiveInfo, fence_epoch: int | None, fresh_since_ms: int) -> bool:
    """Whether ``info`` reports a log that no older master can extend: sent knowing the cleared masterEpoch
    (its broker then follows no older master), or, from a broker that does not report what it knows, at
    least received after the set lost its master."""
    if info.known_master_epoch is None:
        return info.reported_ms >= fresh_since_ms
    return fence_epoch is not None and info.known_master_epoch >= fence_epoch
