"""The ``disk-wipe`` fault of a chaos run, and the end-of-run check that the controllers agree (shell).

A wipe kills a controller and deletes its ``controllerStorePath``; the heal restarts it with the same
config and follows the disk-replacement procedure (docs/raft.md §10) through
``mqha.cluster.controller_store``, as an operator would: wait until the node is an observer, remove
the voter its address served as, add its new raftId. The store's ``history.db`` is not the node's
state but the run's record of what it decided: it is moved aside (``wiped-<n>/`` next to the store)
before the wipe, so the analysis still sees every decision the node took before it lost its disk.

A wiped controller that comes back as a voter, or under the storageId of the store it lost, fails the
run (the ``controllers:`` line): it would vote without the entries it acknowledged and the votes it
cast. Its outcome -- decisions rolled back -- needs a majority that lacks a committed entry, which these
wipes build only by chance (the third controller, which holds everything, stays up), so the identity
itself is checked.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from mqha.chaos.agreement import Agreement, ControllerView, judge_agreement
from mqha.chaos.schedule import KILL, FaultStep
from mqha.cluster import controller_store
from mqha.cluster.controller_store import QUORUM, STORAGE
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import ClusterError, http_get
from mqha.history.database import HISTORY_FILE_NAME

OBSERVER_TIMEOUT = 30.0  # restart of a wiped controller -> it runs as an observer
AGREEMENT_POLL = 0.5


class ControllerStores:
    """Wipes a controller's store and brings it back as a voter; checks that the controllers agree."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.token = cluster.controller_settings.get("adminAuthToken", "")
        self.wipes = 0
        self.lost_identity: dict[str, str] = {}  # wiped node -> the storageId of the store it lost
        self.violations: list[str] = []  # wiped controllers that came back voting (one line each)

    @property
    def urls(self) -> list[str]:
        return [c.url for c in self.cluster.controllers]

    def hit(self, step: FaultStep, nodes: Sequence[str]) -> None:
        """kill -9 the wiped controller (and the overlapping fault's), then wipe its store."""
        wiped, others = nodes[0], nodes[1:]
        self.cluster.kill(wiped)
        for other in others:
            if step.overlap == KILL:
                self.cluster.kill(other)
            else:
                self.cluster.pause(other)
        self.wipe(wiped)

    def wipe(self, name: str) -> None:
        node = self.cluster.node(name)
        self.wipes += 1
        try:
            self.lost_identity[name] = json.loads((node.store / "storage.json").read_text())["storageId"]
        except (OSError, ValueError, KeyError, TypeError):
            self.lost_identity.pop(name, None)
        kept = Path(node.base) / f"wiped-{self.wipes}"
        kept.mkdir(parents=True, exist_ok=True)
        for part in node.store.glob(HISTORY_FILE_NAME + "*"):  # the database and its -wal / -shm
            part.rename(kept / part.name)
        shutil.rmtree(node.store, ignore_errors=True)

    def heal(self, step: FaultStep, nodes: Sequence[str], timeout: float) -> str | None:
        """Restart the wiped controller, heal the overlapping fault once it is an observer, replace
        its voter; None when it runs as a voter again, else what went wrong (one line)."""
        wiped, others = self.cluster.node(nodes[0]), nodes[1:]
        problem = violation = None
        try:
            self.cluster.start_node(wiped, timeout=OBSERVER_TIMEOUT)
            storage = controller_store.wait_role(wiped.url, ("observer", "voter"), OBSERVER_TIMEOUT)
            violation = self._voting_again(wiped.name, storage)
        except ClusterError as exc:
            problem = f"{wiped.name} did not come back as an observer: {str(exc).splitlines()[0]}"
        for other in others:
            if step.overlap == KILL:
                try:
                    self.cluster.start_node(other, timeout=OBSERVER_TIMEOUT)
                except ClusterError as exc:
                    problem = problem or f"restart of {other} failed: {str(exc).splitlines()[0]}"
            else:
                self.cluster.resume(other)
        if problem is not None:
            return problem
        try:
            controller_store.rejoin(self.urls, wiped.address, self.token, timeout)
        except ClusterError as exc:
            return f"{wiped.name} not a voter again: {str(exc).splitlines()[0]}"
        return violation

    def _voting_again(self, name: str, storage: dict[str, object]) -> str | None:
        """The violation when the restarted ``name`` runs as a voter or under its lost store's id."""
        lost = self.lost_identity.get(name)
        if storage.get("role") != "voter" and storage.get("storageId") != lost:
            return None
        violation = (
            f"{name} came back from its disk wipe as a {storage.get('role')} under storageId "
            f"{storage.get('storageId')} (the lost store's: {lost}): it votes without the log it "
            "acknowledged (docs/raft.md §10)"
        )
        self.violations.append(violation)
        return violation

    def ensure_voters(self, timeout: float) -> list[str]:
        """Finish the procedure for every running controller that is not a voter (a wipe whose heal
        ran out of time); the problems left (empty: every controller is a voter)."""
        problems = []
        for node in self.cluster.controllers:
            storage = controller_store.node_storage(node.url)
            if storage is not None and storage.get("role") == "voter":
                continue
            try:
                controller_store.rejoin(self.urls, node.address, self.token, timeout)
            except ClusterError as exc:
                problems.append(f"{node.name}: {str(exc).splitlines()[0]}")
        return problems

    def views(self) -> list[ControllerView]:
        out = []
        for node in self.cluster.controllers:
            answers = []
            for path in (STORAGE, QUORUM, "/v1/controller/status"):
                try:
                    code, body = http_get(node.url + path, timeout=2.0)
                except OSError:
                    code, body = 0, None
                answers.append(body if code == 200 and isinstance(body, dict) else None)
            out.append(ControllerView(node.name, *answers))
        return out

    def agreement(self, timeout: float) -> Agreement:
        """Ask until the controllers agree (followers apply a little after the leader), bounded; a
        wiped controller that came back voting never agrees."""
        if self.violations:
            return Agreement(False, self.violations[0])
        deadline = time.monotonic() + timeout
        while True:
            verdict = judge_agreement(self.views())
            if verdict.ok or time.monotonic() >= deadline:
                return verdict
            time.sleep(AGREEMENT_POLL)
