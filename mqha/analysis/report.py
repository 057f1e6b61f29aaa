"""Reports of an analysis: text summary, JSON verdict, HTML page with per-group timelines.

Rendering is pure (values in, strings out); ``write_reports`` is the only function that touches files.
The page is styled like the controller's web console: the verdict (OK / FAILED / INCONCLUSIVE with its
reasons), what was checked (per set: final master, each replica's final log, acks by source and fate),
the invariants, the evidence, and per broker set a timeline: an inline SVG with one lane for the
controller's view (a bar per master tenure in the master's colour, labelled e<masterEpoch> m<id> where
the label fits; SyncStateSet in the tooltip), one lane per replica (MASTER periods in its colour, SLAVE
grey, a diamond per epoch entry, a red triangle per truncation) and a time axis of round steps in
seconds since the set's first event, up to its last ack or read; a legend under each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mqha.analysis import coverage as cov
from mqha.analysis import invariants as inv
from mqha.analysis.timeline_svg import GroupTimeline, esc, legend, render_timeline_svg
from mqha.history.schema import VERDICT_FILE

SUMMARY_FILE = "summary.txt"
HTML_FILE = "report.html"

Row = Mapping[str, Any]


def _ts_key(row: Row) -> tuple[int, int]:
    return (row.get("ts") or 0, row.get("seq") or 0)


def build_timelines(
    controller_events: Iterable[Row],
    roles: Iterable[Row],
    epochs: Iterable[Row],
    truncations: Iterable[Row],
    activity: Iterable[Row] = (),
) -> dict[str, GroupTimeline]:
    """Per broker set: the controller's master changes (one row per raftIndex, earliest ts), and the
    replicas' role, epoch and truncation rows, each in time order; ``activity`` (acks and reads, or one
    row per set with the latest ``ts``) sets each pictured set's ``end``."""
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
    for row in activity:
        timeline, ts = groups.get(row.get("brokerName")), row.get("ts")
        if timeline is not None and ts is not None and ts > (timeline.end or 0):
            timeline.end = ts
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
# HTML + SVG (styled like the controller's web console: same colours, cards, chips, type)

_CSS = """
:root { --bg: #f4f6f9; --card: #fff; --ink: #1d2433; --muted: #667085; --line: #e3e7ee;
  --brand: #1f3a5f; --ok: #1e8e3e; --bad: #c5221f; --warn: #b26a00;
  --ok-bg: #e6f4ea; --bad-bg: #fce8e6; --warn-bg: #fff4e0; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: var(--ink); background: var(--bg); }
.topbar { padding: 12px 24px; background: var(--brand); color: #fff; font-weight: 700; font-size: 18px; }
.topbar span { font-weight: 400; opacity: .75; font-size: 14px; margin-left: 10px; }
main { max-width: 1180px; margin: 20px auto; padding: 0 24px; }
h1 { font-size: 20px; margin: 6px 0 14px; } h2 { font-size: 16px; margin: 0 0 10px; }
h3 { font-size: 15px; margin: 0 0 8px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 16px 18px;
  margin-bottom: 16px; box-shadow: 0 1px 2px rgba(16, 24, 40, .04); overflow-x: auto; }
.muted { color: var(--muted); } .small { font-size: 12px; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); font-size: 13px; }
th { font-size: 12px; text-transform: uppercase; letter-spacing: .4px; color: var(--muted);
  font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 11.5px;
  padding: 6px 7px; overflow-wrap: break-word; }
table.evidence th { text-transform: none; letter-spacing: 0; padding: 6px 7px; }
.chip { display: inline-block; padding: 1px 9px; border-radius: 11px; font-size: 12.5px; }
.chip.ok { background: var(--ok-bg); color: var(--ok); }
.chip.bad { background: var(--bad-bg); color: var(--bad); }
.chip.warn { background: var(--warn-bg); color: var(--warn); }
.chip.neutral { background: #eef1f5; color: #344054; }
.message { padding: 14px 16px; border-radius: 8px; margin: 0 0 16px; border: 1px solid; }
.message strong { display: block; font-size: 16px; margin-bottom: 2px; }
.message ul { margin: 6px 0 0; padding-left: 20px; }
.message.ok { background: var(--ok-bg); border-color: #b7dfc2; color: #1b5e2b; }
.message.error { background: var(--bad-bg); border-color: #f4c2bf; color: #8c1d18; }
.message.warn { background: var(--warn-bg); border-color: #f3d39c; color: #7a4a00; }
.stats { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px;
  margin-bottom: 16px; }
.stat { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.stat .label { font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .4px; }
.stat .value { font-size: 22px; font-weight: 650; } .stat .sub { font-size: 12px; color: var(--muted); }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; align-items: center; font-size: 12.5px;
  margin: 10px 0 0; }
.legend span { display: inline-flex; align-items: center; gap: 5px; }
.legend .sw { width: 14px; height: 10px; border-radius: 2px; display: inline-block; }
svg.timeline { display: block; font-family: system-ui, "DejaVu Sans", sans-serif; }
svg .band { fill: #f8f9fb; } svg .tick { stroke: #e3e7ee; } svg text.lane { font-size: 12px; fill: #344054; }
svg text.bar { font-size: 11px; fill: #fff; pointer-events: none; }
svg text.axis { font-size: 11px; fill: #667085; } svg text.axis-title { font-size: 11px; fill: #98a2b3; }
svg .bar { stroke: #fff; stroke-width: .5; } svg .role { stroke: #fff; stroke-width: .5; }
.epoch { fill: #1d2433; } .trunc { fill: #c5221f; }
svg .stale { fill: none; stroke: #98a2b3; stroke-dasharray: 3 2; }
.legend .sw.stale { border: 1px dashed #98a2b3; background: none; }
"""


