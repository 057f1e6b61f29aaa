"""``run_async``: run an ``async def`` test with ``asyncio.run`` under a time bound (no pytest plugin)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any


def run_async(timeout: float = 60.0) -> Callable[[Callable[..., Awaitable[None]]], Callable[..., None]]:
    """Decorator factory: the test fails with ``TimeoutError`` when it runs past ``timeout`` seconds."""

    def decorate(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
        @functools.wraps(test)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            asyncio.run(asyncio.wait_for(test(*args, **kwargs), timeout))

        return wrapper

    return decorate
