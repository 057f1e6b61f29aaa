"""``mqha analyze``'s HTML report in headless Chromium (issue 28: a report people look at).

A violated history shaped like a real one (broker-recorded acks: 32-hex msgIds, ``broker@host:port``
clients; three tenures, a rejoin, a truncation) rendered by ``write_reports`` and measured in the
browser at 1280 px: no card scrolls or cuts a column, each evidence value stays on one line, the
timeline's texts (lane names, bar labels, ticks, axis title) overlap neither each other nor the
picture's edge, and a bar label's real width is within the estimate ``timeline_svg`` places it by.
A screenshot goes to ``test-artifacts/report/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqha.analysis import invariants as inv
from mqha.analysis.report import HTML_FILE, build_timelines, write_reports
from mqha.analysis.timeline_svg import _CHAR_W
from tests.helpers.browser import full_page_screenshot, headless_chromium
from tests.unit.analysis import histories as h

pytestmark = pytest.mark.integration

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "report"


def _violated() -> h.Tables:
    tables = h._variant()
    # An unacknowledged message at 500 on every replica; then 12 acks the final master does not hold:
    # the first at 500 (another msgId found there), the others past the log's end.
    tables["final_logs"] += [
        row for b in (1, 2, 3) for row in h._log(b, [(500, "8713C314918B64F8" + "0" * 16)])
    ]
    for k in range(12):
        ack = h._ack(f"F8385D632056EF96{k:016X}", 500 + 96 * k, 2, broker_id=2)
        tables["acks"].append({**ack, "client": "broker@127.0.0.1:18219"})
    tables["reads"].append({**tables["reads"][0], "ts": h.T0 + 6000})  # the run goes on after the rejoin
    return tables


OVERLAPS = """
const svg = document.querySelector('svg.timeline'), box = svg.getBoundingClientRect();
const texts = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBoundingClientRect()]);
const out = [];
for (const [s, r] of texts) {
  if (r.left < box.left - 0.5 || r.right > box.right + 0.5) out.push(`${s} outside the picture`);
}
for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
  const [a, p] = texts[i], [b, q] = texts[j];
  if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) out.push(`${a} / ${b}`);
}
return out;
"""

WRAPPED = """
return [...document.querySelectorAll('table.evidence td.mono')].filter(td => {
  const range = document.createRange(); range.selectNodeContents(td);
  return range.getClientRects().length > 1;
}).map(td => td.textContent);
"""


def test_violated_report_fits_and_its_timeline_labels_do_not_overlap(tmp_path: Path) -> None:
    t = _violated()
    verdict = inv.check_all(t)
    assert verdict.failed == ("lost_ack",) and verdict.finding(inv.LOST_ACK).count == 12
    timelines = build_timelines(
        t["controller_events"], t["roles"], t["epochs"], t["truncations"], [*t["acks"], *t["reads"]]
    )
    report = write_reports(verdict, timelines, tmp_path, source="runs/x", engine="python")
    with headless_chromium(1280, 1000) as driver:
        driver.get((report / HTML_FILE).as_uri())
        full_page_screenshot(driver, ARTIFACTS / "violated.png")
        cut: list[Any] = driver.execute_script(
            "return [...document.querySelectorAll('.card')]"
            ".filter(c => c.scrollWidth > c.clientWidth).map(c => c.querySelector('h2').textContent);"
        )
        assert cut == []
        assert driver.execute_script(WRAPPED) == []
        assert driver.execute_script(OVERLAPS) == []
        labels = driver.execute_script(
            "return [...document.querySelectorAll('svg.timeline text.bar')]"
            ".map(t => [t.textContent, t.getComputedTextLength()]);"
        )
    assert {text for text, _ in labels} >= {"e2 m2", "MASTER e2"}
    too_wide = [(text, width) for text, width in labels if width > len(text) * _CHAR_W]
    assert too_wide == []
