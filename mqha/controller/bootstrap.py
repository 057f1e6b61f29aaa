"""At start, the role this controller's store gets: read ``storage.json``, or ask the peers (shell).

docs/raft.md §10. A store that has an identity starts in its role. A blank store is formatted
``pending`` (a new storageId, written durably before anything else) and asks every configured peer
``GET /v1/controller/storage`` until :func:`mqha.controller.raft.identity.decide_start` decides:
join the existing cluster as an observer (or as a voter if it names us), or bootstrap with every
configured peer. The HTTP API must already be serving, so that peers can ask us too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from mqha.controller.config import Peer, parse_peers
from mqha.controller.raft import identity as ids
from mqha.controller.raft import storage_file
from mqha.security.tls import client_context, scheme_of

log = logging.getLogger(__name__)

ASK_INTERVAL = 0.2  # seconds between two rounds of questions to the peers
ASK_TIMEOUT = 1.0  # seconds one peer has to answer
LOG_INTERVAL = 5.0  # seconds between two "still waiting" lines


def load_or_format(store_dir: str, node_id: str) -> ids.StorageIdentity:
    """The store's identity; a blank store is formatted ``pending`` first (durably).
    ``IdentityError`` for a damaged or pre-identity store, or one made for another node id."""
    identity = storage_file.load(store_dir)
    if identity is None:
        identity = ids.pending(node_id)
        storage_file.save(store_dir, identity)
        log.info("formatted a new store in %s: storageId %s", store_dir, identity.storage_id)
    elif identity.node_id != node_id:
        raise ids.IdentityError(
            f"{store_dir} belongs to controller {identity.node_id!r}, not {node_id!r} "
            "(controllerDLegerSelfId)"
        )
    return identity


async def resolve_role(identity: ids.StorageIdentity, config: Mapping[str, Any]) -> ids.StorageIdentity:
    """Return ``identity`` with a decided role, asking the peers while it is pending (no time limit:
    a first start waits for every configured peer; the wait is logged). Not saved: see below."""
    if identity.role != ids.PENDING:
        return identity
    raft_port_offset = config["controllerRaftPortOffset"]
    peers = parse_peers(config["controllerDLegerPeers"])
    others = [p for p in peers if p.node_id != identity.node_id]
    self_raft = next(p for p in peers if p.node_id == identity.node_id).raft_address(raft_port_offset)
    context = client_context(config)
    scheme = scheme_of(context)
    last_log = 0.0
    timeout = aiohttp.ClientTimeout(total=ASK_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            answers = await asyncio.gather(
                *(_ask(session, scheme, context, p, p.raft_address(raft_port_offset)) for p in others)
            )
            decision = ids.decide_start(
                identity, self_raft, {p.node_id: a for p, a in zip(others, answers, strict=True)}
            )
            if isinstance(decision, ids.StorageIdentity):
                # Not saved here: the caller saves the role once the Raft journal exists, so that a
                # "voter" storage.json always comes with the journal it votes from (load refuses one
                # without). A crash before that leaves it pending: it asks again and decides the same.
                log.info(
                    "store %s joins cluster %s as a %s (voters %s)",
                    decision.storage_id,
                    decision.cluster_id,
                    decision.role,
                    ",".join(decision.voters),
                )
                return decision
            if time.monotonic() - last_log >= LOG_INTERVAL:
                last_log = time.monotonic()
                log.info("store %s is pending: %s", identity.storage_id, decision.reason)
            await asyncio.sleep(ASK_INTERVAL)


async def _ask(
    session: aiohttp.ClientSession, scheme: str, context: Any, peer: Peer, raft_address: str
) -> ids.PeerAnswer | None:
    url = f"{scheme}://{peer.api_address}/v1/controller/storage"
    try:
        async with session.get(url, ssl=context if context is not None else False) as response:
            if response.status != 200:
                return None
            answer = ids.PeerAnswer.from_json(await response.json())
    except (aiohttp.ClientError, TimeoutError, ValueError, ids.IdentityError):
        return None
    if answer.node_id != peer.node_id or ids.split_raft_id(answer.raft_id)[0] != raft_address:
        log.warning(
            "%s answered as %s (%s), not as %s",
            peer.api_address,
            answer.node_id,
            answer.raft_id,
            peer.node_id,
        )
        return None
    return answer
