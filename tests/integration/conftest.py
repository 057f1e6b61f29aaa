"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.processes import ProcessGroup


@pytest.fixture
def group() -> Iterator[ProcessGroup]:
    """A process group whose processes are all stopped (by pid) when the test ends."""
    with ProcessGroup() as g:
        yield g
