"""Alert rules and the Grafana dashboard under ``deploy/`` checked with ``promtool`` (Debian ``prometheus``).

- ``promtool check rules`` on ``deploy/prometheus/alerts.yml`` and ``promtool test rules`` on its
  unit tests, which must cover every alert (firing at least once);
- every PromQL expression of ``deploy/grafana/mqha-dashboard.json`` (panel targets, annotations, the
  variable's metric) passes ``promtool check rules`` as a recording rule, after Grafana's variables
  are replaced by sample values;
- the dashboard has the four sections of issue 6 and a sound layout.

Which metric names the rules and the dashboard use is checked against live scrapes in
``test_metrics_scrape.py``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
ALERTS_TEST = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "mqha-dashboard.json"

# The alerts issue 6 asks for, by name.
REQUIRED_ALERTS = {
    "MqhaNoControllerLeader",
    "MqhaBrokerSetWithoutMaster",
    "MqhaSyncStateSetBelowMinInSyncReplicas",
    "MqhaReplicaLagGrowing",
    "MqhaControllerQuorumLost",
}
# Grafana variables -> values that make the expression plain PromQL.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "1h",
    "$broker_name": ".*",
    "${broker_name}": ".*",
}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    path = shutil.which("promtool")
    assert path is not None, (
        "promtool not found: run scripts/setup.sh (installs the Debian package prometheus)"
    )
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=60, check=False)


def alert_names(text: str) -> set[str]:
    return set(re.findall(r"^\s*- alert:\s*(\w+)\s*$", text, flags=re.MULTILINE))


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_expressions(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) for every query of the dashboard, Grafana variables substituted."""
    found: list[tuple[str, str]] = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            found.append((f"panel {panel['id']} {panel['title']!r} {target['refId']}", target["expr"]))
    for annotation in board["annotations"]["list"]:
        if "expr" in annotation:
            found.append((f"annotation {annotation['name']!r}", annotation["expr"]))
    for variable in board["templating"]["list"]:
        definition = variable.get("definition", "")
        match = re.fullmatch(r"label_values\((\w+),\s*\w+\)", definition)
        if match:  # label_values() is Grafana's; its metric must be a valid selector
            found.append((f"variable {variable['name']}", match.group(1)))
    result = []
    for where, raw in found:
        expr = raw
        for name, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(name, value)
        assert "$" not in expr, f"{where}: unknown Grafana variable in {expr!r}"
        result.append((where, expr))
    return result


def test_alert_rules_pass_promtool_check() -> None:
    done = promtool("check", "rules", str(ALERTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert alert_names(ALERTS.read_text()) >= REQUIRED_ALERTS


def test_alert_rules_unit_tests_pass_and_cover_every_alert() -> None:
    done = promtool("test", "rules", str(ALERTS_TEST))
    assert done.returncode == 0, done.stdout + done.stderr
    text = ALERTS_TEST.read_text()
    tested = set(re.findall(r"alertname:\s*(\w+)", text))
    assert tested == alert_names(ALERTS.read_text())
    # Every alert is expected to fire in at least one case (an `exp_alerts` list that is not empty).
    firing = set(re.findall(r"alertname:\s*(\w+)\s*\n\s*exp_alerts:\s*\n\s*- exp_labels", text))
    assert firing == tested


def test_dashboard_expressions_pass_promtool_check(tmp_path: Path) -> None:
    expressions = dashboard_expressions(dashboard())
    assert len(expressions) >= 20
    rules = [{"record": f"mqha:dashboard:expr{i}", "expr": expr} for i, (_, expr) in enumerate(expressions)]
    path = tmp_path / "dashboard_rules.yml"  # JSON is YAML: no YAML library needed
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}, indent=1))
    done = promtool("check", "rules", str(path))
    where = "\n".join(f"expr{i}: {w}" for i, (w, _) in enumerate(expressions))
    assert done.returncode == 0, f"{done.stdout}{done.stderr}\n{where}"


def test_dashboard_has_the_sections_of_issue_6() -> None:
    board = dashboard()
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert rows == ["Cluster overview", "Replication (per broker set)", "Elections", "Put latency", "mqproxy"]
    titles = {p["title"] for p in board["panels"]}
    assert {
        "Slave ack lag",
        "Elections by trigger and result",
        "Put latency by ack mode (p50 / p99)",
    } <= titles
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["targets"] and panel["description"], panel["title"]
    assert board["uid"] and board["schemaVersion"] >= 36
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "broker_name"]
