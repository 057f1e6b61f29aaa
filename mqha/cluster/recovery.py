"""A failover's gap as a producing client saw it, from a :class:`ProduceWorkload`'s results (shell)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from mqha.cluster.workload import ProduceWorkload


@dataclass(frozen=True)
class RecoverySample:
    """One failover as the client saw it (seconds, ``time.monotonic`` clock).

    ``recovery``: first failed send attempt → first send acknowledged by the new master.
    """

    killed_at: float
    first_failure_at: float
    first_new_ack_at: float
    new_epoch: int

    @property
    def recovery(self) -> float:
        return self.first_new_ack_at - self.first_failure_at

    @property
    def kill_to_ack(self) -> float:
        return self.first_new_ack_at - self.killed_at


class RecoveryMeter:
    """Measures the failover gap after a master fault from the sends of a running produce workload."""

    def __init__(self, workload: ProduceWorkload) -> None:
        self._workload = workload

    def sample(self, killed_at: float, old_epoch: int) -> RecoverySample | None:
        """The failover gap after a master kill at ``killed_at`` (monotonic), once the new master
        (epoch > ``old_epoch``) has acknowledged a send; None before that."""
        tail = [r for r in self._workload.snapshot() if r.completed_at >= killed_at]
        acks = [r for r in tail if r.ok and r.epoch is not None and r.epoch > old_epoch]
        if not acks:
            return None
        first_ack = min(acks, key=lambda r: r.completed_at)
        failures = [
            r.first_error_at for r in tail if r.first_error_at is not None and r.first_error_at >= killed_at
        ]
        # With sends in flight the kill always fails one; if none did, count from the kill itself.
        first_failure = min(failures) if failures else killed_at
        return RecoverySample(killed_at, first_failure, first_ack.completed_at, int(first_ack.epoch or 0))

    def wait(self, killed_at: float, old_epoch: int, timeout: float = 30.0) -> RecoverySample:
        """``sample`` once there is one (TimeoutError after ``timeout``), measured again after the sends
        in flight settled."""
        deadline = time.monotonic() + timeout
        while True:
            sample = self.sample(killed_at, old_epoch)
            if sample is not None:
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"no send acknowledged by a master of epoch > {old_epoch} within {timeout:g} s"
                )
            time.sleep(0.01)
        # Sends that failed earlier may still be completing: let every loop finish one send started
        # after the first new ack (bounded), then measure again.
        settle = time.monotonic() + 3.0
        while time.monotonic() < settle:
            later = sum(r.started_at > sample.first_new_ack_at for r in self._workload.snapshot())
            if later >= self._workload.concurrency:
                break
            time.sleep(0.01)
        return self.sample(killed_at, old_epoch) or sample
