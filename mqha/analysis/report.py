"""Reports of an analysis: text summary, JSON verdict, HTML page with per-group timelines.

Rendering is pure (values in, strings out); ``write_reports`` is the only function that touches files.
The timeline of a broker set is an inline SVG: one lane for the controller's view (a bar per master
tenure, labelled with masterEpoch and master id; SyncStateSet in the tooltip), one lane per replica
(MASTER / SLAVE periods from ``roles``, a tick per recorded epoch entry, a red triangle per
truncation). The x axis is wall-clock time relative to the first event of the set.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqha.analysis import coverage as cov
from mqha.analysis import invariants as inv
from mqha.history.schema import VERDICT_FILE

SUMMARY_FILE = "summary.txt"
HTML_FILE = "report.html"

Row = Mapping[str, Any]


@dataclass
class GroupTimeline:
    """One broker set's rows for the HTML timeline (controller events, roles, epochs, truncations)."""

    broker_name: str
    controller: list[dict[str, Any]] = field(default_factory=list)
    roles: list[dict[str, Any]] = field(default_factory=list)
    epochs: list[dict[str, Any]] = field(default_factory=list)
    truncations: list[dict[str, Any]] = field(default_factory=list)

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
        low, high = min(stamps), max(stamps)
        return (low, high if high > low else low + 1)


def _ts_key(row: Row) -> tuple[int, int]:
    return (row.get("ts") or 0, row.get("seq") or 0)


def build_timelines(
    controller_events: Iterable[Row], roles: Iterable[Row], epochs: Iterable[Row], truncations: Iterable[Row]
) -> dict[str, GroupTimeline]:
    """Per broker set: the controller's master changes (one row per raftIndex, earliest ts), and the
    replicas' role, epoch and truncation rows, each in time order."""
    groups: dict[str, GroupTimeline] = {}

    def group(name: str) -> GroupTimeline:
        return groups.setdefault(name, GroupTimeline(name))

    first: dict[tuple[str, int], dict[str, Any]] = {}
    for row in controller_events:
        if row.get("brokerName") is None or row.get("raftIndex") is None:
            continue
        key = (row["brokerName"], row["raftIndex"])
        if key not in first or (row.get("ts") or 0) < (first[key].get("ts") or 0):
            first[key] = dict(row)
    last_state: dict[str, tuple[Any, ...]] = {}
    for (name, _), row in sorted(first.items()):
        state = (row.get("masterBrokerId"), row.get("masterEpoch"), row.get("syncStateSetEpoch"))
        if last_state.get(name) != state:
            last_state[name] = state
            group(name).controller.append(row)
    for rows, attr in ((roles, "roles"), (epochs, "epochs"), (truncations, "truncations")):
        for row in sorted((r for r in rows if r.get("brokerName") is not None), key=_ts_key):
            getattr(group(row["brokerName"]), attr).append(dict(row))
    return dict(sorted(groups.items()))


# --------------------------------------------------------------------------------------------------
# Text


def _row_text(row: Row) -> str:
    return json.dumps(row, separators=(", ", "="), default=str).strip("{}").replace('"', "")


def coverage_lines(verdict: inv.Verdict) -> list[str]:
    """What was checked, per broker set: final master, replica logs, acks by source and fate."""
    doc = verdict.coverage.to_json()
    lines = [
        f"checked: {doc['acksChecked']} acknowledged put(s) ({doc['acksByBroker']} recorded by brokers, "
        f"{doc['acksByClient']} by clients) against the final master logs; "
        f"{doc['finalLogReplicas']} replica final log(s)"
    ]
    for name, s in doc["sets"].items():
        logs = ", ".join(f"{r['brokerId']}:{r['rows']}" for r in s["finalLogs"]) or "none"
        lines.append(
            f"  set {name}: final master {s['finalMasterId']}, replicas {s['replicas']}, "
            f"final log rows {{{logs}}}, "
            f"acks broker={s['acks']['broker']} client={s['acks']['client']} checked={s['acksChecked']} "
            f"expired={s['acksExpired']} unchecked={s['acksUnchecked']}, reads={s['reads']}"
        )
    return lines


