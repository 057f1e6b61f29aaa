"""A write workload on the controllers during a chaos run: no acknowledged decision may be lost (shell).

The brokers of a steady cluster make almost no controller writes, so a fault that only hits the
controllers (a Raft partition, loss between them, all of them down) would find a controller that loses
acknowledged writes only by luck. This workload writes all the time: every ``interval`` seconds one
``updateTopic`` of a new topic (``chaos-probe-<n>``, one queue in every set of the cluster) through the
serving leader, with the admin token, the way mqadmin does. Each answer is kept: acknowledged (SUCCESS),
refused, or unknown (no answer: it may or may not have committed). At the end the leader's topic list
must hold every acknowledged topic -- Jepsen's set workload on the controllers' replicated state. The
topics touch nothing the brokers do (mqproxy reads them; a chaos run starts none).
"""

from __future__ import annotations

import asyncio
import threading
import time

from mqha.chaos.client_checks import PROBE_PREFIX as PREFIX
from mqha.chaos.client_checks import WriteLog
from mqha.controller_client.caller import LeaderCaller, NoLeaderAnswer
from mqha.controller_client.policy import Policy
from mqha.errors import RemoteProtocolError

POLICY = Policy(rounds=None, budget_ms=3_000, backoff_ms=50, backoff_max_ms=200)


class ControllerWrites:
    """Writes ``chaos-probe-<n>`` topics on its own event-loop thread until :meth:`stop`."""

    def __init__(
        self, controllers: list[str], cluster_name: str, headers: dict[str, str], interval: float = 0.25
    ) -> None:
        self.controllers = controllers
        self.cluster_name = cluster_name
        self.headers = headers  # the admin token's (``mqha.cluster.client_auth.admin_headers``)
        self.interval = interval
        self.log = WriteLog()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ControllerWrites:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="controller-writes")
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> WriteLog:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.log

    async def _main(self) -> None:
        caller = LeaderCaller(self.controllers, POLICY, headers=self.headers, call_timeout_s=2.0)
        try:
            n = 0
            while not self._stop.is_set():
                n += 1
                name = f"{PREFIX}{n}"
                outcome = await self._write(caller, name)
                getattr(self.log, outcome).append(name)
                await asyncio.sleep(self.interval)
        finally:
            await caller.close()

    async def _write(self, caller: LeaderCaller, name: str) -> str:
        body = {"clusterName": self.cluster_name, "topicName": name, "readQueueNums": 1, "writeQueueNums": 1}
        try:
            answer = await caller.call("POST", "/v1/topics/update", body=body, write=True)
        except (NoLeaderAnswer, RemoteProtocolError, OSError, TimeoutError):
            return "unknown"
        if answer.reply.ok:
            return "acked"
        # A leader that could not say whether the write committed answers "not available"/"no quorum".
        return "unknown" if answer.status >= 500 else "refused"


def present_topics(controllers: list[str], headers: dict[str, str], timeout: float = 30.0) -> set[str] | None:
    """The probe topics in the leader's state (None: no leader answered within ``timeout``)."""

    async def ask() -> set[str] | None:
        caller = LeaderCaller(controllers, POLICY, headers=headers, call_timeout_s=5.0)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                try:
                    answer = await caller.call("GET", "/v1/topics")
                except (NoLeaderAnswer, RemoteProtocolError, OSError, TimeoutError):
                    await asyncio.sleep(0.5)
                    continue
                if answer.reply.ok:
                    names = answer.reply.payload_json().get("topicList") or []
                    return {str(n) for n in names if str(n).startswith(PREFIX)}
                await asyncio.sleep(0.5)
            return None
        finally:
            await caller.close()

    return asyncio.run(ask())
