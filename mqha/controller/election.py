"""Master election policy (docs/reference-behaviour.md §6), with a total order instead of a collapsing sorted
set, and the completeness rule of docs/architecture.md §3.2 (KIP-966's Eligible Leader Replicas).

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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from mqha.controller.liveness import BrokerLiveInfo, LivenessView
from mqha.controller.state import BrokerGroupState
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


def elect(
    sync_state_set: Iterable[int],
    all_replicas: Iterable[int] | None,
    *,
    old_master: int | None,
    prefer: int | None,
    is_alive: Callable[[int], bool],
    live_info: Callable[[int], BrokerLiveInfo | None],
    eligible: Mapping[int, int] | None = None,
    watermark: int = -1,
    waited_ms: int | None = None,
    wait_timeout_ms: int = 0,
    joined_as: Callable[[int], str | None] | None = None,
    registered: Iterable[int] = (),
    acks_needed: int | None = None,
    fresh_since_ms: int = 0,
    fence_epoch: int | None = None,
) -> ElectionResult:
    """docs/reference-behaviour.md §6 ``DefaultElectPolicy.elect`` with the rule of docs/architecture.md
    §3.2; ``all_replicas`` is None unless unclean election is on, ``eligible`` is the ELR (id -> credit),
    ``waited_ms`` how long the set has been waiting (None: it was not); ``registered`` every replica of
    the set: a loss that must be declared is made as small as the replicas allow. ``acks_needed``: the
    set acknowledges by count (``inSyncReplicas`` = N, no allAck; None: every member acks), so the
    members' reports must come from behind the fence: sent knowing masterEpoch ``fence_epoch`` (the
    cleared one; None: no fence yet), or, from brokers that do not say, no older than ``fresh_since_ms``
    (:func:`_by_count`)."""
    in_sync = frozenset(sync_state_set)
    elr = dict(eligible or {})
    pools: list[list[int]] = [sorted(in_sync), sorted(set(elr) - in_sync)]
    if all_replicas is not None:
        pools.append(sorted(set(all_replicas) - in_sync - set(elr)))
    bar = watermark  # what a candidate must hold to be complete
    if acks_needed is not None and prefer is None and not (old_master is not None and is_alive(old_master)):
        counted = _by_count(
            in_sync,
            acks_needed,
            is_alive=is_alive,
            live_info=live_info,
            fresh_since_ms=fresh_since_ms,
            fence_epoch=fence_epoch,
            waited_ms=waited_ms,
            watermark=watermark,
        )
        if isinstance(counted, ElectionResult):
            return counted
        bar = counted
        joined_as = None  # membership proves nothing: an acknowledgement needed N copies, not every member's

    def complete(broker_id: int) -> bool:
        if not is_alive(broker_id):
            return False
        info = live_info(broker_id)
        if (
            broker_id in in_sync
            and info is not None
            and info.incarnation is not None
            and joined_as is not None
            and joined_as(broker_id) == info.incarnation
        ):
            # The very process that joined the SyncStateSet holds everything the set acknowledged
            # (that is what being in it means); its heartbeat's maxOffset may just lag by one. A member
            # that restarted since is judged by what it reports (its log may have lost a tail).
            return True
        return _max_offset(info) >= bar

    def result(chosen: int, lost_ok: bool) -> ElectionResult:
        top = _max_offset(live_info(chosen))
        lost = (max(top, 0), watermark) if lost_ok and top < watermark else None
        unclean = chosen not in in_sync and chosen not in elr
        return ElectionResult(chosen, unclean=unclean, watermark=watermark, lost=lost)

    if prefer is not None:
        # Designation is strict: the designated broker if alive in a pool, else nothing.
        for pool in pools:
            if prefer in pool:
                return result(prefer, lost_ok=True) if is_alive(prefer) else NO_CANDIDATE
        return NO_CANDIDATE

    for pool in pools:
        ready = [broker_id for broker_id in pool if complete(broker_id)]
        if not ready:
            continue
        if old_master is not None and old_master in ready:
            return result(old_master, lost_ok=False)
        return result(min(ready, key=lambda b: rank_key(b, live_info(b))), lost_ok=False)

    # Nobody alive holds every acknowledged message. Whoever is alive could only be elected by
    # declaring a loss; with nobody alive there is nothing to decide (and nothing to wait for).
    eligible_ids = sorted(in_sync | set(elr))
    candidates = [b for b in eligible_ids if is_alive(b)]
    if not candidates and all_replicas is None:
        return ElectionResult(None, watermark=watermark)
    # A loss will be declared, and a declared loss is final: any alive replica with a longer log (one
    # that left the set, or whose credit was released) makes it smaller, and every replica that is
    # down may have more on its disk than all of them -- the set waits to hear from it first.
    outside = sorted((set(registered) | set(all_replicas or ())) - set(eligible_ids))
    candidates += [b for b in outside if is_alive(b)]
    if not candidates:
        return ElectionResult(None, watermark=watermark)
    waitable = tuple(b for b in eligible_ids if not is_alive(b) and (b in in_sync or elr[b] >= watermark))
    waitable += tuple(b for b in outside if not is_alive(b))
    if waitable and _should_wait(waited_ms, wait_timeout_ms):
        return ElectionResult(None, watermark=watermark, waiting_for=waitable, incomplete=tuple(candidates))
    chosen = min(candidates, key=lambda b: rank_key(b, live_info(b)))
    return result(chosen, lost_ok=True)


UNKNOWABLE = 2**63
"""A bar no log reaches: who holds every acknowledged message cannot be known from the alive replicas."""


def _by_count(
    in_sync: frozenset[int],
    acks_needed: int,
    *,
    is_alive: Callable[[int], bool],
    live_info: Callable[[int], BrokerLiveInfo | None],
    fresh_since_ms: int,
    fence_epoch: int | None,
    waited_ms: int | None,
    watermark: int,
) -> int | ElectionResult:
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
    alive = [b for b in sorted(in_sync) if is_alive(b)]
    stale = []
    patience = 0
    for broker_id in alive:
        info = live_info(broker_id)
        if info is None or not _behind_fence(info, fence_epoch, fresh_since_ms):
            stale.append(broker_id)
            patience = max(patience, 0 if info is None else info.timeout_ms)
    if stale and (waited_ms or 0) < patience:
        fresh = tuple(b for b in alive if b not in stale)
        return ElectionResult(
            None, watermark=watermark, waiting_for=tuple(stale), incomplete=fresh, reports=True
        )
    down = sum(1 for b in in_sync if not is_alive(b))  # the old master too, known or not (a cleared one)
    if acks_needed >= 2 and down >= acks_needed:
        return UNKNOWABLE
    return max([watermark, *(_max_offset(live_info(b)) for b in alive)])


def _behind_fence(info: BrokerLiveInfo, fence_epoch: int | None, fresh_since_ms: int) -> bool:
    """Whether ``info`` reports a log that no older master can extend: sent knowing the cleared masterEpoch
    (its broker then follows no older master), or, from a broker that does not report what it knows, at
    least received after the set lost its master."""
    if info.known_master_epoch is None:
        return info.reported_ms >= fresh_since_ms
    return fence_epoch is not None and info.known_master_epoch >= fence_epoch


def election_watermark(group: BrokerGroupState, liveness: LivenessView) -> int:
    """``W`` of docs/architecture.md §3.2 (pure): the replicated watermark, the current master's last
    confirm offset in this masterEpoch, and the confirm offsets before recovery of the broker processes
    first heard in this masterEpoch (alive or not)."""
    name = group.broker_name
    marks = [group.acked_watermark]
    reported = liveness.master_confirm(name)
    if reported is not None and reported[0] == group.master_epoch:
        marks.append(reported[1])
    # A recovery report is knowledge of what was acknowledged, whether its reporter is still alive:
    # every process of the set first heard in this masterEpoch (later ones were folded into the
    # replicated watermark by the election that moved the epoch on, or declared lost).
    for first_seen, confirmed in liveness.recovery_confirms(name):
        if first_seen == group.master_epoch:
            marks.append(confirmed)
    return max(marks)


@dataclass(frozen=True)
class ElectionPolicy:
    """Binds the election rule to ``enableElectUncleanMaster`` and ``uncleanRecoveryTimeoutMills``."""

    enable_elect_unclean_master: bool = False
    unclean_recovery_timeout_ms: int = 300_000

    def elect(
        self,
        group: BrokerGroupState,
        liveness: LivenessView,
        prefer: int | None = None,
        waited_ms: int | None = None,
    ) -> ElectionResult:
        name = group.broker_name
        rule = liveness.ack_rule(name)
        return elect(
            sync_state_set=group.sync_state_set,
            all_replicas=group.replicas.keys() if self.enable_elect_unclean_master else None,
            old_master=group.master_broker_id,
            prefer=prefer,
            is_alive=lambda broker_id: liveness.is_alive(name, broker_id),
            live_info=lambda broker_id: liveness.info(name, broker_id),
            eligible=group.eligible_replicas,
            watermark=election_watermark(group, liveness),
            waited_ms=waited_ms,
            wait_timeout_ms=self.unclean_recovery_timeout_ms,
            joined_as=lambda broker_id: liveness.member_incarnation(name, broker_id),
            registered=group.replicas.keys(),
            # inSyncReplicas = 1 acknowledges on the master alone: no replica can hold more, nothing to fence.
            acks_needed=rule.in_sync_replicas
            if rule is not None and rule.by_count and rule.in_sync_replicas >= 2
            else None,
            fresh_since_ms=liveness.now_ms - (waited_ms or 0),
            # An election by count first clears the master (masterEpoch + 1): the fence its members
            # report from behind.
            fence_epoch=group.master_epoch if group.master_broker_id is None else None,
        )
