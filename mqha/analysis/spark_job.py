"""``mqha analyze``: the §5 invariants as PySpark DataFrame queries over an export (shell).

Every check mirrors the pure function of the same name in ``mqha.analysis.invariants`` (read its module
docstring for the definitions, null handling included) and yields the same evidence columns, so the
verdicts can be compared one to one. Only counts and evidence rows reach the driver: each check is a
DataFrame of violations; all of them are counted in one job, then each violated one is sorted and cut
to ``limit`` rows before the (single) collect; no table is ever collected whole. The timeline picture
takes at most ``TIMELINE_LIMIT`` rows of the small tables (controller events, roles, epochs,
truncations) and one row per set and table with its last ack or read (where the picture ends).

Cost. ``lost_ack``, ``read_uncommitted`` and ``replica_divergence`` share ONE shuffle
(``offset_pass``: all log rows, acks and reads grouped by (brokerName, offset) with fixed-width
min/max/count aggregates); only suspect groups go through the exact per-row rule. ``duplicate`` is one
aggregation over the final master logs; the controller-side checks read small tables. 10M acks with
3 replicas' logs (41M rows, Parquet) take about 40 s on ``local[2]`` (tests/bench).

Inputs (``load_tables``): ``<dir>/<table>.jsonl`` (a file or a directory of part files) read with the
declared schema of ``mqha.history.schema`` and ``mode=FAILFAST``, or ``<dir>/<table>/`` as Parquet; a
missing table is empty. Large JSON input is persisted (memory, spilling to disk), so it is parsed
once however many checks read it.

Run it as ``mqha analyze DIR`` (``local[*]`` by default), with ``--master spark://host:7077``, or as
``spark-submit mqha/analysis/spark_job.py DIR`` (the ``main`` below).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqha.analysis import coverage as cov
from mqha.analysis import invariants as inv
from mqha.analysis.spark_checks import (
    ack_ends,
    ack_stats,
    at_keys,
    divergence_evidence,
    duplicate_evidence,
    duplicate_keys,
    epoch_not_increasing,
    epoch_start_mismatch,
    epoch_starts,
    final_masters,
    log_stats,
    lost_ack,
    master_log,
    master_outside_sss,
    not_null,
    offset_pass,
    read_uncommitted,
    replica_ids,
    terms,
    two_masters_in_epoch,
    with_log_starts,
)
from mqha.analysis.spark_tables import DEFAULT_MASTER, load_tables, spark_session, unpersist
from mqha.history.schema import (
    ACKS,
    CONTROLLER_EVENTS,
    EPOCHS,
    FINAL_LOGS,
    READS,
    ROLES,
    TABLES,
    TRUNCATIONS,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TIMELINE_LIMIT = 5000
ACTIVITY = "activity"  # timeline_rows' key for each set's last ack or read

# --------------------------------------------------------------------------------------------------
# Verdict


def _collect_json(parts: Mapping[str, DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """Collect a few rows of several differently shaped frames in ONE job: each frame has one struct
    column ``r``, sent as JSON text (nulls kept; 64-bit integers exact, unlike a float detour)."""
    import json
    from functools import reduce

    from pyspark.sql import functions as F

    if not parts:
        return {}
    union = reduce(
        lambda a, b: a.unionAll(b),
        [
            df.select(
                F.lit(label).alias("label"), F.to_json("r", {"ignoreNullFields": "false"}).alias("json")
            )
            for label, df in parts.items()
        ],
    )
    out: dict[str, list[dict[str, Any]]] = {label: [] for label in parts}
    for item in union.collect():
        out[item["label"]].append(json.loads(item["json"]))
    return out


def _collect_evidence(evidence: Mapping[str, DataFrame], limit: int) -> dict[str, tuple[dict[str, Any], ...]]:
    """The first ``limit`` rows (in ``ORDER``) of every check's evidence, in one job; the driver
    re-sorts each check's few rows by the same order (a union keeps no order)."""
    from pyspark.sql import functions as F

    rows = _collect_json(
        {
            name: df.orderBy(*inv.ORDER[name]).limit(limit).select(F.struct(*inv.EVIDENCE[name]).alias("r"))
            for name, df in evidence.items()
        }
    )
    return {name: inv.finding(name, found, limit).rows for name, found in rows.items()}


