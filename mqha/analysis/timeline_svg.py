"""The timeline picture of ``mqha analyze``'s HTML report (pure: rows in, SVG text out).

Per broker set: one lane for the controller's view (a bar per master tenure in the master's colour,
labelled e<masterEpoch> m<id> where the label fits without overlapping the next; SyncStateSet in the
tooltip), one lane per replica (MASTER periods in its colour, SLAVE grey, a diamond per epoch entry, a
red triangle per truncation), a time axis of 1/2/5 x 10^k steps in seconds since the set's first event
(up to its last ack or read), the first and last tick labels kept inside the picture; ``legend``
explains the colours.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mqha.analysis import invariants as inv

Row = Mapping[str, Any]


@dataclass
class GroupTimeline:
    """One broker set's rows for the HTML timeline.

    Controller events, roles, epochs and truncations, and ``end``: the set's last recorded ack or read
    (the picture runs until then).
    """

    broker_name: str
    controller: list[dict[str, Any]] = field(default_factory=list)
    roles: list[dict[str, Any]] = field(default_factory=list)
    epochs: list[dict[str, Any]] = field(default_factory=list)
    truncations: list[dict[str, Any]] = field(default_factory=list)
    end: int | None = None

    def broker_ids(self) -> list[int]:
        ids = {
            r["brokerId"]
            for r in [*self.roles, *self.epochs, *self.truncations]
            if r.get("brokerId") is not None
        }
        ids |= {r["masterBrokerId"] for r in self.controller if r.get("masterBrokerId") is not None}
        return sorted(ids)

    def time_range(self) -> tuple[int, int]:
        stamps = [
            r["ts"] for r in [*self.controller, *self.roles, *self.epochs, *self.truncations] if r.get("ts")
        ]
        if not stamps:
            return (0, 1)
        # The states in force at the last event lasted at least until the last ack or read: without
        # ``end`` a rejoin or election near the end would be a sliver at the right border.
        low, high = min(stamps), max([*stamps, self.end or 0])
        return (low, high if high > low else low + 1)


_PALETTE = ("#2f6fde", "#e8710a", "#1e8e3e", "#9334e6", "#b5482e", "#d01884", "#12939a", "#7b8a00")
_WIDTH, _LEFT, _RIGHT, _LANE, _TOP, _AXIS = 1100, 132, 24, 30, 8, 40
_CHAR_W = 7.2  # px per character of the 11 px bar labels (DejaVu Sans: 7.0): drawn only where it fits
_SLAVE = "#d0d5dd"


def _color(broker_id: Any) -> str:
    return _PALETTE[int(broker_id) % len(_PALETTE)] if isinstance(broker_id, int) else "#98a2b3"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def axis_ticks(span_ms: float, target: int = 8) -> float:
    """A tick step (ms) of 1, 2 or 5 x 10^k giving at most ``target`` intervals over ``span_ms``."""
    step = 1.0
    while span_ms / step > target:
        for factor in (2, 2.5, 2):  # 1 -> 2 -> 5 -> 10
            step *= factor
            if span_ms / step <= target:
                break
    return step


def _seconds(ms: float, step_ms: float) -> str:
    digits = 0 if step_ms >= 1000 else (1 if step_ms >= 100 else (2 if step_ms >= 10 else 3))
    return f"{ms / 1000:.{digits}f} s"


class _Labels:
    """Places bar labels left to right on one lane, dropping one that would not fit or would overlap."""

    def __init__(self) -> None:
        self.right = -1.0

    def place(self, x0: float, x1: float, text: str) -> bool:
        width = len(text) * _CHAR_W + 6
        if x1 - x0 < width or x0 + 3 < self.right:
            return False
        self.right = x0 + width
        return True


class _Frame:
    """Maps a set's time range onto the SVG's x axis and its lanes onto y."""

    def __init__(self, timeline: GroupTimeline) -> None:
        self.t0, self.t1 = timeline.time_range()
        self.span = self.t1 - self.t0
        self.plot = _WIDTH - _LEFT - _RIGHT
        self.ids = timeline.broker_ids()
        self.lanes = ["controller", *(f"broker {i}" for i in self.ids)]
        self.lane_of = {b: i + 1 for i, b in enumerate(self.ids)}
        self.bottom = _TOP + _LANE * len(self.lanes)

    def x(self, ts: Any) -> float:
        return _LEFT + self.plot * (((ts or self.t0) - self.t0) / self.span)

    def y(self, broker_id: int) -> int:
        return _TOP + self.lane_of[broker_id] * _LANE


def _axis_and_lanes(f: _Frame) -> list[str]:
    out = []
    for i, label in enumerate(f.lanes):
        y = _TOP + i * _LANE
        if i % 2 == 0:
            out.append(f'<rect x="0" y="{y}" width="{_WIDTH}" height="{_LANE}" class="band"/>')
        out.append(f'<text x="8" y="{y + _LANE / 2 + 4}" class="lane">{esc(label)}</text>')
    step = axis_ticks(f.span)
    k = 0
    while k * step <= f.span + 1e-9:
        tx = f.x(f.t0 + k * step)
        anchor = "start" if k == 0 else ("end" if tx > _WIDTH - _RIGHT - 20 else "middle")
        out.append(f'<line x1="{tx:.1f}" y1="{_TOP}" x2="{tx:.1f}" y2="{f.bottom}" class="tick"/>')
        out.append(
            f'<text x="{tx:.1f}" y="{f.bottom + 14}" text-anchor="{anchor}" class="axis">'
            f"{esc(_seconds(k * step, step))}</text>"
        )
        k += 1
    out.append(
        f'<text x="{_LEFT + f.plot / 2:.1f}" y="{f.bottom + 32}" text-anchor="middle" class="axis-title">'
        "seconds since the set's first recorded event</text>"
    )
    return out


def _bar(x0: float, x1: float, y: float, height: float, *, fill: str, css: str, tip: str) -> str:
    return (
        f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1.5):.1f}" height="{height}" fill="{fill}" '
        f'class="{css}"><title>{esc(tip)}</title></rect>'
    )


def _controller_lane(timeline: GroupTimeline, f: _Frame) -> list[str]:
    """One bar per master tenure (until the next change or the end), in the master's colour."""
    out, texts, labels = [], [], _Labels()
    rows = timeline.controller
    shown: tuple[Any, Any] | None = None
    for k, row in enumerate(rows):
        start = f.x(row.get("ts"))
        end = f.x(rows[k + 1].get("ts")) if k + 1 < len(rows) else f.x(f.t1)
        master = row.get("masterBrokerId")
        label = f"e{row.get('masterEpoch')} m{master if master is not None else '-'}"
        tip = (
            f"{label}: raftIndex {row.get('raftIndex')} {row.get('type')}: master {master}, masterEpoch "
            f"{row.get('masterEpoch')}, SyncStateSet {row.get('syncStateSet')} (epoch "
            f"{row.get('syncStateSetEpoch')})"
        )
        fill = _color(master) if master is not None else _SLAVE
        out.append(_bar(start, end, _TOP + 5, _LANE - 10, fill=fill, css="bar", tip=tip))
        # A SyncStateSet change keeps the master and its epoch: a new bar (own tooltip), no new label.
        tenure = (master, row.get("masterEpoch"))
        if tenure == shown:
            continue
        shown = tenure
        if labels.place(start, _tenure_end(rows, k, f), label):
            texts.append(
                f'<text x="{start + 4:.1f}" y="{_TOP + _LANE / 2 + 4}" class="bar">{esc(label)}</text>'
            )
    return out + texts  # labels last: a tenure's later bars (SyncStateSet changes) would cover them


