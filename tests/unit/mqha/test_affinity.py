"""``mqha.affinity``: CPU lists as ``taskset -c`` writes them, read and written back (pure), and the
pin applied to every thread of a process."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.affinity import MAX_CPU, allowed_cpus, format_cpu_list, parse_cpu_list, pin_process


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("", set()),
        ("  ", set()),
        ("1", {1}),
        ("0,2-3", {0, 2, 3}),
        (" 3 - 5 , 1 ", {1, 3, 4, 5}),
        ("2-2", {2}),
        ("1,1,0-1", {0, 1}),
        (str(MAX_CPU), {MAX_CPU}),
    ],
)
def test_lists_taskset_takes_are_read(text: str, cpus: set[int]) -> None:
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("one", "not a CPU number"),
        ("-1", "not a CPU number"),
        ("1-", "not a CPU number"),
        ("1,,2", "empty item"),
        ("1,", "empty item"),
        ("3-1", "runs backwards"),
        ("1.5", "not a CPU number"),
        ("٣", "not a CPU number"),  # a digit, but not an ASCII one
        (str(MAX_CPU + 1), "above"),
        ("0-99999999999", "above"),
    ],
)
def test_anything_else_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_cpu_list(text)


@given(st.frozensets(st.integers(0, 300)))
def test_a_written_list_reads_back_as_the_same_cpus(cpus: frozenset[int]) -> None:
    text = format_cpu_list(cpus)
    assert parse_cpu_list(text) == cpus
    assert text.count(",") < len(cpus) or not cpus  # runs are ranges, not one item per CPU


def test_runs_are_written_as_ranges() -> None:
    assert format_cpu_list({0, 1, 2, 3, 6, 8, 9}) == "0-3,6,8-9"


def test_the_pin_reaches_threads_already_running_and_those_started_later() -> None:
    before = allowed_cpus()
    one = frozenset({min(before)})
    started = threading.Event()
    finish = threading.Event()
    seen: dict[str, frozenset[int]] = {}

    def running() -> None:
        started.set()
        finish.wait(10)
        seen["running"] = frozenset(os.sched_getaffinity(0))

    def later() -> None:
        seen["later"] = frozenset(os.sched_getaffinity(0))

    early = threading.Thread(target=running)
    early.start()
    started.wait(10)
    try:
        pin_process(one)
        late = threading.Thread(target=later)
        late.start()
        late.join(10)
        finish.set()
        early.join(10)
        assert seen == {"running": one, "later": one}
        assert allowed_cpus() == one
    finally:
        finish.set()
        pin_process(before)
    assert allowed_cpus() == before
