"""TEST ONLY: planted bugs that the chaos harness must catch (``mqha chaos --plant-ack-before-replication``).

A planted bug replaces one part of a broker at start-up; the production modules carry no switch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from mqha.autoswitch_ha.ack import AckStatus

ACK_BEFORE_REPLICATION_ENV = "MQHA_TEST_ONLY_ACK_BEFORE_REPLICATION"
"""``=1`` in a broker's environment: its put path answers before any replica acked, whatever the ack
policy, so a run can show that it catches lost acknowledged messages. Never set it anywhere else."""


class AckBeforeReplicationGate:
    """The HA layer as the store sees it, except that waiting for replicas returns at once."""

    def __init__(self, gate: Any) -> None:
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gate, name)

    async def wait_for_replicas(self, next_offset: int) -> AckStatus:
        return AckStatus.OK


def maybe_plant(gate: Any, environ: Mapping[str, str] = os.environ) -> Any:
    """``gate`` itself, or the buggy wrapper when the environment plants the bug."""
    if environ.get(ACK_BEFORE_REPLICATION_ENV) == "1":
        return AckBeforeReplicationGate(gate)
    return gate
