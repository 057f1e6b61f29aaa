"""Whether the controllers agree at the end of a chaos run: voters, one voter set, one applied state."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mqha.chaos.agreement import ControllerView, judge_agreement

IDS = {
    "n0": "127.0.0.1:10001/" + "a" * 32,
    "n1": "127.0.0.1:10003/" + "b" * 32,
    "n2": "127.0.0.1:10005/" + "c" * 32,
}
STATE = {"groups": {"broker-a": {"masterEpoch": 3}}}


def view(
    name: str, *, role: str = "voter", voters: list[str] | None = None, index: int = 40, state: Any = STATE
) -> ControllerView:
    return ControllerView(
        name,
        {"role": role, "raftId": IDS[name]},
        {"voters": [{"raftId": v} for v in (voters if voters is not None else IDS.values())]},
        {"raft": {"last_applied": index}, "state": state},
    )


def views(**changed: ControllerView) -> list[ControllerView]:
    return [changed.get(name, view(name)) for name in IDS]


def test_agree_when_all_are_voters_of_one_set_with_one_state() -> None:
    verdict = judge_agreement(views())
    assert verdict.ok
    assert verdict.text == "n0,n1,n2 all voters, one voter set, the same applied state at index 40"


def test_a_silent_controller_or_an_observer_is_a_disagreement() -> None:
    silent = replace(view("n1"), status=None)
    assert judge_agreement(views(n1=silent)).text == "n1 does not answer (status)"
    observer = judge_agreement(views(n2=view("n2", role="observer")))
    assert not observer.ok and observer.text == "n2 is observer, not a voter"
    assert not judge_agreement([]).ok


def test_a_voter_of_a_wiped_store_left_in_the_set_is_a_disagreement() -> None:
    stale = [IDS["n0"], IDS["n1"], "127.0.0.1:10005/" + "d" * 32]  # n2's old store still votes
    verdict = judge_agreement(views(n1=view("n1", voters=stale)))
    assert not verdict.ok and verdict.text.startswith("n1 sees voters ")


def test_different_applied_states_or_indexes_are_a_disagreement() -> None:
    behind = judge_agreement(views(n2=view("n2", index=38)))
    assert not behind.ok
    assert behind.text == "n2 applied the same state at index 38, n0 at index 40"
    other = judge_agreement(views(n1=view("n1", state={"groups": {}})))
    assert other.text == "n1 applied a different state at index 40, n0 at index 40"
