"""Whether the controllers agree at the end of a chaos run (core).

Pure: the controllers' answers in, a judgement out. They agree when every one answers, every one
runs as a voter (a wiped store was brought back through the whole procedure), every one sees the same
voter set -- exactly their own raftIds, no voter of a wiped store left behind -- and every one has
applied the same state at the same Raft index.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ControllerView:
    """One controller's answers: ``GET /v1/controller/storage``, ``/quorum`` and ``/status`` (None: none)."""

    name: str
    storage: Mapping[str, Any] | None
    quorum: Mapping[str, Any] | None
    status: Mapping[str, Any] | None


@dataclass(frozen=True)
class Agreement:
    """Whether the controllers agree, with one line saying so or naming the first difference."""

    ok: bool
    text: str


def _voters(quorum: Mapping[str, Any]) -> list[str]:
    return sorted(str(v.get("raftId")) for v in quorum.get("voters") or [])


def _applied(status: Mapping[str, Any]) -> tuple[Any, str]:
    raft = status.get("raft") or {}
    return raft.get("last_applied"), json.dumps(status.get("state"), sort_keys=True)


def judge_agreement(views: Sequence[ControllerView]) -> Agreement:
    """See the module docstring; the first difference found is named."""
    if not views:
        return Agreement(False, "no controllers")
    for v in views:
        missing = [what for what in ("storage", "quorum", "status") if getattr(v, what) is None]
        if missing:
            return Agreement(False, f"{v.name} does not answer ({', '.join(missing)})")
    answered = [(v, v.storage or {}, v.quorum or {}, v.status or {}) for v in views]
    for v, storage, _, _ in answered:
        if storage.get("role") != "voter":
            return Agreement(False, f"{v.name} is {storage.get('role')}, not a voter")
    expected = sorted(str(storage.get("raftId")) for _, storage, _, _ in answered)
    for v, _, quorum, _ in answered:
        if _voters(quorum) != expected:
            return Agreement(
                False, f"{v.name} sees voters {','.join(_voters(quorum))}, not {','.join(expected)}"
            )
    first, _, _, first_status = answered[0]
    index, state = _applied(first_status)
    for v, _, _, status in answered[1:]:
        other_index, other_state = _applied(status)
        if (other_index, other_state) != (index, state):
            same = "the same state" if other_state == state else "a different state"
            return Agreement(
                False, f"{v.name} applied {same} at index {other_index}, {first.name} at index {index}"
            )
    names = ",".join(v.name for v in views)
    return Agreement(True, f"{names} all voters, one voter set, the same applied state at index {index}")