def _count_by_label(frames: Mapping[str, DataFrame]) -> dict[str, int]:
    """``{label: frame.count()}`` in ONE Spark job (a union of labels, grouped): per-job overhead, not
    data, dominates small histories, and on big ones the stages of one job share the cached inputs."""
    from functools import reduce

    from pyspark.sql import functions as F

    labelled = [df.select(F.lit(label).alias("label")) for label, df in frames.items()]
    union = reduce(lambda a, b: a.unionAll(b), labelled)
    found = {row["label"]: row["n"] for row in union.groupBy("label").agg(F.count("*").alias("n")).collect()}
    return {label: int(found.get(label, 0)) for label in frames}


def coverage(frames: Mapping[str, DataFrame], masters: DataFrame, replica_logs: DataFrame) -> cov.Coverage:
    """``invariants.coverage_of`` with aggregates: one job for the reads, the expected replicas, the
    final masters and the per-replica log statistics (``replica_logs``, already computed for
    ``final_masters``; all small), then one for the acks by set and source against the log starts."""
    from pyspark.sql import functions as F

    small = _collect_json(
        {
            "logs": replica_logs.select(F.struct("*").alias("r")),
            "reads": frames[READS]
            .where(F.col("brokerName").isNotNull())
            .groupBy("brokerName")
            .count()
            .select(F.struct("*").alias("r")),
            "replicas": replica_ids(frames[CONTROLLER_EVENTS], frames[ROLES]).select(
                F.struct("*").alias("r")
            ),
            "masters": masters.select(F.struct("*").alias("r")),
            "recorded": frames[ROLES]
            .where(not_null("brokerName", "brokerId"))
            .select("brokerName", "brokerId")
            .distinct()
            .select(F.struct("*").alias("r")),
            # The ack gaps' inputs: one row per (set, epoch) each (coverage.ack_gaps runs on the driver).
            "terms": terms(frames[CONTROLLER_EVENTS]).select(F.struct("*").alias("r")),
            "ackEnds": ack_ends(frames[ACKS]).select(F.struct("*").alias("r")),
            "epochStarts": epoch_starts(frames[EPOCHS]).select(F.struct("*").alias("r")),
        }
    )
    found = {r["brokerName"]: r["finalMasterId"] for r in small["masters"]}
    logs = tuple(
        sorted(
            (
                cov.LogStat(r["brokerName"], r["brokerId"], r["rows"], r["start"], r["end"])
                for r in small["logs"]
            ),
            key=lambda s: (s.broker_name, s.broker_id),
        )
    )
    starts = [(s.broker_name, s.start) for s in logs if found.get(s.broker_name) == s.broker_id]
    session = frames[ACKS].sparkSession
    start_frame = session.createDataFrame(starts, "brokerName string, logStart long")
    acks = tuple(
        sorted(
            cov.AckStat(r["brokerName"], r["source"], r["put_ok"], r["checked"], r["expired"], r["unchecked"])
            for r in ack_stats(frames[ACKS], start_frame).collect()
        )
    )
    replicas: dict[str, set[int]] = {}
    for r in small["replicas"]:
        replicas.setdefault(r["brokerName"], set()).add(r["brokerId"])
    recorded: dict[str, set[int]] = {}
    for r in small["recorded"]:
        recorded.setdefault(r["brokerName"], set()).add(r["brokerId"])
    return cov.Coverage(
        masters=dict(sorted(found.items())),
        logs=logs,
        acks=acks,
        reads=dict(sorted((r["brokerName"], r["count"]) for r in small["reads"])),
        replicas={name: tuple(sorted(ids)) for name, ids in sorted(replicas.items())},
        recorded={name: tuple(sorted(ids)) for name, ids in sorted(recorded.items())},
        gaps=cov.ack_gaps(
            (
                cov.Term(r["brokerName"], r["masterEpoch"], r["masterId"], r["opened"], r["highest"])
                for r in small["terms"]
            ),
            {(r["brokerName"], r["epoch"]): r["end"] for r in small["ackEnds"]},
            {(r["brokerName"], r["epoch"]): r["start"] for r in small["epochStarts"]},
        ),
    )


