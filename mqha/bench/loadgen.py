"""Closed-loop load generator (shell): N clients, one request at a time each, for a fixed window.

Every benchmark drives both sides of a comparison through this one loop (same event loop, same
aiohttp keep-alive connections, same timing), so what differs between the two figures is the system
under test, not the client.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from yarl import URL

from mqha.bench.lean_http import LeanHttp
from mqha.bench.report import summarize
from mqha.controller_client.caller import Signer
from mqha.errors import MqhaError

Op = Callable[[], Awaitable[None]]
"""One request of one client; raises :class:`OpFailed` (or any exception) when it did not succeed."""


class OpFailed(MqhaError):
    """A request answered, but not with success; ``kind`` names why (counted per kind)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass
class LoadResult:
    """What one window of load showed."""

    clients: int
    seconds: float
    latencies: list[float] = field(default_factory=list)  # successful requests only, seconds
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def ops_per_s(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "seconds": self.seconds,
            "ops": len(self.latencies),
            "ops_per_s": self.ops_per_s,
            **summarize(self.latencies),
            "errors": dict(self.errors),
        }


async def closed_loop(ops: Sequence[Op], seconds: float) -> LoadResult:
    """Run every op in its own loop until ``seconds`` have passed; a failed request counts as an
    error and the client goes on (ops resynchronise their own state after a failure)."""
    result = LoadResult(len(ops), seconds)
    deadline = time.perf_counter() + seconds

    async def client(op: Op) -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                await op()
            except OpFailed as exc:
                result.errors[exc.kind] += 1
                continue
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                result.errors[type(exc).__name__] += 1
                await asyncio.sleep(0.01)  # a refused connection must not spin
                continue
            result.latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client(op) for op in ops))
    result.seconds = time.perf_counter() - started
    return result


Http = aiohttp.ClientSession | LeanHttp


def http_session(connections: int, timeout: float = 10.0) -> aiohttp.ClientSession:
    """A keep-alive aiohttp session with room for one connection per client."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections + 4),
        timeout=aiohttp.ClientTimeout(total=timeout),
    )


async def post_json(
    http: Http, url: str, body: Any, timeout: float | None = None, signer: Signer | None = None
) -> tuple[int, Any]:
    """POST JSON, return (status, decoded body); transport errors raise. ``signer``: the headers that
    prove who sends it (authentication on), computed per request."""
    if isinstance(http, LeanHttp):
        return await http.request("POST", url, body, timeout, signer)
    return await _aiohttp_json(http, "POST", url, body, timeout, signer=signer)


async def get_json(
    http: Http, url: str, timeout: float | None = None, signer: Signer | None = None
) -> tuple[int, Any]:
    """GET JSON, return (status, decoded body); transport errors raise."""
    if isinstance(http, LeanHttp):
        return await http.request("GET", url, None, timeout, signer)
    return await _aiohttp_json(http, "GET", url, None, timeout, signer=signer)


async def _aiohttp_json(
    http: aiohttp.ClientSession,
    method: str,
    url: str,
    body: Any,
    timeout: float | None,
    *,
    signer: Signer | None,
) -> tuple[int, Any]:
    kwargs: dict[str, Any] = {}
    if timeout is not None:
        kwargs["timeout"] = aiohttp.ClientTimeout(total=timeout)
    if signer is None:
        if body is not None:
            kwargs["json"] = body
    else:  # the signature covers the exact bytes and target sent, so both are made here
        data = b"" if body is None else json.dumps(body).encode()
        proof = signer(method, URL(url).raw_authority, URL(url).raw_path_qs, data)
        kwargs.update(data=data, headers={"Content-Type": "application/json", **proof})
    async with http.request(method, url, **kwargs) as response:
        return response.status, await response.json(content_type=None)


async def first_success(
    attempt: Callable[[], Awaitable[bool]], timeout: float, pause: float = 0.005
) -> float:
    """Seconds until ``attempt()`` first returns True (transport errors count as False); bounded."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if await attempt():
                return time.monotonic() - started
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
            pass
        await asyncio.sleep(pause)
    raise TimeoutError(f"no success within {timeout:g} s")
