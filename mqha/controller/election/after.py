"""What an election attempt leads to: its verdict (the record and the answer) and its soft effects.

``attempt_verdict`` turns ``whom``'s result into what ``handle_elect_master`` writes and answers
(``VERDICTS``, first matching row wins). ``after_election`` and ``after_alter_sync_state_set`` say what
this node remembers and pushes once the answer is known: the set's wait, a declared loss, the fence
pushed to the members, the incarnations the SyncStateSet members joined with, role-change pushes
(docs/architecture.md §3.2). The shells carry them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from mqha.codes import ResponseCode
from mqha.controller.election.whom import ElectionResult


@dataclass(frozen=True)
class Waiting:
    """One set's wait: since when, for whom, and the watermark it waits to see held."""

    since_ms: int
    waiting_for: tuple[int, ...]
    watermark: int


class Found(Enum):
    """What ``whom`` found, as far as the verdict cares."""

    OLD_MASTER = "the old master, with nothing lost"
    NEW_MASTER = "a broker to elect (another one, or the old master declaring a loss)"
    FIRST_WAIT = "nobody: the first attempt of a wait for a complete replica"
    NOBODY = "nobody, or a wait past its first attempt, or a wait for fresh reports"


class Asker(Enum):
    """Who asked for the election (docs/reference-behaviour.md §5.4's three producers)."""

    MASTER_ITSELF = "the old master asks for itself (it restarted)"
    BROKER = "another broker asks to be elected"
    ADMIN = "an operator designates a broker"
    CONTROLLER = "the controller triggers it"


class Verdict(Enum):
    """What one election attempt writes and answers."""

    ELECT = "write the ElectMaster record of the chosen broker; SUCCESS"
    REELECT = "write an ElectMaster record of the old master: a new masterEpoch after its crash; SUCCESS"
    STILL_MASTER = "write nothing; 2011 CONTROLLER_MASTER_STILL_EXIST"
    CLEAR = "write the ElectMaster record that clears the master; 2004 CONTROLLER_MASTER_NOT_AVAILABLE"
    HOLD = "write nothing; 2004 CONTROLLER_MASTER_NOT_AVAILABLE"
    REFUSE = "write nothing; 2012 CONTROLLER_ELECT_MASTER_FAILED"


ANY = None
VERDICTS: tuple[tuple[Found | None, Asker | None, bool | None, Verdict], ...] = (
    # (found, asker, the set has a master to clear, verdict); first matching row wins, None matches any.
    (Found.OLD_MASTER, Asker.MASTER_ITSELF, ANY, Verdict.REELECT),
    (Found.OLD_MASTER, ANY, ANY, Verdict.STILL_MASTER),
    (Found.NEW_MASTER, ANY, ANY, Verdict.ELECT),
    # Nobody to elect. A controller trigger clears a master that is there to clear, except on the
    # first attempt of a wait: the alive replicas' heartbeats may just be older than the master's last
    # ack point, so it clears only if the next attempt still waits (one election, one epoch). A set
    # that acknowledges by count is cleared at once: the new masterEpoch is the fence its members
    # report from behind.
    (ANY, Asker.CONTROLLER, False, Verdict.HOLD),
    (Found.FIRST_WAIT, Asker.CONTROLLER, True, Verdict.HOLD),
    (Found.NOBODY, Asker.CONTROLLER, True, Verdict.CLEAR),
    (ANY, ANY, ANY, Verdict.REFUSE),
)
"""The verdict of an election attempt (docs/architecture.md §3.2, docs/reference-behaviour.md §5.4)."""


def found(result: ElectionResult, old_master: int | None, waited_ms: int | None) -> Found:
    if result.broker_id is not None:
        same = result.broker_id == old_master and result.lost is None
        return Found.OLD_MASTER if same else Found.NEW_MASTER
    if result.waiting and waited_ms is None and not result.reports:
        return Found.FIRST_WAIT
    return Found.NOBODY


def asker(requested: int | None, designated: bool, old_master: int | None) -> Asker:
    if requested is None:
        return Asker.CONTROLLER
    if designated:
        return Asker.ADMIN
    return Asker.MASTER_ITSELF if requested == old_master else Asker.BROKER


def attempt_verdict(what: Found, who: Asker, master_to_clear: bool) -> Verdict:
    """``master_to_clear``: the set names a master and has had one (not its first election)."""
    for row_found, row_asker, row_clear, verdict in VERDICTS:
        if (
            row_found not in (ANY, what)
            or row_asker not in (ANY, who)
            or row_clear not in (ANY, master_to_clear)
        ):
            continue
        return verdict
    raise AssertionError("VERDICTS ends with a row that matches anything")


