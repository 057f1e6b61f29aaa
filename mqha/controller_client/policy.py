"""Which controller to ask next: the one leader-following policy of every controller client (core).

Only the serving Raft leader answers the leader-only routes of docs/architecture.md §3; any other
node says ``CONTROLLER_NOT_LEADER`` (2007) with the leader's address as a hint, or null when it knows
none (an election is running). Every controller client -- the broker's ReplicasManager and its
membership check, the producer/consumer route lookup and mqadmin -- follows the leader with this one
policy. No IO here: the shell (``mqha.controller_client.caller``) sends what :class:`Follow` asks for
and feeds back what happened.

One call, in rounds. A round asks the last known leader first, then every listed address in order
(each at most once a round); an address that was not told to be the leader is first asked "who
leads?" (``GET /v1/controller/metadata``) when :attr:`Policy.discover` is set, so a call with a long
timeout goes only to a named leader. Events and what follows:

* a final answer (any code but not-leader) ends the call, and the node that gave it is the leader;
* not-leader with a hint: the hinted node is asked next (at most ``max_redirects`` hints a call);
  without a usable hint, the next address;
* connection refused (surely not sent): the next address; the node is passed over for the rest of
  the call while others are left;
* a timeout or a connection lost after sending: a read goes on like a refusal; a write gives up at
  once, as does a not-leader answer that says the write's outcome is unknown: it may still commit,
  so a blind resend could apply it twice;
* the end of a round: give up when ``rounds`` are done, the ``budget_ms`` would be spent, or (with
  ``give_up_when_none_answer``) no node answered at all; otherwise back off (doubling from
  ``backoff_ms`` to ``backoff_max_ms``) and start the next round.

Every path ends: a round asks each address at most twice, redirects are bounded, and the number of
rounds is bounded by ``rounds`` or by the budget (the back-offs alone spend it, whatever clock the
shell passes in).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mqha.codes import ResponseCode
from mqha.wire.controller_api import Reply

OUTCOME_UNKNOWN_MARK = "outcome is unknown"
"""The controller's remark for a write that may still commit (``mqha/controller/write_path.py``)."""


def parse_addresses(controllers: str | Iterable[str]) -> list[str]:
    """``"h:p;h:p"`` (RocketMQ's ``controllerAddr``) or a list of ``host:port`` -> a list: order kept,
    duplicates, empty items, ``http://`` and a trailing ``/`` dropped."""
    items = controllers.split(";") if isinstance(controllers, str) else list(controllers)
    return list(dict.fromkeys(i.strip().removeprefix("http://").rstrip("/") for i in items if i.strip()))


def leader_in_metadata(address: str, payload: Mapping[str, Any]) -> str | None:
    """The serving leader according to ``address``'s metadata (docs/reference-behaviour.md §5.8)."""
    if payload.get("isLeader") is True:
        return str(payload.get("selfAddress") or address)
    leader = payload.get("leaderAddress")
    return leader if isinstance(leader, str) and leader else None


# --------------------------------------------------------------------------------------------------
# Events: what happened to the last request.


@dataclass(frozen=True)
class Answered:
    """A final answer to the call: any code but not-leader."""


@dataclass(frozen=True)
class NotLeader:
    """Not the serving leader; ``hint`` names the leader if the node knows one."""

    hint: str | None = None
    maybe_applied: bool = False  # a write whose outcome is unknown: it may still commit


@dataclass(frozen=True)
class LeaderIs:
    """The answer to "who leads?": an address, or None while no leader is known."""

    leader: str | None


@dataclass(frozen=True)
class Refused:
    """No connection: the request was surely not sent."""


@dataclass(frozen=True)
class TimedOut:
    """Sent (maybe) without an answer in time, or the connection broke before the answer."""


@dataclass(frozen=True)
class Waited:
    """The shell has waited out a :class:`BackOff`."""


Event = Answered | NotLeader | LeaderIs | Refused | TimedOut | Waited