def check_tables(
    frames: Mapping[str, DataFrame], limit: int = inv.DEFAULT_LIMIT, problems: Sequence[str] = ()
) -> inv.Verdict:
    """Every check of §5 on loaded tables; returns the same ``Verdict`` as ``invariants.check_all``.

    Jobs: one counting every table; one counting every check (its big part is ``offset_pass``, one
    shuffle of all logs, acks and reads, plus the duplicate aggregation); only when some ack or read
    is suspect, one making those exact on the suspect keys; when anything is violated, one
    gathering the evidence rows of every violated check; and two small ones for the coverage
    (``coverage``: the per-replica log statistics are those ``final_masters`` already needed, the
    acks are counted by set and source against the log starts)."""
    counts = _count_by_label({table: frames[table] for table in TABLES})
    ce, fl, acks, reads = frames[CONTROLLER_EVENTS], frames[FINAL_LOGS], frames[ACKS], frames[READS]
    replica_logs = log_stats(fl).persist()
    masters = final_masters(ce, replica_logs).persist()
    log = master_log(fl, masters)
    flagged = offset_pass(fl, acks, reads, masters).persist()
    try:
        ack_keys = flagged.where("ackSuspect")
        read_keys = flagged.where("readSuspect")
        violations = {
            inv.REPLICA_DIVERGENCE: flagged.where("divergent").select("brokerName", "offset"),
            inv.TWO_MASTERS_IN_EPOCH: two_masters_in_epoch(ce, frames[ROLES]),
            inv.EPOCH_NOT_INCREASING: epoch_not_increasing(ce),
            inv.EPOCH_START_MISMATCH: epoch_start_mismatch(frames[EPOCHS]),
            inv.MASTER_OUTSIDE_SSS: master_outside_sss(ce),
            inv.DUPLICATE: duplicate_keys(log),
        }
        found = _count_by_label({**violations, "ackSuspect": ack_keys, "readSuspect": read_keys})
        # Exact lost acks and uncommitted reads: the per-row rule, on the suspect groups only.
        exact: dict[str, DataFrame] = {}
        started = with_log_starts(masters, log) if found["ackSuspect"] or found["readSuspect"] else masters
        if found["ackSuspect"]:
            exact[inv.LOST_ACK] = lost_ack(at_keys(acks, ack_keys), started, at_keys(log, ack_keys))
        if found["readSuspect"]:
            exact[inv.READ_UNCOMMITTED] = read_uncommitted(
                at_keys(reads, read_keys), started, at_keys(log, read_keys)
            )
        found.update({inv.LOST_ACK: 0, inv.READ_UNCOMMITTED: 0})
        if exact:
            found.update(_count_by_label(exact))
        violations.update(exact)
        evidence: dict[str, DataFrame] = {}
        for name in inv.CHECKS:
            if not found[name]:
                continue
            if name == inv.REPLICA_DIVERGENCE:
                few = violations[name].orderBy(*inv.ORDER[name]).limit(limit)
                evidence[name] = divergence_evidence(few, fl)
            elif name == inv.DUPLICATE:
                few = violations[name].orderBy(*inv.ORDER[name]).limit(limit)
                evidence[name] = duplicate_evidence(few, log)
            else:
                evidence[name] = violations[name]
        rows = _collect_evidence(evidence, limit)
        findings = [inv.Finding(name, found[name], tuple(rows.get(name, ()))) for name in inv.CHECKS]
        covered = coverage(frames, masters, replica_logs)
    finally:
        flagged.unpersist()
        masters.unpersist()
        replica_logs.unpersist()
    return inv.Verdict(tuple(findings), counts, covered, tuple(problems))