@dataclass(frozen=True)
class ElectionOutcome:
    """One decided election attempt, as the shell knows it once it is answered (plain values)."""

    result: ElectionResult
    code: ResponseCode
    now_ms: int
    wait_before: Waiting | None = None
    new_master: int | None = None
    """The master the committed reply names (None: none, or the attempt failed)."""
    new_master_incarnation: str | None = None
    """That master's incarnation in this node's heartbeat table."""
    epoch_before: int | None = None
    """The set's masterEpoch before the attempt (None: no such set)."""
    master_after: int | None = None
    epoch_after: int | None = None
    """The set's master and masterEpoch after the attempt (epoch None: the set is gone)."""


@dataclass(frozen=True)
class AfterElection:
    """The soft effects of one election attempt, for the shell to carry out."""

    wait: Waiting | None = None
    """The set's wait from now on (None: it does not wait), when ``wait_changes``."""
    wait_changes: bool = True
    wait_started: bool = False
    """The wait starts with this attempt: say so once."""
    declared_loss: tuple[int, int] | None = None
    """A declared loss that committed: count it and say it loudly."""
    push_fence: bool = False
    """Push the cleared master to the members at once, so they report from behind the fence."""
    note_members: Mapping[int, str | None] | None = None
    """The SyncStateSet members to remember with the incarnations they joined with (None: no change)."""
    push_role_change: bool = False
    """Push the committed election to the members (``notifyBrokerRoleChanged``)."""


NOT_LEADER = ResponseCode.CONTROLLER_NOT_LEADER


def after_election(outcome: ElectionOutcome) -> AfterElection:
    """docs/architecture.md §3.2: the wait, a declared loss, the fence, the new master's note and push."""
    result, ok = outcome.result, outcome.code == ResponseCode.SUCCESS
    if outcome.code == NOT_LEADER:
        return AfterElection(wait_changes=False)  # decided by a leader that lost its lead: nothing
    wait = None
    if result.waiting:
        since = outcome.now_ms if outcome.wait_before is None else outcome.wait_before.since_ms
        wait = Waiting(since, result.waiting_for, result.watermark)
    cleared = (
        outcome.epoch_after is not None
        and outcome.master_after is None
        and (outcome.epoch_before is None or outcome.epoch_after > outcome.epoch_before)
    )
    elected = ok and outcome.new_master is not None
    return AfterElection(
        wait=wait,
        wait_started=wait is not None and outcome.wait_before is None,
        declared_loss=result.lost if ok else None,
        push_fence=result.reports and cleared,
        note_members={outcome.new_master: outcome.new_master_incarnation} if elected else None,  # type: ignore[dict-item]
        push_role_change=ok,
    )


def joined_incarnations(
    members: frozenset[int],
    kept: frozenset[int],
    known: Mapping[int, str],
    vouched: Mapping[int, str] | None,
    current: Mapping[int, str],
) -> dict[int, str | None]:
    """With which process (incarnation) each SyncStateSet member joined: a kept one as before (``known``),
    an added one as the master vouched for it, else as it heartbeats now (``current``). Soft, this node
    only: a new leader knows none and judges members by their offsets."""
    joined: dict[int, str | None] = {}
    for broker_id in members:
        incarnation = known.get(broker_id) if broker_id in kept else None
        if incarnation is None and vouched is not None:
            incarnation = vouched.get(broker_id)
        if incarnation is None:
            incarnation = current.get(broker_id)
        joined[broker_id] = incarnation
    return joined


@dataclass(frozen=True)
class AfterAlter:
    """The soft effects of a committed AlterSyncStateSet."""

    note_members: Mapping[int, str | None] | None
    """The SyncStateSet members to remember with the incarnations they joined with (None: no change)."""
    acking_master: bool
    """The master sent its ack point: its heartbeats' confirm offsets count in ``W`` from now on."""


def after_alter_sync_state_set(
    code: ResponseCode,
    members: frozenset[int],
    kept: frozenset[int],
    *,
    known: Mapping[int, str],
    vouched: Mapping[int, str] | None,
    current: Mapping[int, str],
    confirm_offset: int | None,
) -> AfterAlter:
    """A committed change of the SyncStateSet: note its members, and whether its master acks by offset."""
    if code != ResponseCode.SUCCESS:
        return AfterAlter(None, acking_master=False)
    joined = joined_incarnations(members, kept, known, vouched, current)
    return AfterAlter(joined, acking_master=confirm_offset is not None)
