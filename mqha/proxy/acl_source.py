"""mqproxy's copy of the ACL users and policies, fetched from the controllers (shell; docs/architecture.md
§12.11, §12.12).

Every ``proxyAclRefreshMillis`` (1000) the proxy asks the controller leader for the book
(``GET /v1/acl/book``, signed with ``innerClientAuthenticationCredentials``), opens the sealed
passwords with the same credentials and hands :class:`ClientAccess` a new book: a change made with
mqadmin applies within about a second, without a restart. ``initAuthenticationUser`` stays in the book
as a Super user whatever the controllers say. While no controller answers, the last book stays in use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp
import msgspec

from mqha.controller_client.caller import LeaderCaller, NoLeaderAnswer
from mqha.controller_client.policy import Policy
from mqha.errors import RemoteProtocolError
from mqha.proxy.client_auth import ClientAccess, initial_users
from mqha.proxy.config import controller_addresses
from mqha.replicas_manager.client import request_signer
from mqha.security.acl import AccessBook, AclError, AclUser, PolicyEntry, entries_from_json, parse_user_type
from mqha.security.credentials import parse_inner_credentials
from mqha.security.sealed import SealError, unseal
from mqha.wire.acl_api import AclBookPayload

log = logging.getLogger(__name__)
_TIMEOUT_S = 2.0


def book_from(payload: AclBookPayload, secret_key: str, initial: Mapping[str, AclUser]) -> AccessBook:
    """The controllers' book as the proxy decides with it (pure); a user whose password does not open
    (the inner credentials changed since it was set) or a malformed policy is left out, and logged."""
    users: dict[str, AclUser] = {}
    for user in payload.users:
        try:
            password = unseal(secret_key, user.username, user.sealed_password)
            users[user.username] = AclUser(user.username, parse_user_type(user.user_type), password)
        except (SealError, AclError) as exc:
            log.warning(
                "ACL user %s left out: %s (set its password again: updateUser -p)", user.username, exc
            )
    users.update(initial)
    policies: dict[str, tuple[PolicyEntry, ...]] = {}
    for acl in payload.acls:
        username = acl.subject.partition(":")[2]
        try:
            policies[username] = entries_from_json(msgspec.to_builtins(entry) for entry in acl.entries)
        except (AclError, KeyError) as exc:
            log.warning("the ACL policy of %s left out: %s", acl.subject, exc)
    return AccessBook(users, policies)


class AclSource:
    """Keeps ``access``'s book equal to the controllers' (a task polling the leader)."""

    def __init__(self, config: Mapping[str, Any], access: ClientAccess) -> None:
        self._addresses = controller_addresses(config)
        self._signer = request_signer(config)
        credentials = config.get("innerClientAuthenticationCredentials") or ""
        self._secret = parse_inner_credentials(credentials).secret_key if credentials else ""
        self._initial = initial_users(config)
        self._interval_s = config["proxyAclRefreshMillis"] / 1000
        self._access = access
        self._applied = -1
        self._problem = ""  # the last refusal logged
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        policy = Policy(rounds=1, discover=False, max_redirects=max(2, len(self._addresses)))
        self._caller = LeaderCaller(self._addresses, policy, session=self._session, signer=self._signer)
        await self.refresh()
        self._task = asyncio.create_task(self._run(), name="acl-source")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._session is not None:
            await self._session.close()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.refresh()
            except Exception:  # the loop must outlive one bad answer
                log.exception("refreshing the ACL book")

    async def refresh(self) -> bool:
        """Fetch the book once; True when a new one is in use."""
        try:
            answer = await self._caller.call("GET", "/v1/acl/book", timeout_s=_TIMEOUT_S)
        except (NoLeaderAnswer, RemoteProtocolError) as exc:
            log.debug("the ACL book: no controller leader answered: %s", exc)
            return False
        if not answer.reply.ok:  # e.g. controllers older than ACLs: said once, not every second
            problem = f"{answer.reply.code.name} {answer.reply.remark}"
            log.log(
                logging.DEBUG if problem == self._problem else logging.WARNING, "the ACL book: %s", problem
            )
            self._problem = problem
            return False
        self._problem = ""
        payload = AclBookPayload.from_json(answer.reply.payload)
        if payload.applied_index == self._applied:
            return False
        self._access.use_book(book_from(payload, self._secret, self._initial))
        self._applied = payload.applied_index
        return True
