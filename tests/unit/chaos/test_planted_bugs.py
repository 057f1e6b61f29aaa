"""The planted master that needs a controller (TEST ONLY code, ``mqha.testing.planted_bugs``)."""

from __future__ import annotations

import asyncio
from typing import Any

from mqha.role import BrokerRole, MasterInfo
from mqha.testing.planted_bugs import MASTER_NEEDS_CONTROLLER_ENV, PLANTED, maybe_plant_master, planted_env


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Controllers:
    """The ControllerClient's ``call``: a reply while a leader answers, None while none does."""

    def __init__(self) -> None:
        self.up = True

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        return {"code": 0} if self.up else None


class Disk:
    def __init__(self) -> None:
        self.full: str | None = None

    def refusal(self) -> str | None:
        return self.full


class Access:
    """What the plant touches of ``BrokerAccess``: its role and its disk check (put path step 1)."""

    def __init__(self) -> None:
        self.role = BrokerRole()
        self.role.set_fenced(False)
        self.role.set_broker_id(1)
        self.role.to_master(1, 1, "127.0.0.1:1", "127.0.0.1:2")
        self.disk: Any = Disk()


def test_the_planted_master_refuses_puts_once_no_controller_answered_for_the_heartbeat_timeout() -> None:
    access, controllers, clock = Access(), Controllers(), Clock()
    disk = access.disk
    maybe_plant_master(access, controllers, 1500, {MASTER_NEEDS_CONTROLLER_ENV: "1"}, clock)
    assert access.disk.refusal() is None
    controllers.up = False
    clock.now += 1.0
    assert asyncio.run(controllers.call("GET", "/replica-info")) is None  # no leader answers
    assert access.disk.refusal() is None
    clock.now += 1.0  # 2 s since the last answer > 1.5 s
    assert "no controller has answered for 1500 ms" in (access.disk.refusal() or "")
    disk.full = "disk full"
    assert access.disk.refusal() == "disk full"  # the real check first
    disk.full = None
    controllers.up = True
    asyncio.run(controllers.call("GET", "/replica-info"))
    assert access.disk.refusal() is None
    controllers.up = False
    clock.now += 2.0
    access.role.to_slave(MasterInfo(2, "127.0.0.1:3", "127.0.0.1:4"), 2)
    assert access.disk.refusal() is None  # a slave's refusal is the put path's own


def test_without_the_environment_nothing_is_planted() -> None:
    access, controllers = Access(), Controllers()
    before = (access.disk, controllers.call)
    maybe_plant_master(access, controllers, 1500, {})
    assert (access.disk, controllers.call) == before
    assert planted_env(["master-needs-controller"]) == {MASTER_NEEDS_CONTROLLER_ENV: "1"}
    assert PLANTED["master-needs-controller"].caught_by == ("all-controllers", "raft-loss")
