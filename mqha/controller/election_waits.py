"""Which broker sets wait for a complete replica, and since when (soft state of one node; docs/architecture.md
§3.2).

An election that finds no alive replica holding every acknowledged message, while one that might is not
alive, does not elect: the set *waits*, up to ``uncleanRecoveryTimeoutMills`` from the first attempt that
had to wait. The first waiting attempt is remembered here (``mqha.controller.election.after_election``
decides it); the next decision gets how long the set has waited. Like liveness, this is never in the
log: a new leader starts the clock again (it can only wait longer, never elect a lossy replica sooner).
Time enters as ``now_ms`` arguments.
"""

from __future__ import annotations

from mqha.controller.election import Waiting


class ElectionWaits:
    """Per broker set: the wait that started with the first election attempt that had to wait."""

    def __init__(self) -> None:
        self._waits: dict[str, Waiting] = {}

    def waited_ms(self, broker_name: str, now_ms: int) -> int | None:
        """How long ``broker_name`` has been waiting (None: it is not waiting)."""
        wait = self._waits.get(broker_name)
        return None if wait is None else max(0, now_ms - wait.since_ms)

    def set(self, broker_name: str, wait: Waiting | None) -> None:
        """The set's wait as ``after_election`` decided it (None: it does not wait)."""
        if wait is None:
            self._waits.pop(broker_name, None)
        else:
            self._waits[broker_name] = wait

    def clear(self, broker_name: str) -> None:
        self._waits.pop(broker_name, None)

    def clear_all(self) -> None:
        self._waits.clear()

    def get(self, broker_name: str) -> Waiting | None:
        return self._waits.get(broker_name)

    def waiting(self) -> dict[str, Waiting]:
        """Every set that waits now, by name."""
        return dict(self._waits)