def timeline_rows(
    frames: Mapping[str, DataFrame], limit: int = TIMELINE_LIMIT
) -> dict[str, list[dict[str, Any]]]:
    """Rows for the timeline picture, each table cut to ``limit`` rows (controller events: only the
    rows where a set's master, epochs or SyncStateSet change, one per raftIndex)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ce = (
        frames[CONTROLLER_EVENTS]
        .where(not_null("brokerName", "raftIndex"))
        .groupBy("brokerName", "raftIndex")
        .agg(
            F.min("ts").alias("ts"),
            F.first("masterBrokerId", ignorenulls=True).alias("masterBrokerId"),
            F.first("masterEpoch", ignorenulls=True).alias("masterEpoch"),
            F.first("syncStateSet", ignorenulls=True).alias("syncStateSet"),
            F.first("syncStateSetEpoch", ignorenulls=True).alias("syncStateSetEpoch"),
            F.first("type").alias("type"),
        )
    )
    state = F.struct("masterBrokerId", "masterEpoch", "syncStateSetEpoch")
    ce = ce.withColumn("_prev", F.lag(state).over(Window.partitionBy("brokerName").orderBy("raftIndex")))
    ce = ce.where(F.col("_prev").isNull() | ~F.col("_prev").eqNullSafe(state)).drop("_prev")
    parts = {CONTROLLER_EVENTS: ce, **{table: frames[table] for table in (ROLES, EPOCHS, TRUNCATIONS)}}
    # Where each set's picture ends: its last ack or read (one row per set and table).
    last = {
        f"{ACTIVITY}_{table}": frames[table].groupBy("brokerName").agg(F.max("ts").alias("ts"))
        for table in (ACKS, READS)
    }
    rows = _collect_json(
        {
            **{
                table: df.orderBy("ts").limit(limit).select(F.struct(*df.columns).alias("r"))
                for table, df in parts.items()
            },
            **{key: df.select(F.struct(*df.columns).alias("r")) for key, df in last.items()},
        }
    )
    rows[ACTIVITY] = [row for key in last for row in rows.pop(key)]
    return rows


# --------------------------------------------------------------------------------------------------
# Entry points


def analyze(
    input_dir: str | os.PathLike[str],
    *,
    master: str = DEFAULT_MASTER,
    report_dir: str | os.PathLike[str] | None = None,
    limit: int = inv.DEFAULT_LIMIT,
    spark: SparkSession | None = None,
) -> inv.Verdict:
    """Load an export, check every invariant, write the reports (default ``<input_dir>/report``)."""
    from pyspark.sql import SparkSession

    from mqha.analysis.export import export_problems
    from mqha.analysis.report import build_timelines, write_reports

    if not Path(input_dir).is_dir():  # before starting a JVM
        raise FileNotFoundError(f"not a directory: {input_dir}")
    # Stop only a session this call started (a caller's or test's session stays up).
    own = spark is None and SparkSession.getActiveSession() is None
    session = spark_session(master) if spark is None else spark
    try:
        frames = load_tables(session, input_dir)
        try:
            verdict = check_tables(frames, limit, export_problems(input_dir))
            rows = timeline_rows(frames)
        finally:
            unpersist(frames)
    finally:
        if own:
            session.stop()
    timelines = build_timelines(
        rows[CONTROLLER_EVENTS], rows[ROLES], rows[EPOCHS], rows[TRUNCATIONS], rows[ACTIVITY]
    )
    write_reports(
        verdict,
        timelines,
        Path(report_dir) if report_dir else Path(input_dir) / "report",
        source=str(input_dir),
        engine=f"spark {master}",
    )
    return verdict


def analyze_python(
    input_dir: str | os.PathLike[str],
    *,
    report_dir: str | os.PathLike[str] | None = None,
    limit: int = inv.DEFAULT_LIMIT,
) -> inv.Verdict:
    """The same analysis with the pure functions (small exports; no JVM)."""
    from mqha.analysis.export import export_problems, read_tables
    from mqha.analysis.report import build_timelines, write_reports

    tables = read_tables(input_dir)
    verdict = inv.check_all(tables, limit, export_problems(input_dir))
    timelines = build_timelines(
        tables[CONTROLLER_EVENTS],
        tables[ROLES],
        tables[EPOCHS],
        tables[TRUNCATIONS],
        [*tables[ACKS], *tables[READS]],
    )
    write_reports(
        verdict,
        timelines,
        Path(report_dir) if report_dir else Path(input_dir) / "report",
        source=str(input_dir),
        engine="python",
    )
    return verdict


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit mqha/analysis/spark_job.py DIR [--report-dir R]`` (the master comes from
    spark-submit)."""
    parser = argparse.ArgumentParser(prog="spark_job.py")
    parser.add_argument("input_dir")
    parser.add_argument("--report-dir")
    parser.add_argument("--limit", type=int, default=inv.DEFAULT_LIMIT)
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("mqha-analyze").getOrCreate()
    try:
        verdict = analyze(args.input_dir, report_dir=args.report_dir, limit=args.limit, spark=spark)
    finally:
        spark.stop()
    from mqha.analysis.report import summary_text

    print(summary_text(verdict))
    return cov.EXIT_CODES[verdict.status]


if __name__ == "__main__":
    sys.exit(main())
