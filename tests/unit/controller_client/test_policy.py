"""The leader-following policy (mqha/controller_client/policy.py): values in, decisions out, no IO.

Scenario tests name each rule; the Hypothesis tests drive a walk with arbitrary (adversarial) events
and check what must hold whatever the controllers say: it ends, a hint goes first, a round asks every
address before backing off, back-offs are bounded and a write is never resent after a timeout.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqha.codes import ResponseCode
from mqha.controller_client.policy import (
    Answered,
    Ask,
    BackOff,
    Decision,
    Done,
    Event,
    Follow,
    GiveUp,
    LeaderIs,
    NotLeader,
    Policy,
    Redirect,
    Refused,
    TimedOut,
    Waited,
    Why,
    event_of,
    leader_in_metadata,
    parse_addresses,
)
from mqha.wire.controller_api import Reply

A, B, C = "a:1", "b:1", "c:1"
DIRECT = Policy(discover=False, rounds=1)


def test_parse_addresses() -> None:
    assert parse_addresses("a:1; b:2;;a:1") == ["a:1", "b:2"]
    assert parse_addresses(["http://h:1/", "h:2", " "]) == ["h:1", "h:2"]
    assert parse_addresses(" ; ") == []


def test_leader_in_metadata() -> None:
    assert leader_in_metadata(A, {"isLeader": True, "selfAddress": B}) == B
    assert leader_in_metadata(A, {"isLeader": True}) == A
    assert leader_in_metadata(A, {"isLeader": False, "leaderAddress": C}) == C
    assert leader_in_metadata(A, {"isLeader": False, "leaderAddress": ""}) is None
    assert leader_in_metadata(A, {"leaderAddress": None}) is None


def test_event_of_a_reply() -> None:
    assert event_of(Reply(ResponseCode.SUCCESS)) == Answered()
    assert event_of(Reply(ResponseCode.SERVICE_NOT_AVAILABLE, "no quorum")) == Answered()
    not_leader = ResponseCode.CONTROLLER_NOT_LEADER
    assert event_of(Reply(not_leader, "", {"leaderAddress": B})) == NotLeader(B)
    assert event_of(Reply(not_leader, "", {"leaderAddress": None})) == NotLeader(None)
    unknown = "leadership moved during the write; its outcome is unknown (it may still commit)"
    assert event_of(Reply(not_leader, unknown, {})) == NotLeader(None, maybe_applied=True)


def test_policy_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="round limit or a time budget"):
        Policy(rounds=None)
    with pytest.raises(ValueError):
        Policy(rounds=0)
    with pytest.raises(ValueError):
        Policy(backoff_ms=10, backoff_max_ms=5)
    with pytest.raises(ValueError):
        Follow(Policy(), [])
    with pytest.raises(ValueError, match="discover"):
        Follow(DIRECT, [A], find_only=True)


def test_the_cached_leader_is_asked_first_and_learned_from_the_answer() -> None:
    follow = Follow(DIRECT, [A, B, C], leader=B)
    assert follow.start() == Ask(B)
    assert follow.on(Answered()) == Done()
    assert follow.leader == B


def test_a_hint_is_followed_before_the_list() -> None:
    follow = Follow(DIRECT, [A, B, C])
    assert follow.start() == Ask(A)
    assert follow.on(NotLeader(C)) == Redirect(C)
    assert follow.on(Answered()) == Done() and follow.leader == C


def test_without_a_hint_the_next_address_is_asked() -> None:
    follow = Follow(DIRECT, [A, B])
    assert follow.start() == Ask(A)
    assert follow.on(NotLeader(None)) == Ask(B)
    assert follow.on(Refused()) == GiveUp(Why.NO_LEADER)


def test_a_refused_leader_is_forgotten_and_the_rest_asked() -> None:
    follow = Follow(Policy(), [A, B], leader=A)
    assert follow.start() == Ask(A)
    assert follow.on(Refused()) == Ask(B, who_leads=True)
    assert follow.leader is None
    assert follow.on(LeaderIs(A)) == BackOff(100)  # A is dead for this call: not asked again
    assert follow.on(Waited()) == Ask(B, who_leads=True)
    assert follow.on(LeaderIs(B)) == Ask(B)
    assert follow.on(Answered()) == Done() and follow.leader == B


def test_discovery_asks_who_leads_then_calls_the_named_leader() -> None:
    follow = Follow(Policy(), [A, B, C])
    assert follow.start() == Ask(A, who_leads=True)
    assert follow.on(TimedOut()) == Ask(B, who_leads=True)  # a probe timing out is harmless
    assert follow.on(LeaderIs(None)) == Ask(C, who_leads=True)
    assert follow.on(LeaderIs(B)) == Ask(B)
    assert follow.leader == B


def test_find_only_ends_at_the_first_leader_named() -> None:
    follow = Follow(Policy(), [A, B], leader=B, find_only=True)
    assert follow.start() == Ask(B, who_leads=True)
    assert follow.on(LeaderIs(A)) == Done() and follow.leader == A


def test_a_write_is_not_resent_after_a_timeout_or_an_unknown_outcome() -> None:
    follow = Follow(DIRECT, [A, B], write=True)
    assert follow.start() == Ask(A)
    assert follow.on(TimedOut()) == GiveUp(Why.OUTCOME_UNKNOWN)
    follow = Follow(DIRECT, [A, B], write=True)
    follow.start()
    assert follow.on(NotLeader(B, maybe_applied=True)) == Done()  # the answer is the result
    follow = Follow(DIRECT, [A, B], write=True)
    follow.start()
    assert follow.on(Refused()) == Ask(B)  # surely not sent: the next one may have it


def test_a_read_goes_on_after_a_timeout() -> None:
    follow = Follow(DIRECT, [A, B])
    follow.start()
    assert follow.on(TimedOut()) == Ask(B)


def test_any_node_calls_take_the_first_answer_and_learn_no_leader() -> None:
    follow = Follow(Policy(), [A, B], leader=B, any_node=True)
    assert follow.start() == Ask(A)
    assert follow.on(Refused()) == Ask(B)
    assert follow.on(Answered()) == Done() and follow.leader is None


def test_nobody_answering_gives_up_at_once_when_asked_to() -> None:
    follow = Follow(Policy(rounds=None, budget_ms=10_000, give_up_when_none_answer=True), [A, B])
    follow.start()
    assert follow.on(Refused()) == Ask(B, who_leads=True)
    assert follow.on(Refused()) == GiveUp(Why.NONE_REACHABLE)


def test_rounds_back_off_doubling_up_to_the_cap_then_give_up() -> None:
    follow = Follow(Policy(rounds=5, backoff_ms=100, backoff_max_ms=300, discover=False), [A])
    assert follow.start() == Ask(A)
    pauses = []
    while True:
        decision = follow.on(NotLeader(None))
        if not isinstance(decision, BackOff):
            break
        pauses.append(decision.ms)
        assert follow.on(Waited()) == Ask(A)
    assert pauses == [100, 200, 300, 300]
    assert decision == GiveUp(Why.NO_LEADER)


def test_the_budget_ends_the_call_even_if_the_clock_stands_still() -> None:
    follow = Follow(Policy(rounds=None, budget_ms=1000, backoff_ms=100, discover=False), [A])
    follow.start()
    waited = 0
    decision = follow.on(NotLeader(None))
    while isinstance(decision, BackOff):
        waited += decision.ms
        follow.on(Waited())
        decision = follow.on(NotLeader(None))
    assert decision == GiveUp(Why.NO_LEADER) and waited < 1000


def test_the_budget_counts_the_clock_passed_in() -> None:
    follow = Follow(Policy(rounds=None, budget_ms=1000, discover=False), [A], now_ms=5000)
    follow.start()
    assert follow.on(NotLeader(None), now_ms=5950) == GiveUp(Why.NO_LEADER)


def test_events_out_of_turn_are_refused() -> None:
    follow = Follow(Policy(), [A])
    with pytest.raises(RuntimeError):
        follow.on(Answered())
    follow.start()
    with pytest.raises(ValueError):
        follow.on(Answered())  # A was asked who leads
    with pytest.raises(ValueError):
        follow.on(Waited())
    with pytest.raises(RuntimeError):
        follow.start()


# --------------------------------------------------------------------------------------------------
# Properties under arbitrary events.

ADDRESSES = ["n0:1", "n1:1", "n2:1", "n3:1"]
hint_st = st.none() | st.sampled_from([*ADDRESSES, "stranger:1"])
call_events = st.one_of(
    st.just(Answered()),
    st.builds(NotLeader, hint_st, st.booleans()),
    st.just(Refused()),
    st.just(TimedOut()),
)
probe_events = st.one_of(st.builds(LeaderIs, hint_st), st.just(Refused()), st.just(TimedOut()))
policies = st.builds(
    Policy,
    rounds=st.none() | st.integers(1, 5),
    budget_ms=st.integers(1, 5000),
    backoff_ms=st.integers(1, 200),
    backoff_max_ms=st.integers(200, 2000),
    max_redirects=st.integers(0, 3),
    discover=st.booleans(),
    give_up_when_none_answer=st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(
    policy=policies,
    addresses=st.lists(st.sampled_from(ADDRESSES), min_size=1, max_size=4, unique=True),
    leader=st.none() | st.sampled_from(ADDRESSES),
    write=st.booleans(),
    any_node=st.booleans(),
    data=st.data(),
)
def test_every_walk_ends_and_keeps_the_rules(
    policy: Policy,
    addresses: list[str],
    leader: str | None,
    *,
    write: bool,
    any_node: bool,
    data: st.DataObject,
) -> None:
    follow = Follow(policy, addresses, leader, write=write, any_node=any_node)
    decision: Decision = follow.start()
    limit = (policy.rounds or policy.budget_ms) * (2 * len(addresses) + policy.max_redirects + 3)
    asked_in_round: set[str] = set()
    called_in_round: set[str] = set()
    unreachable: set[str] = set()
    pauses: list[int] = []
    redirects = 0
    last_event: Event | None = None
    last_decision: Decision = decision
    for _ in range(limit):
        if isinstance(decision, Done | GiveUp):
            break
        event: Event
        if isinstance(decision, BackOff):
            # Every address was asked (or is unreachable) before a back-off.
            assert set(addresses) <= asked_in_round | unreachable
            assert policy.backoff_ms <= decision.ms <= policy.backoff_max_ms
            assert not pauses or decision.ms >= pauses[-1]
            pauses.append(decision.ms)
            asked_in_round.clear()
            called_in_round.clear()
            event = Waited()
        elif isinstance(decision, Ask) and decision.who_leads:
            assert not any_node
            asked_in_round.add(decision.address)
            event = data.draw(probe_events)
        else:
            assert isinstance(decision, Ask | Redirect)
            if isinstance(decision, Redirect):
                redirects += 1
                assert not any_node
            asked_in_round.add(decision.address)
            called_in_round.add(decision.address)
            event = data.draw(call_events)
            if any_node and isinstance(event, NotLeader):
                event = Answered()
        if isinstance(event, Refused | TimedOut) and not isinstance(decision, BackOff):
            unreachable.add(decision.address)  # type: ignore[union-attr]
        usable_hint = (
            isinstance(event, NotLeader)
            and event.hint not in (None, decision.address)  # type: ignore[union-attr]
            and event.hint not in unreachable | called_in_round
            and redirects < policy.max_redirects
            and not (write and event.maybe_applied)
        )
        last_decision = decision
        last_event = event
        decision = follow.on(event)
        if usable_hint:
            assert decision == Redirect(event.hint)  # type: ignore[union-attr]  # a hint goes first
        if isinstance(decision, Redirect):
            assert isinstance(last_event, NotLeader) and decision.address == last_event.hint
        timed_out_call = isinstance(last_event, TimedOut) and isinstance(last_decision, Ask | Redirect)
        if timed_out_call and write and not (isinstance(last_decision, Ask) and last_decision.who_leads):
            assert decision == GiveUp(Why.OUTCOME_UNKNOWN)  # never resent after a timeout
    else:
        pytest.fail(f"no end after {limit} steps")
    assert redirects <= policy.max_redirects
    assert sum(pauses) < policy.budget_ms  # type: ignore[operator]
    if policy.rounds is not None:
        assert len(pauses) < policy.rounds
    if isinstance(decision, Done) and not any_node and not follow.find_only:
        assert isinstance(last_event, Answered | NotLeader)
        if isinstance(last_event, Answered):
            assert follow.leader == last_decision.address  # type: ignore[union-attr]


@settings(max_examples=200, deadline=None)
@given(
    addresses=st.lists(st.sampled_from(ADDRESSES), min_size=1, max_size=4, unique=True),
    leader_index=st.integers(0, 3),
    cached=st.none() | st.sampled_from(ADDRESSES),
    discover=st.booleans(),
)
def test_a_reachable_leader_known_to_the_others_is_found_in_the_first_round(
    addresses: list[str], leader_index: int, cached: str | None, discover: bool
) -> None:
    """Followers name the true leader; a stale cache costs at most one extra question."""
    true_leader = addresses[leader_index % len(addresses)]
    follow = Follow(Policy(rounds=1, discover=discover), addresses, cached)
    decision = follow.start()
    for _ in range(3 * len(addresses) + 3):
        match decision:
            case Ask(address=address, who_leads=True):
                decision = follow.on(LeaderIs(true_leader))
            case Ask(address=address) | Redirect(address=address):
                if address == true_leader:
                    decision = follow.on(Answered())
                elif address in addresses:
                    decision = follow.on(NotLeader(true_leader))
                else:
                    decision = follow.on(Refused())
            case _:
                break
    assert decision == Done() and follow.leader == true_leader
