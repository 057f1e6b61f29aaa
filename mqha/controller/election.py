"""Master election policy (docs/reference-behaviour.md §6), with a total order instead of a collapsing sorted
set.

Strategy, per candidate pool — the SyncStateSet first, then (only when unclean election is enabled)
every registered replica:

1. keep the candidates that are alive; none -> this pool yields nothing;
2. the old master, if it is in the pool and nobody else is designated (or it is the designated one);
3. a designated broker (admin ``electMaster``) if it is in the pool, else nothing from this pool —
   designation is strict, there is no fallback to another broker of the same pool;
4. otherwise the best by the total order of docs/architecture.md §7: epoch desc, maxOffset desc,
   electionPriority asc, brokerId asc. A candidate without heartbeat info ranks as the
   docs/reference-behaviour.md §7.1 defaults (epoch -1, maxOffset -1, priority Integer.MAX_VALUE).

The reference ranks with a sorted set (equal candidates collapse, the survivor depends on insertion
order) and narrows the offset gap to 32 bits; the explicit final tie-break on broker id and Python's
unbounded ints make the result a pure function of the inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mqha.controller.liveness import BrokerLiveInfo, LivenessView
from mqha.controller.state import BrokerGroupState
from mqha.wire.controller_api import INT32_MAX


@dataclass(frozen=True)
class ElectionResult:
    """The chosen broker (None: no candidate) and whether it came from outside the SyncStateSet."""

    broker_id: int | None
    unclean: bool = False


NO_CANDIDATE = ElectionResult(None)


def rank_key(broker_id: int, info: BrokerLiveInfo | None) -> tuple[int, int, int, int]:
    """Sort key: smaller is better (epoch desc, maxOffset desc, priority asc, id asc)."""
    if info is None:
        return (1, 1, INT32_MAX, broker_id)
    return (-info.epoch, -info.max_offset, info.election_priority, broker_id)


def _pick(
    pool: Iterable[int],
    old_master: int | None,
    prefer: int | None,
    is_alive: Callable[[int], bool],
    live_info: Callable[[int], BrokerLiveInfo | None],
) -> int | None:
    alive = sorted(broker_id for broker_id in pool if is_alive(broker_id))
    if not alive:
        return None
    if old_master is not None and old_master in alive and (prefer is None or prefer == old_master):
        return old_master
    if prefer is not None:
        return prefer if prefer in alive else None
    return min(alive, key=lambda broker_id: rank_key(broker_id, live_info(broker_id)))


def elect(
    sync_state_set: Iterable[int],
    all_replicas: Iterable[int] | None,
    *,
    old_master: int | None,
    prefer: int | None,
    is_alive: Callable[[int], bool],
    live_info: Callable[[int], BrokerLiveInfo | None],
) -> ElectionResult:
    """docs/reference-behaviour.md §6 ``DefaultElectPolicy.elect``; ``all_replicas`` is None unless unclean
    election is on."""
    in_sync = frozenset(sync_state_set)
    chosen = _pick(in_sync, old_master, prefer, is_alive, live_info)
    if chosen is None and all_replicas is not None:
        chosen = _pick(all_replicas, old_master, prefer, is_alive, live_info)
    if chosen is None:
        return NO_CANDIDATE
    return ElectionResult(chosen, unclean=chosen not in in_sync)


@dataclass(frozen=True)
class ElectionPolicy:
    """The policy bound to the controller's ``enableElectUncleanMaster`` setting."""

    enable_elect_unclean_master: bool = False

    def elect(
        self, group: BrokerGroupState, liveness: LivenessView, prefer: int | None = None
    ) -> ElectionResult:
        name = group.broker_name
        return elect(
            sync_state_set=group.sync_state_set,
            all_replicas=group.replicas.keys() if self.enable_elect_unclean_master else None,
            old_master=group.master_broker_id,
            prefer=prefer,
            is_alive=lambda broker_id: liveness.is_alive(name, broker_id),
            live_info=lambda broker_id: liveness.info(name, broker_id),
        )
