"""Consumer groups' committed offsets at the controllers, as mqproxy reads and writes them (shell;
docs/architecture.md §13, §4.5).

``GET /v1/consumer-offsets?consumerGroup=&topic=`` loads a group's offsets in a topic when the proxy
first serves it; ``POST /v1/consumer-offsets/update`` commits positions, signed with
``innerClientAuthenticationCredentials`` when ``authenticationEnabled`` (the controllers take writes
only from nodes that hold them, docs/architecture.md §12). Both go to the Raft leader through
``controller_client`` and give up quickly (None): a commit is sent again next period, a load is tried
again at the next receive.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import aiohttp

from mqha.codes import ResponseCode
from mqha.controller_client.caller import LeaderCaller, NoLeaderAnswer
from mqha.controller_client.policy import Policy
from mqha.errors import RemoteProtocolError
from mqha.proxy.config import controller_addresses
from mqha.proxy.pop import OffsetKey
from mqha.replicas_manager.client import request_signer
from mqha.wire.offsets_api import ConsumerOffsetData, ConsumerOffsetsPayload

log = logging.getLogger(__name__)
_TIMEOUT_S = 2.0


class OffsetStore:
    """Loads and commits consumer offsets at the controllers (one aiohttp session)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._addresses = controller_addresses(config)
        self._signer = request_signer(config)
        self._session: aiohttp.ClientSession | None = None
        self._caller: LeaderCaller | None = None

    def _leader(self) -> LeaderCaller:
        if self._caller is None:
            self._session = aiohttp.ClientSession()
            policy = Policy(rounds=1, discover=False, max_redirects=max(2, len(self._addresses)))
            self._caller = LeaderCaller(self._addresses, policy, session=self._session, signer=self._signer)
        return self._caller

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
            self._caller = None

    async def load(self, group: str, topic: str) -> dict[tuple[str, int], int] | None:
        """The group's committed offsets in ``topic`` by (broker group, queue id); None when the
        controllers cannot say now. A controller older than offsets (code 3) has none: ``{}``."""
        try:
            answer = await self._leader().call(
                "GET",
                "/v1/consumer-offsets",
                params={"consumerGroup": group, "topic": topic},
                timeout_s=_TIMEOUT_S,
            )
        except (NoLeaderAnswer, RemoteProtocolError) as exc:
            log.warning(
                "loading the offsets of %s in %s: no controller leader answered: %s", group, topic, exc
            )
            return None
        reply = answer.reply
        if reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            return {}
        if not reply.ok:
            log.warning("loading the offsets of %s in %s: %s %s", group, topic, reply.code.name, reply.remark)
            return None
        payload = ConsumerOffsetsPayload.from_json(reply.payload)
        return {(entry.broker_name, entry.queue_id): entry.commit_offset for entry in payload.offsets}

    async def commit(self, entries: list[tuple[OffsetKey, int]]) -> list[tuple[OffsetKey, int]] | None:
        """Send ``entries``; what the controllers then hold for each (its offset, raised or already
        higher), or None when no leader took them."""
        body = {
            "offsets": [
                ConsumerOffsetData(
                    consumer_group=group,
                    topic=topic,
                    broker_name=broker,
                    queue_id=queue_id,
                    commit_offset=offset,
                ).to_json()
                for (group, topic, broker, queue_id), offset in entries
            ]
        }
        try:
            answer = await self._leader().call(
                "POST", "/v1/consumer-offsets/update", body=body, write=True, timeout_s=_TIMEOUT_S
            )
        except (NoLeaderAnswer, RemoteProtocolError) as exc:
            log.warning(
                "committing %d consumer offsets: no controller leader answered: %s", len(entries), exc
            )
            return None
        reply = answer.reply
        if not reply.ok:
            log.warning("committing %d consumer offsets: %s %s", len(entries), reply.code.name, reply.remark)
            return None
        payload = ConsumerOffsetsPayload.from_json(reply.payload)
        return [(entry.key, entry.commit_offset) for entry in payload.offsets]
