"""CPU affinity: a CPU list as ``taskset -c`` takes it, and pinning every thread of this process to it.

mqproxy is one event loop plus gRPC's C threads, and every call crosses them: a thread reads the
request, another takes it off the completion queue, the loop runs the servicer. When those threads
may run on any CPU, each hand-over can be a wake-up on another CPU (an inter-processor interrupt; on
a virtual machine, a halted virtual CPU woken by the host). Kept on one CPU, the hand-overs are
plain switches on a warm cache (docs/performance.md §9). ``parse_cpu_list`` is pure; ``pin_process``
is the shell.
"""

from __future__ import annotations

import os

MAX_CPU = 4095
"""The highest CPU number a list may name (Linux's default ``CONFIG_NR_CPUS`` limit is 8192; no
machine mqha runs on comes close)."""


def parse_cpu_list(text: str) -> frozenset[int]:
    """The CPUs ``text`` names: numbers and ranges, comma-separated (``1``, ``0,2-3``); empty text
    names none. Raises ``ValueError`` saying what is wrong (pure)."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            if text.strip():
                raise ValueError("an empty item between commas")
            continue
        low_text, dash, high_text = part.partition("-")
        low, high = _cpu(low_text), _cpu(high_text) if dash else None
        if high is None:
            cpus.add(low)
        elif high < low:
            raise ValueError(f"the range {part} runs backwards")
        else:
            cpus.update(range(low, high + 1))
    return frozenset(cpus)


def _cpu(text: str) -> int:
    text = text.strip()
    if not text.isascii() or not text.isdigit():
        raise ValueError(f"{text!r} is not a CPU number")
    number = int(text)
    if number > MAX_CPU:
        raise ValueError(f"CPU {number} is above {MAX_CPU}")
    return number


def format_cpu_list(cpus: frozenset[int] | set[int]) -> str:
    """``cpus`` as a list ``parse_cpu_list`` reads, runs as ranges (``0-3,6``)."""
    runs: list[str] = []
    ordered = sorted(cpus)
    start = 0
    for index, cpu in enumerate(ordered):
        if index + 1 == len(ordered) or ordered[index + 1] != cpu + 1:
            first = ordered[start]
            runs.append(str(first) if first == cpu else f"{first}-{cpu}")
            start = index + 1
    return ",".join(runs)


def allowed_cpus() -> frozenset[int]:
    """The CPUs this process may run on now."""
    return frozenset(os.sched_getaffinity(0))


def pin_process(cpus: frozenset[int]) -> None:
    """Keep every thread of this process, and every thread it starts later, on ``cpus`` (a thread
    inherits its creator's affinity). Raises ``OSError`` when the kernel refuses them."""
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except ProcessLookupError:  # the thread ended meanwhile
            continue