def _tenure_end(rows: Sequence[Row], k: int, f: _Frame) -> float:
    """Where the tenure starting at ``rows[k]`` (same master and masterEpoch) ends on the x axis."""
    tenure = (rows[k].get("masterBrokerId"), rows[k].get("masterEpoch"))
    for later in rows[k + 1 :]:
        if (later.get("masterBrokerId"), later.get("masterEpoch")) != tenure:
            return f.x(later.get("ts"))
    return f.x(f.t1)


def _superseded(timeline: GroupTimeline, broker_id: int, start: Any, end: Any) -> Any:
    """The first time after ``start`` (before ``end``) the controllers named another master than
    ``broker_id``, or None: from then on the broker's MASTER row is stale (down, or not told yet)."""
    for row in timeline.controller:
        ts = row.get("ts") or 0
        if (start or 0) < ts < (end or 0) and row.get("masterBrokerId") != broker_id:
            return ts
    return None


def _replica_lanes(timeline: GroupTimeline, f: _Frame) -> list[str]:
    """Role periods (MASTER in the broker's colour, SLAVE grey), epoch entries, truncations."""
    out = []
    by_broker: dict[int, list[dict[str, Any]]] = {}
    for row in timeline.roles:
        if row.get("brokerId") is not None:
            by_broker.setdefault(row["brokerId"], []).append(row)
    for broker_id, rows in by_broker.items():
        y, labels = f.y(broker_id), _Labels()
        for k, row in enumerate(rows):
            end_ts = rows[k + 1].get("ts") if k + 1 < len(rows) else f.t1
            start, end = f.x(row.get("ts")), f.x(end_ts)
            master = inv.is_master_role(row.get("role"))
            text = f"{row.get('role')} e{row.get('masterEpoch')}"
            fill = _color(broker_id) if master else _SLAVE
            tip = f"{text} (master {row.get('masterBrokerId')})"
            stale = _superseded(timeline, broker_id, row.get("ts"), end_ts) if master else None
            if stale is not None:
                cut = f.x(stale)
                why = (
                    f"{text}: no role recorded since the controllers named another master (down, or not told)"
                )
                out.append(_bar(cut, end, y + 9, _LANE - 18, fill="none", css="stale", tip=why))
                end = cut
            out.append(_bar(start, end, y + 8, _LANE - 16, fill=fill, css="role", tip=tip))
            if master and labels.place(start, end, text):
                out.append(
                    f'<text x="{start + 4:.1f}" y="{y + _LANE / 2 + 4}" class="bar">{esc(text)}</text>'
                )
    for row in timeline.epochs:
        if row.get("brokerId") in f.lane_of:
            y, cx = f.y(row["brokerId"]), f.x(row.get("ts"))
            tip = f"epoch {row.get('epoch')} starts at offset {row.get('startOffset')}"
            points = f"{cx:.1f},{y + 1} {cx + 4:.1f},{y + 5} {cx:.1f},{y + 9} {cx - 4:.1f},{y + 5}"
            out.append(f'<polygon points="{points}" class="epoch"><title>{esc(tip)}</title></polygon>')
    for row in timeline.truncations:
        if row.get("brokerId") in f.lane_of:
            y, cx = f.y(row["brokerId"]), f.x(row.get("ts"))
            tip = f"truncated {row.get('fromOffset')} -> {row.get('toOffset')} ({row.get('reason')})"
            points = f"{cx - 6:.1f},{y + _LANE - 12} {cx + 6:.1f},{y + _LANE - 12} {cx:.1f},{y + _LANE - 2}"
            out.append(f'<polygon points="{points}" class="trunc"><title>{esc(tip)}</title></polygon>')
    return out


