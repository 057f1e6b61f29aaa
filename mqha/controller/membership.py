"""The controller voter set: this store's identity, the quorum view, adding and removing voters (shell).

docs/raft.md §10. The voter set is PySyncObj's dynamic membership (in the log and in snapshots),
members named by raftId (``<raft host:port>/<storageId>``). An admin adds a voter only once it has
caught up as an observer, and removes one at a time; an observer that sees itself added becomes a
voter at its next start, which it asks for at once (:attr:`Membership.restart_wanted`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from mqha.codes import ResponseCode as Code
from mqha.controller.parts import NodePart, NodeParts
from mqha.controller.raft import NotLeaderError, ReplicationError, storage_file
from mqha.controller.raft import identity as ids
from mqha.controller.raft.addresses import api_address_of, raft_address_of
from mqha.wire.controller_api import Reply

log = logging.getLogger(__name__)

CHANGE_TIMEOUT = 5.0  # seconds a membership change may take to commit
CATCH_UP_SLACK = 100  # entries an observer may lag the leader's commit index and still be added
WATCH_INTERVAL = 0.1  # seconds between two looks at the voter set


class Membership(NodePart):
    """Answers the storage and quorum reads and the add/remove admin calls; watches the voter set."""

    def __init__(self, parts: NodeParts, on_restart_wanted: Callable[[], None]) -> None:
        super().__init__(parts)
        self._on_restart_wanted = on_restart_wanted
        self._watch: asyncio.Task[None] | None = None
        self.restart_wanted = False

    # -- reads

    def storage(self) -> Reply:
        """This node's store identity (also while it is still deciding its role)."""
        identity = self.parts.identity
        offset = self.config["controllerRaftPortOffset"]
        payload: dict[str, Any] = {
            **identity.to_json(),
            "raftId": identity.raft_id(self.self_peer.raft_address(offset)),
        }
        payload.pop("format")
        return Reply(Code.SUCCESS, payload=payload)

    def quorum(self) -> Reply:
        """The voter set and observers as this node sees them (match indexes on the leader)."""
        status = self.log.status()
        voters = [self._member(raft_id, status["partners"].get(raft_id)) for raft_id in self.log.voter_ids()]
        observers = [
            {**self._member(raft_id, None), "matchIndex": match}
            for raft_id, match in status["observers"].items()
        ]
        leader_id, _ = self.leader()
        return Reply(
            Code.SUCCESS,
            payload={
                "clusterId": self.parts.identity.cluster_id,
                "self": self.log.self_id,
                "role": status["role"],
                "leaderId": leader_id,
                "leaderRaftId": self.log.leader_address(),
                "commitIndex": status["commit_index"],
                "voters": voters,
                "observers": observers,
            },
        )

    def _member(self, raft_id: str, partner: dict[str, Any] | None) -> dict[str, Any]:
        address, storage_id = ids.split_raft_id(raft_id)
        offset = self.config["controllerRaftPortOffset"]
        member: dict[str, Any] = {
            "raftId": raft_id,
            "apiAddress": api_address_of(address, offset),
            "storageId": storage_id,
        }
        if partner is not None:
            member["connected"] = partner["connected"]
            member["matchIndex"] = partner["match_index"]
        elif raft_id == self.log.self_id:
            member["self"] = True
        return member

    # -- admin calls (on the leader)

    async def add_peer(self, raft_id: str) -> Reply:
        """Add the observer ``raft_id`` to the voter set once it has caught up."""
        refused = self._leader_refusal()
        if refused is not None:
            return refused
        if raft_id in self.log.voter_ids():
            return Reply(
                Code.SUCCESS, f"{raft_id} is already a voter", payload={"voters": self.log.voter_ids()}
            )
        address = ids.split_raft_id(raft_id)[0]
        if any(ids.split_raft_id(v)[0] == address for v in self.log.voter_ids()):
            return Reply(
                Code.CONTROLLER_INVALID_REQUEST,
                f"a voter already serves at {address}: remove it first (removeControllerPeer)",
            )
        match = self.log.observers().get(raft_id)
        commit = self.log.commit_index()
        if match is None or match < commit - CATCH_UP_SLACK:
            return Reply(
                Code.SERVICE_NOT_AVAILABLE,
                f"{raft_id} is not a connected observer that has caught up "
                f"(match index {match}, commit index {commit}); retry",
            )
        return await self._change(self.log.add_voter, raft_id, "added")

    async def remove_peer(self, raft_id: str | None, address: str | None) -> Reply:
        """Remove a voter named by raftId, or by the API address it serves at."""
        refused = self._leader_refusal()
        if refused is not None:
            return refused
        voters = self.log.voter_ids()
        if raft_id is None and address is not None:
            raft_address = raft_address_of(address, self.config["controllerRaftPortOffset"])
            raft_id = next((v for v in voters if ids.split_raft_id(v)[0] == raft_address), None)
            if raft_id is None:
                return Reply(Code.SUCCESS, f"no voter serves at {address}", payload={"voters": voters})
        if raft_id is None:
            return Reply(Code.CONTROLLER_INVALID_REQUEST, "name the voter: raftId or address")
        if raft_id not in voters:
            return Reply(Code.SUCCESS, f"{raft_id} is not a voter", payload={"voters": voters})
        if len(voters) == 1:
            return Reply(Code.CONTROLLER_INVALID_REQUEST, "the last voter cannot be removed")
        if raft_id == self.log.self_id:
            self.log.transfer_leadership()
            return Reply(
                Code.CONTROLLER_NOT_LEADER,
                "this controller is the one to remove: it hands leadership over; retry on the new leader",
                payload={"leaderAddress": None},
            )
        return await self._change(self.log.remove_voter, raft_id, "removed")

    def _leader_refusal(self) -> Reply | None:
        if self.log.is_serving_leader():
            return None
        _, leader_api = self.leader()
        return Reply(
            Code.CONTROLLER_NOT_LEADER,
            "voter changes go to the serving leader",
            payload={"leaderAddress": leader_api},
        )

    async def _change(self, change: Callable[[str, float], Any], raft_id: str, done: str) -> Reply:
        try:
            await change(raft_id, CHANGE_TIMEOUT)
        except NotLeaderError:
            return self._leader_refusal() or Reply(Code.CONTROLLER_NOT_LEADER, "leadership moved")
        except ReplicationError as exc:
            return Reply(Code.SERVICE_NOT_AVAILABLE, f"the voter change did not commit: {exc}; retry")
        log.info("voter %s %s; voters now %s", raft_id, done, ",".join(self.log.voter_ids()))
        return Reply(Code.SUCCESS, f"{raft_id} {done}", payload={"voters": self.log.voter_ids()})

    # -- the watch: persist the voter set, notice our own promotion

    def start_watch(self) -> None:
        self._watch = asyncio.get_running_loop().create_task(self._run_watch())

    async def stop_watch(self) -> None:
        if self._watch is not None:
            task, self._watch = self._watch, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run_watch(self) -> None:
        seen_at: int | None = None  # log index when our raftId first appeared in the voter set
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            try:
                identity = self.parts.identity
                voters = self.log.voter_ids()
                if self.log.is_observer and self.log.self_id in voters:
                    seen_at = self.log.last_log_index() if seen_at is None else seen_at
                    if self.log.last_applied() >= seen_at:  # the change that added us is committed
                        await self._promote(voters)
                        return
                elif tuple(voters) != identity.voters and voters:
                    self.parts.identity = identity.with_voters(voters)
                    await asyncio.to_thread(
                        storage_file.save, self.config["controllerStorePath"], self.parts.identity
                    )
            except Exception:
                log.exception("voter-set watch failed; retrying")

    async def _promote(self, voters: list[str]) -> None:
        promoted = self.parts.identity.promoted(voters)
        await asyncio.to_thread(storage_file.save, self.config["controllerStorePath"], promoted)
        self.parts.identity = promoted
        self.restart_wanted = True
        log.warning(
            "this observer (%s) is now in the voter set; restarting to vote (voters %s)",
            self.log.self_id,
            ",".join(voters),
        )
        self._on_restart_wanted()
