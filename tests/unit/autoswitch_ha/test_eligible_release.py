"""``EligibleRelease`` (docs/architecture.md §3.2): a master's put past the eligible replicas' credits
waits for the controller's release, which counts only for its master term and a set epoch at or after
the one that armed it."""

from __future__ import annotations

import asyncio

from mqha.autoswitch_ha.eligible_release import EligibleRelease


class Requester:
    def __init__(self) -> None:
        self.asked: list[int] = []

    def release_eligible_replicas(self, master_epoch: int) -> None:
        self.asked.append(master_epoch)


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_nothing_armed_waits_for_nothing() -> None:
    release = EligibleRelease(Requester())
    assert not release.needed and run(release.wait(0.01)) is True


def test_without_a_controller_agent_arming_does_nothing() -> None:
    release = EligibleRelease(None)
    release.arm(3, 5)
    assert not release.needed


def test_the_waiting_put_asks_and_the_verdict_lets_it_go() -> None:
    async def scenario() -> tuple[bool, list[int]]:
        requester = Requester()
        release = EligibleRelease(requester)
        release.arm(3, 5)
        asyncio.get_running_loop().call_later(0.02, release.done, 3, 5, True)
        return await release.wait(2.0), requester.asked

    assert run(scenario()) == (True, [3])


def test_a_shrink_asks_only_when_a_put_needs_it() -> None:
    async def scenario() -> list[int]:
        requester = Requester()
        release = EligibleRelease(requester)
        release.arm(3, 6)
        before = list(requester.asked)
        asyncio.get_running_loop().call_later(0.02, release.done, 3, 6, True)
        assert await release.wait(2.0)
        return before + requester.asked

    assert run(scenario()) == [3]


def test_a_verdict_for_an_older_set_or_another_term_does_not_count() -> None:
    async def scenario() -> tuple[bool, bool]:
        release = EligibleRelease(Requester())
        release.arm(3, 6)
        release.done(3, 5, True)  # answered for the set before the shrink
        release.done(2, 9, True)  # another master term
        still = release.needed
        return still, await release.wait(0.05)

    assert run(scenario()) == (True, False)  # the put is not acknowledged


def test_a_refused_release_is_asked_again() -> None:
    async def scenario() -> list[int]:
        requester = Requester()
        release = EligibleRelease(requester)
        release.arm(3, 6)
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, release.done, 3, 6, False)
        loop.call_later(0.2, release.done, 3, 6, True)
        assert await release.wait(2.0)
        return requester.asked

    assert run(scenario()) == [3, 3]


def test_losing_the_master_role_ends_the_wait() -> None:
    async def scenario() -> bool:
        release = EligibleRelease(Requester())
        release.arm(3, 6)
        asyncio.get_running_loop().call_later(0.02, release.disarm)
        return await release.wait(2.0)

    assert run(scenario()) is True  # the put path then fails it on the role check