def _cell(value: Any) -> str:
    """A value as the evidence table shows it: strings bare, null as 'null', the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _rows_table(rows: Sequence[Row]) -> str:
    if not rows:
        return ""
    cols = list(rows[0].keys())
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f'<td class="mono">{esc(_cell(r.get(c)))}</td>' for c in cols) + "</tr>"
        for r in rows
    )
    # Column names as recorded (camelCase, not upper case) and compact cells: a msgId or an address
    # breaks only where the table is wider than the page, which then scrolls (.card overflow-x).
    return f'<table class="evidence"><tr>{head}</tr>{body}</table>'


def _verdict_box(verdict: inv.Verdict) -> str:
    status, reasons = verdict.judged
    why = [r for r in reasons if not r.startswith("violated:")]
    items = "<ul>" + "".join(f"<li>{esc(r)}</li>" for r in why) + "</ul>" if why else ""
    if status == cov.OK:
        return (
            '<div class="message ok"><strong>OK</strong>every invariant holds, and the export held '
            "everything the proof needs</div>"
        )
    if status == cov.VIOLATED:
        return (
            f'<div class="message error"><strong>FAILED: {esc(", ".join(verdict.failed))}</strong>'
            f"the evidence is below{items}</div>"
        )
    return (
        '<div class="message warn"><strong>INCONCLUSIVE</strong>nothing was violated, but the export '
        f"is not enough to say OK:{items}</div>"
    )


def _stats(verdict: inv.Verdict) -> str:
    doc = verdict.coverage.to_json()
    cards = [
        (
            "acks checked",
            doc["acksChecked"],
            f"{doc['acksByBroker']:,} by brokers, {doc['acksByClient']:,} by clients",
        ),
        ("replica final logs", doc["finalLogReplicas"], f"{len(doc['sets'])} broker set(s)"),
        ("reads checked", verdict.table_counts.get("reads", 0), "recorded by clients"),
        ("controller events", verdict.table_counts.get("controller_events", 0), "all controllers"),
    ]
    return (
        '<div class="stats">'
        + "".join(
            f'<div class="stat"><div class="label">{esc(label)}</div><div class="value">{value:,}</div>'
            f'<div class="sub">{esc(sub)}</div></div>'
            for label, value, sub in cards
        )
        + "</div>"
    )


def _coverage_table(verdict: inv.Verdict) -> str:
    sets = verdict.coverage.to_json()["sets"]
    if not sets:
        return ""
    rows = []
    for name, s in sets.items():
        logs = " · ".join(f"{r['brokerId']}: {r['rows']:,}" for r in s["finalLogs"]) or "none"
        missing = [i for i in s["replicas"] if i not in {r["brokerId"] for r in s["finalLogs"]}]
        unchecked = s["acksUnchecked"]
        rows.append(
            f"<tr><td><b>{esc(name)}</b></td><td>{esc(s['finalMasterId'])}</td>"
            f'<td class="mono">{esc(logs)}'
            + (f' <span class="chip warn">missing: {esc(missing)}</span>' if missing else "")
            + f'</td><td class="num">{s["acks"]["broker"]:,}</td><td class="num">{s["acks"]["client"]:,}</td>'
            f'<td class="num">{s["acksChecked"]:,}</td><td class="num">{s["acksExpired"]:,}</td>'
            f'<td class="num">'
            + (f'<span class="chip warn">{unchecked:,}</span>' if unchecked else "0")
            + f'</td><td class="num">{s["reads"]:,}</td></tr>'
        )
    head = "".join(
        ("<th class='num'>" if n else "<th>") + f"{t}</th>"
        for t, n in (
            ("set", 0),
            ("final master", 0),
            ("final log rows by replica", 0),
            ("acks by brokers", 1),
            ("by clients", 1),
            ("checked", 1),
            ("expired", 1),
            ("not checked", 1),
            ("reads", 1),
        )
    )
    return f'<div class="card"><h2>What was checked</h2><table><tr>{head}</tr>{"".join(rows)}</table></div>'


def render_html(
    verdict: inv.Verdict, timelines: Mapping[str, GroupTimeline], source: str = "", engine: str = ""
) -> str:
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>mqha analyze</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<div class='topbar'>mqha analyze<span>source {esc(source)} &middot; engine {esc(engine)}"
        "</span></div>",
        "<main>",
        _verdict_box(verdict),
        _stats(verdict),
        _coverage_table(verdict),
        '<div class="card"><h2>Invariants</h2><table><tr><th>check</th><th>result</th>'
        '<th class="num">count</th><th>meaning</th></tr>',
    ]
    for f in verdict.findings:
        if f.name == inv.DUPLICATE:
            result = '<span class="chip neutral">counted</span>'
        else:
            result = '<span class="chip bad">FAIL</span>' if f.count else '<span class="chip ok">ok</span>'
        parts.append(
            f"<tr><td><b>{esc(f.name)}</b></td><td>{result}</td><td class='num'>{f.count:,}</td>"
            f"<td class='muted'>{esc(inv.DESCRIPTIONS[f.name])}</td></tr>"
        )
    parts.append("</table></div>")
    for f in verdict.findings:
        if f.rows:
            more = f" (first {len(f.rows)} of {f.count:,})" if f.count > len(f.rows) else ""
            parts.append(
                f'<div class="card"><h2>{esc(f.name)}: evidence{more}</h2>{_rows_table(f.rows)}</div>'
            )
    parts.append(
        '<div class="card"><h2>Tables</h2><p class="muted small">'
        + " &middot; ".join(f"{esc(t)} {n:,}" for t, n in verdict.table_counts.items())
        + "</p></div>"
    )
    if not timelines:
        parts.append(
            '<div class="card"><h2>Timelines</h2><p class="muted">no controller events, roles, '
            "epochs or truncations recorded</p></div>"
        )
    for name, timeline in timelines.items():
        parts.append(
            f'<div class="card"><h2>Timeline of {esc(name)}</h2>{render_timeline_svg(timeline)}'
            f"{legend({name: timeline})}</div>"
        )
    parts.append("</main></body></html>")
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
