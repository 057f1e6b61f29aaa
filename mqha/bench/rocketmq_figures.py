"""Pure arithmetic of ``mqha bench rocketmq`` (core): what a Java driver's JSON lines say about one
load run, one fault cycle and the no-loss check, the same way for both sides."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mqha.bench.report import percentile

Event = Mapping[str, Any]


@dataclass(frozen=True)
class Sends:
    """A load run's answers: the acked (time, seq) pairs, the failed sends' times, the latencies (ms)."""

    acks: tuple[tuple[float, int], ...]
    failures: tuple[float, ...]
    latencies_ms: tuple[float, ...]

    @classmethod
    def of(cls, events: Iterable[Event]) -> Sends:
        acks, failures, latencies = [], [], []
        for event in events:
            if "seq" not in event or "ok" not in event:
                continue
            if event["ok"] is True:
                acks.append((float(event["t"]), int(event["seq"])))
                latencies.append(float(event.get("ms", 0.0)))
            else:
                failures.append(float(event["t"]))
        return cls(tuple(sorted(acks)), tuple(sorted(failures)), tuple(latencies))

    @property
    def acked(self) -> set[int]:
        return {seq for _, seq in self.acks}

    def throughput(self) -> float | None:
        """Acks per second from the first ack to the last (the client's start-up left out)."""
        if len(self.acks) < 2 or self.acks[-1][0] <= self.acks[0][0]:
            return None
        return (len(self.acks) - 1) / (self.acks[-1][0] - self.acks[0][0])

    def largest_gap(self, start: float, end: float) -> float | None:
        """The longest time without an ack around a fault at ``start``: between consecutive acks from
        the last one before it through the first one after ``end`` (or ``end`` itself when none came)."""
        times = [t for t, _ in self.acks]
        before = [t for t in times if t <= start]
        after = [t for t in times if t > end]
        span = [before[-1] if before else start]
        span += [t for t in times if start < t <= end]
        span.append(after[0] if after else end)
        return max(b - a for a, b in itertools.pairwise(span))

    def failed_between(self, start: float, end: float) -> int:
        return sum(1 for t in self.failures if start <= t <= end)


def loss(acked: Iterable[int], received: Sequence[int]) -> dict[str, int]:
    """How a read-back compares with what was acknowledged: acked seqs never received (lost), and
    receipts beyond the first of any seq (duplicated; redeliveries and double stores alike)."""
    counts = Counter(received)
    acked_set = set(acked)
    return {
        "acked": len(acked_set),
        "received": len(received),
        "lost": len(acked_set - counts.keys()),
        "duplicated": sum(n - 1 for n in counts.values() if n > 1),
    }


def p50_p99(values: Sequence[float]) -> tuple[float | None, float | None]:
    return percentile(values, 0.5), percentile(values, 0.99)


def consume_rate(times: Sequence[float]) -> float | None:
    """Messages per second from the first receipt to the last."""
    if len(times) < 2 or max(times) <= min(times):
        return None
    return (len(times) - 1) / (max(times) - min(times))


def per_thousand(cpu_seconds: float, messages: int) -> float | None:
    return None if messages <= 0 else cpu_seconds / messages * 1000
