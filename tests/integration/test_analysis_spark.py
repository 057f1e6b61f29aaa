"""The PySpark checker against the pure one on the same hand-made histories (docs/architecture.md §5).

One SparkSession (``local[2]``) for the module. Each fixture is written as an export directory
(``write_tables``), read back by ``load_tables`` with the declared schema, and checked by both
engines; the verdicts -- names, counts and evidence rows -- must be identical.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.analysis import invariants as inv
from mqha.analysis.export import export, read_tables, write_tables
from mqha.analysis.report import HTML_FILE, SUMMARY_FILE, VERDICT_FILE
from mqha.analysis.spark_job import check_tables
from mqha.analysis.spark_tables import load_tables, spark_session, unpersist
from mqha.cli import main as mqha_main
from mqha.history.recorder import BrokerHistory, ClientHistory, HistoryRecorder
from tests.unit.analysis import histories as h
from tests.unit.analysis.test_invariants import failures_by_group

pytestmark = pytest.mark.integration

# Tiny inputs: per-job overhead dominates, so no adaptive re-planning and two shuffle partitions.
TEST_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "2"}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = spark_session("local[2]", app_name="mqha-analysis-tests", conf=TEST_CONF)
    yield session
    session.stop()


def spark_verdict(spark: Any, directory: Path, limit: int = inv.DEFAULT_LIMIT) -> inv.Verdict:
    frames = load_tables(spark, directory)
    try:
        return check_tables(frames, limit)
    finally:
        unpersist(frames)


def test_spark_and_pure_verdicts_are_identical(spark: Any, tmp_path: Path) -> None:
    """Every hand-made history at once (one broker set each): same verdict, row for row; and each
    violating history is named by exactly its invariant, the clean ones by none."""
    tables = h.combined()
    write_tables(tmp_path, tables)
    pure = inv.check_all(read_tables(tmp_path), limit=1000)
    assert pure == inv.check_all(tables, limit=1000)  # the JSON Lines round trip changes nothing
    got = spark_verdict(spark, tmp_path, limit=1000)
    assert got.table_counts == pure.table_counts
    assert got.coverage == pure.coverage and got.judged == pure.judged
    for expected in pure.findings:
        assert got.finding(expected.name) == expected, expected.name
    by_group = failures_by_group(got)
    for name, expected_failed in h.EXPECTED_FAILURES.items():
        assert by_group.get(name, ()) == expected_failed, name


def test_cli_analyze_exit_codes_and_reports(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    many_lost = h.lost_ack()
    many_lost["acks"] += [h._ack(f"z{i}", 1000 + i, 2) for i in range(30)]
    clean, bad = write_tables(tmp_path / "clean", h.CLEAN), write_tables(tmp_path / "bad", many_lost)
    assert mqha_main(["analyze", str(clean), "--master", "local[2]"]) == 0
    assert "OK" in capsys.readouterr().out
    for name in (SUMMARY_FILE, VERDICT_FILE, HTML_FILE):
        assert (clean / "report" / name).stat().st_size > 0
    page = (clean / "report" / HTML_FILE).read_text()
    assert "<svg" in page and "e2 m2" in page and "truncated 400 -&gt; 300" in page

    # The limit cuts the evidence after sorting, never the count; pure and Spark agree on both.
    assert mqha_main(["analyze", str(bad), "--limit", "5", "--report-dir", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "FAILED -- violated: lost_ack" in err and "msgId=m5" in err and "... 26 more" in err
    doc = json.loads((tmp_path / "r" / VERDICT_FILE).read_text())
    assert doc["failed"] == ["lost_ack"] and doc["checks"]["lost_ack"]["count"] == 31
    assert [r["offset"] for r in doc["checks"]["lost_ack"]["rows"]] == [500, 1000, 1001, 1002, 1003]

    args = ["analyze", str(bad), "--limit", "5", "--engine", "python", "--report-dir", str(tmp_path / "p")]
    assert mqha_main(args) == 1
    assert json.loads((tmp_path / "p" / VERDICT_FILE).read_text())["checks"] == doc["checks"]
    assert mqha_main(["analyze", str(tmp_path / "missing")]) == 2


def test_both_engines_draw_the_timeline_until_the_last_ack_or_read(spark: Any, tmp_path: Path) -> None:
    """A read 3 s after the set's last event (3010 ms): the picture, the same in both engines, runs until
    it (axis to 5 s, not 2.5 s)."""
    from mqha.analysis.spark_job import analyze, analyze_python

    tables = h._variant()
    tables["reads"].append({**tables["reads"][0], "ts": h.T0 + 6000})
    export_dir = write_tables(tmp_path / "late", tables)
    analyze(export_dir, report_dir=tmp_path / "spark", spark=spark)
    analyze_python(export_dir, report_dir=tmp_path / "python")
    svgs = [
        re.findall(r"<svg xmlns.*?</svg>", (tmp_path / e / HTML_FILE).read_text(), re.S)
        for e in ("spark", "python")
    ]
    assert svgs[0] == svgs[1] and len(svgs[0]) == 1
    assert ">5 s</text>" in svgs[0][0] and ">2.5 s</text>" not in svgs[0][0]


def _record(tables: h.Tables, run_dir: Path) -> None:
    """Write a hand-made history through the recorder API, one database per process, as a run would."""
    for node in {r["node"] for r in tables["controller_events"]}:
        with HistoryRecorder.in_store(run_dir / node / "store") as rec:
            for row in tables["controller_events"]:
                if row["node"] == node:
                    rec.record("controller_events", row)
    for broker_id in (1, 2, 3):
        with HistoryRecorder.in_store(run_dir / f"broker-{broker_id}" / "store") as rec:
            broker = BrokerHistory(rec, f"broker-{broker_id}", "b1", broker_id)
            for row in tables["epochs"]:
                if row["brokerId"] == broker_id:
                    broker.epoch(row["epoch"], row["startOffset"], ts=row["ts"])
            for row in tables["roles"]:
                if row["brokerId"] == broker_id:
                    broker.role(row["role"], row["masterEpoch"], row["masterBrokerId"], ts=row["ts"])
            for row in tables["truncations"]:
                if row["brokerId"] == broker_id:
                    broker.truncation(row["fromOffset"], row["toOffset"], row["reason"], ts=row["ts"])
            broker.final_log([r for r in tables["final_logs"] if r["brokerId"] == broker_id], wait=10)
    with HistoryRecorder.in_store(run_dir / "client") as rec:
        client = ClientHistory(rec, "c-1")
        for row in tables["acks"]:
            client.ack(
                msg_id=row["msgId"],
                broker_name=row["brokerName"],
                broker_id=row["brokerId"],
                offset=row["offset"],
                size=row["size"],
                epoch=row["epoch"],
                status=row["status"],
                ack_mode=row["ackMode"],
                ts=row["ts"],
            )
        rec.record("acks", {**tables["acks"][0], "client": "c-2"})  # a second client, same ack
        for row in tables["reads"]:
            client.read(
                msg_id=row["msgId"], broker_name=row["brokerName"], offset=row["offset"], ts=row["ts"]
            )


def test_recorder_export_analyze_round_trip(spark: Any, tmp_path: Path) -> None:
    tables = h.big_offsets()
    _record(tables, tmp_path / "run")
    summary = export([tmp_path / "run"], tmp_path / "out")
    assert len(summary.sources) == 3 + 3 + 1
    assert summary.rows["final_logs"] == len(tables["final_logs"])
    assert summary.rows["acks"] == len(tables["acks"]) + 1
    schema = json.loads((tmp_path / "out" / "schema.json").read_text())
    assert {"name": "offset", "type": "long"} in schema["tables"]["acks"]
    got = spark_verdict(spark, tmp_path / "out")
    assert got.failed == ("lost_ack",)
    assert [r["offset"] for r in got.finding(inv.LOST_ACK).rows] == [h.BIG + 1]
    exported = read_tables(tmp_path / "out")
    assert got == inv.check_all(exported)
    assert max(r["offset"] for r in exported["final_logs"]) == h.BIG


@pytest.mark.slow  # the default run keeps one of its kind; scripts/test.sh -m slow runs it
def test_parquet_exports_read_the_same_in_both_engines(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--format parquet`` and ``auto`` past its threshold (streamed over from JSON Lines) give the
    rows, and so the verdict, of a JSON Lines export; Spark and the pure checker read them alike."""
    from mqha.analysis import export as export_module

    tables = h.big_offsets()
    _record(tables, tmp_path / "run")
    plain = export([tmp_path / "run"], tmp_path / "jsonl", "jsonl")
    monkeypatch.setattr(export_module, "AUTO_PARQUET_ROWS", 10)
    auto = export([tmp_path / "run"], tmp_path / "auto", "auto")
    parquet = export([tmp_path / "run"], tmp_path / "parquet", "parquet")
    assert plain.rows == auto.rows == parquet.rows
    assert auto.formats["final_logs"] == "parquet" and auto.formats["epochs"] == "jsonl"
    assert (tmp_path / "auto" / "final_logs" / "part-00000.parquet").exists()
    assert not (tmp_path / "auto" / "final_logs.jsonl").exists()
    expected = inv.check_all(read_tables(tmp_path / "jsonl"))
    for name in ("auto", "parquet"):
        assert read_tables(tmp_path / name) == read_tables(tmp_path / "jsonl"), name
        assert spark_verdict(spark, tmp_path / name) == expected, name
    assert max(r["offset"] for r in read_tables(tmp_path / "parquet")["final_logs"]) == h.BIG


@pytest.mark.slow  # the default run keeps one of its kind; scripts/test.sh -m slow runs it
def test_synthetic_history_is_clean_and_counts_every_table(spark: Any, tmp_path: Path) -> None:
    """The benchmark's generator (``mqha.analysis.synthetic``) at a tiny size: ``ok``, and the counts it
    returns are the checker's for every table the schema has (a table added to the schema later must
    not break ``tests/bench/test_analysis_bench.py``, which compares them)."""
    from mqha.analysis.synthetic import write_synthetic
    from mqha.history.schema import TABLES

    counts = write_synthetic(spark, tmp_path, 400, replicas=3)
    got = spark_verdict(spark, tmp_path)
    assert got.status == "ok", got.judged
    assert dict(got.table_counts) == counts and set(counts) == set(TABLES)