def render_timeline_svg(timeline: GroupTimeline) -> str:
    """One broker set's timeline: the controller's master tenures, each replica's role periods, epoch
    entries and truncations, over a time axis of round steps (see the legend in ``render_html``)."""
    f = _Frame(timeline)
    height = f.bottom + _AXIS
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {height}" width="100%" '
        f'class="timeline" role="img" aria-label="{esc(timeline.broker_name)} timeline">',
        *_axis_and_lanes(f),
        *_controller_lane(timeline, f),
        *_replica_lanes(timeline, f),
        "</svg>",
    ]
    return "\n".join(out)


def legend(timelines: Mapping[str, GroupTimeline]) -> str:
    ids = sorted({i for t in timelines.values() for i in t.broker_ids()})
    swatch = '<span class="sw" style="background:{c}"></span>'
    items = [
        *(f"{swatch.format(c=_color(i))}broker {i} is master" for i in ids),
        f"{swatch.format(c=_SLAVE)}slave (or no master)",
        '<span class="sw stale"></span>no role recorded: down, or not told of the new master yet',
        '<svg width="12" height="12"><polygon points="6,1 11,6 6,11 1,6" class="epoch"/></svg>epoch entry',
        '<svg width="14" height="12"><polygon points="1,1 13,1 7,11" class="trunc"/></svg>truncation',
    ]
    return (
        '<div class="legend">'
        + "".join(f"<span>{item}</span>" for item in items)
        + '<span class="muted">controller lane: the master the controllers elected, labelled '
        "e&lt;masterEpoch&gt; m&lt;master id&gt; (m- : none); broker lanes: the role each replica recorded. "
        "Hover for details.</span></div>"
    )