def summary_text(verdict: inv.Verdict) -> str:
    """The human summary: the status and why, what was checked, every violated invariant with its
    evidence rows."""
    status, reasons = verdict.judged
    if status == cov.OK:
        lines = ["mqha analyze: OK -- every invariant holds"]
    elif status == cov.VIOLATED:
        lines = [f"mqha analyze: FAILED -- violated: {', '.join(verdict.failed)}"]
    else:
        lines = ["mqha analyze: INCONCLUSIVE -- nothing violated, but the export is not enough to say ok"]
    lines += [f"  reason: {r}" for r in reasons if not r.startswith("violated:")]
    lines.append("tables: " + ", ".join(f"{t}={n}" for t, n in verdict.table_counts.items()))
    lines += coverage_lines(verdict)
    for f in verdict.findings:
        if f.name == inv.DUPLICATE:
            result = f"counted {f.count} (not a failure)"
        else:
            result = "FAIL" if f.count else "ok"
        count = f" {f.count} violation(s)" if f.is_failure else ""
        lines.append(f"  {f.name:<22} {result}{count} -- {inv.DESCRIPTIONS[f.name]}")
        for row in f.rows:
            lines.append(f"      {_row_text(row)}")
        if f.count > len(f.rows):
            lines.append(f"      ... {f.count - len(f.rows)} more")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# HTML + SVG

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
_WIDTH, _LEFT, _LANE, _TOP = 960, 120, 34, 24


def _color(broker_id: Any) -> str:
    return _PALETTE[int(broker_id) % len(_PALETTE)] if isinstance(broker_id, int) else "#999999"


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def render_timeline_svg(timeline: GroupTimeline) -> str:
    t0, t1 = timeline.time_range()
    span = t1 - t0
    plot = _WIDTH - _LEFT - 20

    def x(ts: Any) -> float:
        return _LEFT + plot * (((ts or t0) - t0) / span)

    lanes = ["controller", *(f"broker {i}" for i in timeline.broker_ids())]
    lane_of = {b: i + 1 for i, b in enumerate(timeline.broker_ids())}
    height = _TOP + _LANE * len(lanes) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" class="timeline">']
    for i, label in enumerate(lanes):
        y = _TOP + i * _LANE
        out.append(f'<text x="4" y="{y + 20}" class="lane">{_esc(label)}</text>')
        out.append(
            f'<line x1="{_LEFT}" y1="{y + _LANE - 2}" x2="{_WIDTH - 20}" y2="{y + _LANE - 2}" class="grid"/>'
        )
    # Controller lane: one bar per master tenure (until the next change or the end).
    for k, row in enumerate(timeline.controller):
        start = x(row.get("ts"))
        end = x(timeline.controller[k + 1].get("ts")) if k + 1 < len(timeline.controller) else x(t1)
        master = row.get("masterBrokerId")
        tip = (
            f"raftIndex {row.get('raftIndex')} {row.get('type')}: master {master} masterEpoch "
            f"{row.get('masterEpoch')} SyncStateSet {row.get('syncStateSet')} "
            f"epoch {row.get('syncStateSetEpoch')}"
        )
        fill = _color(master) if master is not None else "#dddddd"
        out.append(
            f'<rect x="{start:.1f}" y="{_TOP + 4}" width="{max(end - start, 2):.1f}" height="{_LANE - 10}" '
            f'fill="{fill}" opacity="0.85"><title>{_esc(tip)}</title></rect>'
        )
        label = f"e{row.get('masterEpoch')} m{master if master is not None else '-'}"
        out.append(f'<text x="{start + 3:.1f}" y="{_TOP + 20}" class="bar">{_esc(label)}</text>')
    # Replica lanes: role periods, epoch ticks, truncations.
    by_broker: dict[int, list[dict[str, Any]]] = {}
    for row in timeline.roles:
        if row.get("brokerId") is not None:
            by_broker.setdefault(row["brokerId"], []).append(row)
    for broker_id, rows in by_broker.items():
        y = _TOP + lane_of[broker_id] * _LANE
        for k, row in enumerate(rows):
            start = x(row.get("ts"))
            end = x(rows[k + 1].get("ts")) if k + 1 < len(rows) else x(t1)
            master = inv.is_master_role(row.get("role"))
            fill = _color(broker_id) if master else "#cccccc"
            tip = (
                f"{row.get('role')} masterEpoch {row.get('masterEpoch')} (master {row.get('masterBrokerId')})"
            )
            out.append(
                f'<rect x="{start:.1f}" y="{y + 8}" width="{max(end - start, 2):.1f}" height="{_LANE - 18}" '
                f'fill="{fill}" opacity="0.7"><title>{_esc(tip)}</title></rect>'
            )
    for row in timeline.epochs:
        if row.get("brokerId") in lane_of:
            y = _TOP + lane_of[row["brokerId"]] * _LANE
            cx = x(row.get("ts"))
            tip = f"epoch {row.get('epoch')} starts at offset {row.get('startOffset')}"
            out.append(
                f'<circle cx="{cx:.1f}" cy="{y + 5}" r="3" class="epoch"><title>{_esc(tip)}</title></circle>'
            )
    for row in timeline.truncations:
        if row.get("brokerId") in lane_of:
            y = _TOP + lane_of[row["brokerId"]] * _LANE
            cx = x(row.get("ts"))
            tip = f"truncated {row.get('fromOffset')} -> {row.get('toOffset')} ({row.get('reason')})"
            points = f"{cx - 5:.1f},{y + 2} {cx + 5:.1f},{y + 2} {cx:.1f},{y + 12}"
            out.append(f'<polygon points="{points}" class="trunc"><title>{_esc(tip)}</title></polygon>')
    axis_y = _TOP + _LANE * len(lanes) + 14
    for k in range(6):
        ts = t0 + span * k / 5
        out.append(f'<text x="{x(ts):.1f}" y="{axis_y}" class="axis">+{(ts - t0) / 1000:.2f}s</text>')
    out.append("</svg>")
    return "\n".join(out)


