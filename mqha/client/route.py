"""Route discovery: a broker group's master from the controllers' replica-info (shell, aiohttp).

Only the serving controller leader answers ``GET /v1/groups/{brokerName}/replica-info``; a follower
says 421 with ``leaderAddress``, which is followed at once. The leader that answered last is asked
first next time; on a connection error or 503 (no quorum) the next controller is tried. There is no
periodic route poll: the producer and consumer call :meth:`RouteResolver.resolve` when a send or read
tells them the route is stale (slave redirect, connection error, SERVICE_NOT_AVAILABLE).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

import aiohttp

from mqha.client.results import NoRouteError, Route, describe, json_field


def parse_controllers(controllers: str | Sequence[str]) -> list[str]:
    """``"h:p;h:p"`` (RocketMQ's ``controllerAddr``) or a list of ``host:port`` → a list, order kept."""
    items = controllers.split(";") if isinstance(controllers, str) else list(controllers)
    out = list(dict.fromkeys(i.strip().removeprefix("http://").rstrip("/") for i in items if i.strip()))
    if not out:
        raise ValueError("no controller address given")
    return out


class RouteResolver:
    """Asks the controllers where a group's master is; remembers which controller leads."""

    def __init__(
        self, controllers: str | Sequence[str], session: aiohttp.ClientSession, *, timeout: float = 1.0
    ) -> None:
        self.controllers = parse_controllers(controllers)
        self.session = session
        self.timeout = timeout
        self.leader: str | None = None
        self.lookups = 0

    def _candidates(self) -> list[str]:
        first = [self.leader] if self.leader else []
        return first + [c for c in self.controllers if c != self.leader]

    async def resolve(self, broker_name: str) -> Route:
        """The group's current master. Raises :class:`NoRouteError` when no controller leader answers
        or the group has no master right now (e.g. in the middle of an election)."""
        self.lookups += 1
        problems: list[str] = []
        path = f"/v1/groups/{quote(broker_name, safe='')}/replica-info"
        tried: set[str] = set()
        queue = self._candidates()
        while queue:
            address = queue.pop(0)
            if address in tried:
                continue
            tried.add(address)
            try:
                async with self.session.get(
                    f"http://{address}{path}", timeout=aiohttp.ClientTimeout(total=self.timeout)
                ) as response:
                    status = response.status
                    body = await response.json(content_type=None)
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                problems.append(f"{address}: {describe(exc)}")
                if self.leader == address:
                    self.leader = None
                continue
            if status == 421:  # not the leader: go straight to the one it names
                hint = json_field(body, "leaderAddress")
                if isinstance(hint, str) and hint and hint not in tried:
                    queue.insert(0, hint)
                problems.append(f"{address}: not leader")
                continue
            if status != 200:
                problems.append(f"{address}: HTTP {status} {json_field(body, 'remark') or ''}".rstrip())
                continue
            self.leader = address
            master_address = json_field(body, "masterAddress")
            master_id = json_field(body, "masterBrokerId")
            if not master_address or master_id is None or master_id < 0:
                raise NoRouteError(f"{broker_name} has no master right now (asked {address})")
            sss = json_field(body, "syncStateSet") or []
            return Route(
                broker_name=broker_name,
                master_broker_id=int(master_id),
                master_address=str(master_address),
                master_epoch=int(json_field(body, "masterEpoch") or 0),
                sync_state_set=tuple(sorted(int(i) for i in sss)),
                sync_state_set_epoch=json_field(body, "syncStateSetEpoch"),
            )
        raise NoRouteError(f"no controller leader answered for {broker_name}: {'; '.join(problems)}")