def event_of(reply: Reply) -> Answered | NotLeader:
    """Classify a controller reply to a leader-only call."""
    if reply.code != ResponseCode.CONTROLLER_NOT_LEADER:
        return Answered()
    hint = reply.payload.get("leaderAddress")
    return NotLeader(hint if isinstance(hint, str) and hint else None, OUTCOME_UNKNOWN_MARK in reply.remark)


# --------------------------------------------------------------------------------------------------
# Decisions: what the shell does next.


@dataclass(frozen=True)
class Ask:
    """Send the call to ``address`` (``who_leads``: ask it for the leader instead)."""

    address: str
    who_leads: bool = False


@dataclass(frozen=True)
class Redirect:
    """Send the call to ``address``, which a not-leader answer named."""

    address: str


@dataclass(frozen=True)
class BackOff:
    """Wait ``ms`` milliseconds, then feed :class:`Waited`."""

    ms: int


@dataclass(frozen=True)
class Done:
    """The last answer is the call's result."""


class Why(enum.Enum):
    """Says why a call gave up: nothing reachable, no known leader, or a write of unknown outcome."""

    NONE_REACHABLE = "no controller can be reached"
    NO_LEADER = "no controller knows a serving leader"
    OUTCOME_UNKNOWN = "the write's outcome is unknown"


@dataclass(frozen=True)
class GiveUp:
    """The call ends without a usable answer."""

    why: Why


Decision = Ask | Redirect | BackOff | Done | GiveUp


@dataclass(frozen=True)
class Policy:
    """The settings of the leader-following policy (one per client)."""

    rounds: int | None = 3  # None: as many as the budget allows
    budget_ms: int | None = None  # for the whole call, back-offs included
    backoff_ms: int = 100
    backoff_max_ms: int = 1000
    max_redirects: int = 2
    discover: bool = True
    give_up_when_none_answer: bool = False

    def __post_init__(self) -> None:
        if self.rounds is None and self.budget_ms is None:
            raise ValueError("a policy needs a round limit or a time budget")
        if (self.rounds is not None and self.rounds < 1) or self.backoff_ms < 1:
            raise ValueError("rounds and backoff_ms must be >= 1")
        if self.backoff_max_ms < self.backoff_ms or self.max_redirects < 0:
            raise ValueError("backoff_max_ms must be >= backoff_ms and max_redirects >= 0")