_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; margin: 8px 0 16px; }
td, th { border: 1px solid #ccc; padding: 3px 8px; font-size: 13px; text-align: left; }
.ok { color: #2a7a2a; font-weight: bold; } .fail { color: #b00020; font-weight: bold; }
svg.timeline { border: 1px solid #ddd; background: #fafafa; }
svg text.lane { font-size: 12px; } svg text.bar { font-size: 11px; fill: #fff; }
svg text.axis { font-size: 10px; fill: #666; } svg line.grid { stroke: #e5e5e5; }
svg circle.epoch { fill: #333; } svg polygon.trunc { fill: #d62728; }
"""


def _rows_table(rows: Sequence[Row]) -> str:
    if not rows:
        return ""
    cols = list(rows[0].keys())
    head = "".join(f"<th>{_esc(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_esc(json.dumps(r.get(c), default=str))}</td>" for c in cols) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(
    verdict: inv.Verdict, timelines: Mapping[str, GroupTimeline], source: str = "", engine: str = ""
) -> str:
    status = (
        '<span class="ok">OK</span>'
        if verdict.ok
        else f'<span class="fail">FAILED: {_esc(", ".join(verdict.failed))}</span>'
    )
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>mqha analyze</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>mqha analyze: {status}</h1>",
        f"<p>source: {_esc(source)} &middot; engine: {_esc(engine)}</p>",
        "<h2>Tables</h2><table><tr><th>table</th><th>rows</th></tr>",
        *(f"<tr><td>{_esc(t)}</td><td>{n}</td></tr>" for t, n in verdict.table_counts.items()),
        "</table><h2>Invariants</h2><table><tr><th>check</th><th>result</th><th>count</th><th>meaning</th></tr>",
    ]
    for f in verdict.findings:
        if f.name == inv.DUPLICATE:
            result = "counted"
        else:
            result = '<span class="fail">FAIL</span>' if f.count else '<span class="ok">ok</span>'
        parts.append(
            f"<tr><td>{_esc(f.name)}</td><td>{result}</td><td>{f.count}</td>"
            f"<td>{_esc(inv.DESCRIPTIONS[f.name])}</td></tr>"
        )
    parts.append("</table>")
    for f in verdict.findings:
        if f.rows:
            more = f" (first {len(f.rows)} of {f.count})" if f.count > len(f.rows) else ""
            parts.append(f"<h3>{_esc(f.name)}{more}</h3>{_rows_table(f.rows)}")
    parts.append("<h2>Timelines</h2>")
    if not timelines:
        parts.append("<p>no controller events, roles, epochs or truncations recorded</p>")
    for name, timeline in timelines.items():
        parts.append(f"<h3>{_esc(name)}</h3>{render_timeline_svg(timeline)}")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_reports(
    verdict: inv.Verdict,
    timelines: Mapping[str, GroupTimeline],
    report_dir: Path,
    *,
    source: str = "",
    engine: str = "",
) -> Path:
    """``summary.txt``, ``verdict.json`` and ``report.html`` in ``report_dir``."""
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / SUMMARY_FILE).write_text(summary_text(verdict))
    doc = {"source": source, "engine": engine, **verdict.to_json()}
    (report_dir / VERDICT_FILE).write_text(json.dumps(doc, indent=2, default=str) + "\n")
    (report_dir / HTML_FILE).write_text(render_html(verdict, timelines, source, engine))
    return report_dir
