"""Replacing a controller's store online, as an operator would, over the controllers' HTTP API (shell).

The procedure of docs/raft.md §10: a controller whose store was wiped starts with the same config and
comes up as an observer (a new raftId, never a voter); the voter its address served as before is
removed (``POST /v1/controller/peers/remove``), then its new raftId is added
(``POST /v1/controller/peers/add``) once it has caught up, and it re-executes itself as a voter.

Voter changes go to the serving leader: an answer 421 / code 2007 names it (``leaderAddress``; null
while unknown, or when the leader is the voter being removed and hands leadership over), 503 / code
14 means "not yet" (no quorum, or the observer has not caught up). Both are retried, bounded by the
caller's timeout; any other refusal raises :class:`~mqha.cluster.nodes.ClusterError`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from mqha.cluster.nodes import ClusterError, http_json
from mqha.security.signing import bearer_header

STORAGE = "/v1/controller/storage"
QUORUM = "/v1/controller/quorum"
ADD = "/v1/controller/peers/add"
REMOVE = "/v1/controller/peers/remove"
NOT_LEADER = 2007
NOT_YET = 14
RETRY_PAUSE = 0.2  # seconds between two rounds of attempts
CALL_TIMEOUT = 8.0  # seconds one call may take (a voter change commits within 5 s, or says why not)


def _scheme(url: str) -> str:
    return url.split("://", 1)[0] if "://" in url else "http"


def _get(url: str, path: str, timeout: float = 1.0) -> dict[str, Any] | None:
    try:
        code, body = http_json("GET", url + path, timeout=timeout)
    except OSError:
        return None
    return body if code == 200 and isinstance(body, dict) else None


def node_storage(url: str) -> dict[str, Any] | None:
    """A controller's ``GET /v1/controller/storage`` (its role and raftId), None when it does not answer."""
    return _get(url, STORAGE)


def leader_quorum(controller_urls: Sequence[str]) -> dict[str, Any] | None:
    """The serving leader's ``GET /v1/controller/quorum`` (its voter set is the current one), or None."""
    for url in controller_urls:
        view = _get(url, QUORUM)
        if view is not None and view.get("self") and view.get("self") == view.get("leaderRaftId"):
            return view
    return None


def _admin_post(
    controller_urls: Sequence[str], path: str, body: dict[str, str], token: str, timeout: float
) -> dict[str, Any]:
    """POST ``body`` to the serving leader, following 2007 and retrying 503 until ``timeout``."""
    deadline = time.monotonic() + timeout
    headers = {"Authorization": bearer_header(token)} if token else {}
    scheme = _scheme(controller_urls[0])
    preferred: str | None = None
    last = "no controller answered"
    while True:
        for url in ([preferred] if preferred else []) + [u for u in controller_urls if u != preferred]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClusterError(f"{path} {body} not done within {timeout:g} s: {last}")
            try:
                status, answer = http_json(
                    "POST", url + path, body, timeout=min(CALL_TIMEOUT, left), headers=headers
                )
            except OSError as exc:
                last = f"{url}: {exc}"
                continue
            reply = answer if isinstance(answer, dict) else {}
            code = reply.get("code")
            last = f"{url}: HTTP {status} code {code} {reply.get('remark', '')}".rstrip()
            if status == 200:
                return reply
            if code == NOT_LEADER:
                leader = reply.get("leaderAddress")
                preferred = f"{scheme}://{leader}" if leader else None
                if preferred and preferred != url:
                    break  # ask the named leader first, at once
                continue
            if code == NOT_YET:
                break  # the same call again after a pause
            raise ClusterError(f"{path} {body} refused: {last}")
        else:
            preferred = None
        time.sleep(RETRY_PAUSE)


def remove_voter(controller_urls: Sequence[str], api_address: str, token: str, timeout: float) -> list[str]:
    """Remove the voter serving at ``api_address`` (the controller's API host:port) from the voter set;
    the voters after the change. A no-op (success) when no voter serves there."""
    reply = _admin_post(controller_urls, REMOVE, {"address": api_address}, token, timeout)
    return list(reply.get("voters") or [])


def wait_role(url: str, roles: Sequence[str], timeout: float) -> dict[str, Any]:
    """Until the controller at ``url`` reports one of ``roles`` in its storage; its storage document."""
    deadline = time.monotonic() + timeout
    while True:
        storage = node_storage(url)
        if storage is not None and storage.get("role") in roles:
            return storage
        if time.monotonic() >= deadline:
            seen = "no answer" if storage is None else f"role {storage.get('role')}"
            raise ClusterError(f"{url} is not {'/'.join(roles)} within {timeout:g} s ({seen})")
        time.sleep(RETRY_PAUSE)


def add_observer_as_voter(
    controller_urls: Sequence[str], new_api_address: str, token: str, timeout: float
) -> str:
    """Add the observer serving at ``new_api_address`` to the voter set (retried while it catches up)
    and wait until it runs as a voter; its raftId."""
    deadline = time.monotonic() + timeout
    url = f"{_scheme(controller_urls[0])}://{new_api_address}"
    storage = wait_role(url, ("observer", "voter"), timeout)
    raft_id = str(storage["raftId"])
    if storage["role"] == "observer":
        left = max(0.1, deadline - time.monotonic())
        _admin_post(controller_urls, ADD, {"raftId": raft_id}, token, left)
    # The observer sees itself added, writes role=voter and re-executes itself (same pid).
    wait_role(url, ("voter",), max(0.1, deadline - time.monotonic()))
    while http_healthy(url) is False:
        if time.monotonic() >= deadline:
            raise ClusterError(f"{url} did not come back healthy as a voter within {timeout:g} s")
        time.sleep(RETRY_PAUSE)
    return raft_id


def http_healthy(url: str) -> bool:
    try:
        return http_json("GET", url + "/healthz", timeout=1.0)[0] == 200
    except OSError:
        return False


def rejoin(controller_urls: Sequence[str], api_address: str, token: str, timeout: float) -> str:
    """Bring the controller at ``api_address`` (restarted on a new store) back as a voter, resuming
    wherever an earlier attempt stopped: wait for its role, remove the old voter at its address unless
    its new raftId is already in the voter set, add it. Its raftId."""
    deadline = time.monotonic() + timeout
    url = f"{_scheme(controller_urls[0])}://{api_address}"
    storage = wait_role(url, ("observer", "voter"), timeout)
    others = [u for u in controller_urls if u != url]
    if storage["role"] == "observer":
        view = leader_quorum(others)
        while view is None:  # no serving leader yet (e.g. no quorum until another controller is back)
            if time.monotonic() >= deadline:
                raise ClusterError(f"no serving controller leader within {timeout:g} s")
            time.sleep(RETRY_PAUSE)
            view = leader_quorum(others)
        voters = {v.get("raftId") for v in view.get("voters", [])}
        # Removing by address is safe only while our new raftId is not the voter serving there.
        if storage["raftId"] not in voters:
            remove_voter(others, api_address, token, max(0.1, deadline - time.monotonic()))
    return add_observer_as_voter(others, api_address, token, max(0.1, deadline - time.monotonic()))