class Follow:
    """One call's walk over the controllers: events in, the next decision out.

    ``write``: the call changes state (resent only when surely not applied). ``any_node``: every node
    answers the call (no redirects, no "who leads?", and the answering node is not the leader).
    ``find_only``: the call IS the question "who leads?" and ends at the first leader named.
    :attr:`leader` is what the walk learned, for the client's cache.
    """

    def __init__(
        self,
        policy: Policy,
        addresses: Sequence[str],
        leader: str | None = None,
        *,
        write: bool = False,
        any_node: bool = False,
        find_only: bool = False,
        now_ms: int = 0,
    ) -> None:
        if not addresses:
            raise ValueError("no controller address")
        if find_only and not policy.discover:
            raise ValueError("find_only needs Policy.discover")
        self.policy = policy
        self.addresses = list(dict.fromkeys(addresses))
        self.leader = None if any_node else leader
        self.write = write
        self.any_node = any_node
        self.find_only = find_only
        self.rounds = 0
        self.redirects = 0
        self.dead: set[str] = set()
        self._waited_ms = 0  # back-offs so far: the budget is spent even if the clock stands still
        self._start_ms = self._now_ms = now_ms
        self._delay = policy.backoff_ms
        self._queue: list[tuple[str, bool]] = []  # (address, told to be the leader)
        self._called: set[str] = set()
        self._probed: set[str] = set()
        self._answered = False  # in this round
        self._ever_answered = False
        self._current: Ask | Redirect | BackOff | None = None
        self._over = False

    def start(self) -> Decision:
        if self._current is not None or self._over:
            raise RuntimeError("Follow.start() called twice")
        return self._new_round()

    def on(self, event: Event, now_ms: int = 0) -> Decision:
        current = self._current
        if current is None or self._over:
            raise RuntimeError(f"{event!r} while nothing was asked")
        self._now_ms = max(self._now_ms, now_ms)
        if isinstance(current, BackOff):
            if not isinstance(event, Waited):
                raise ValueError(f"{event!r} during a back-off")
            return self._new_round()
        if isinstance(event, Waited):
            raise ValueError("Waited without a back-off")
        address = current.address
        if isinstance(event, Refused | TimedOut):
            return self._on_silence(address, event, probe=isinstance(current, Ask) and current.who_leads)
        self._answered = self._ever_answered = True
        if isinstance(current, Ask) and current.who_leads:
            if not isinstance(event, LeaderIs):
                raise ValueError(f"{event!r} to a 'who leads?' question")
            return self._on_leader_named(event.leader)
        if isinstance(event, Answered):
            if not self.any_node:
                self.leader = address
            return self._end(Done())
        if isinstance(event, NotLeader):
            return self._on_not_leader(address, event)
        raise ValueError(f"{event!r} to a call")

    # ---------------------------------------------------------------------------------- internals

    def _on_silence(self, address: str, event: Refused | TimedOut, *, probe: bool) -> Decision:
        if self.leader == address:
            self.leader = None
        if isinstance(event, TimedOut) and self.write and not probe:
            return self._end(GiveUp(Why.OUTCOME_UNKNOWN))
        self.dead.add(address)
        return self._next()

    def _on_leader_named(self, leader: str | None) -> Decision:
        if leader is None or leader in self.dead or leader in self._called:
            return self._next()
        self.leader = leader
        if self.find_only:
            return self._end(Done())
        self._queue.insert(0, (leader, True))
        return self._next()

    def _on_not_leader(self, address: str, event: NotLeader) -> Decision:
        if self.leader == address:
            self.leader = None
        if self.write and event.maybe_applied:
            return self._end(Done())  # the caller sees this answer; a resend could apply twice
        hint = event.hint
        usable = hint is not None and hint != address and hint not in self.dead
        if usable and hint not in self._called and self.redirects < self.policy.max_redirects:
            assert hint is not None
            self.redirects += 1
            self.leader = hint
            self._called.add(hint)
            return self._ask(Redirect(hint))
        return self._next()

    def _new_round(self) -> Decision:
        self.rounds += 1
        self._called.clear()
        self._probed.clear()
        self._answered = False
        alive = [a for a in self.addresses if a not in self.dead] or self.addresses
        first = [(self.leader, True)] if self.leader and self.leader not in self.dead else []
        self._queue = first + [(a, False) for a in alive]
        return self._next()

    def _next(self) -> Decision:
        while self._queue:
            address, told = self._queue.pop(0)
            if address in self._called:
                continue
            if not self.find_only and (told or self.any_node or not self.policy.discover):
                self._called.add(address)
                return self._ask(Ask(address))
            if address in self._probed:
                continue
            self._probed.add(address)
            return self._ask(Ask(address, who_leads=True))
        return self._end_of_round()

    def _end_of_round(self) -> Decision:
        policy = self.policy
        if policy.give_up_when_none_answer and not self._answered:
            return self._end(GiveUp(Why.NONE_REACHABLE))
        why = Why.NO_LEADER if self._ever_answered else Why.NONE_REACHABLE
        if policy.rounds is not None and self.rounds >= policy.rounds:
            return self._end(GiveUp(why))
        spent = max(self._waited_ms, self._now_ms - self._start_ms)
        if policy.budget_ms is not None and spent + self._delay >= policy.budget_ms:
            return self._end(GiveUp(why))
        delay, self._delay = self._delay, min(self._delay * 2, policy.backoff_max_ms)
        self._waited_ms += delay
        self._current = BackOff(delay)
        return self._current

    def _ask(self, decision: Ask | Redirect) -> Decision:
        self._current = decision
        return decision

    def _end(self, decision: Done | GiveUp) -> Decision:
        self._over = True
        self._current = None
        return decision
