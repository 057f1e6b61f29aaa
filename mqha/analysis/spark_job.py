"""``mqha analyze``: the §5 invariants as PySpark DataFrame queries over an export (shell).

Every check mirrors the pure function of the same name in ``mqha.analysis.invariants`` (read its module
docstring for the definitions, null handling included) and yields the same evidence columns, so the
verdicts can be compared one to one. Only counts and evidence rows reach the driver: each check is a
DataFrame of violations; all of them are counted in one job, then each violated one is sorted and cut
to ``limit`` rows before the (single) collect; no table is ever collected whole. The timeline picture
takes at most ``TIMELINE_LIMIT`` rows of the small tables (controller events, roles, epochs,
truncations).

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

from mqha.analysis import invariants as inv
from mqha.history.schema import (
    ACKS,
    BOOLEAN,
    CONTROLLER_EVENTS,
    EPOCHS,
    FINAL_LOGS,
    LONG,
    LONG_ARRAY,
    READS,
    ROLES,
    STRING,
    TABLES,
    TRUNCATIONS,
    export_columns,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

DEFAULT_MASTER = "local[*]"
TIMELINE_LIMIT = 5000
CACHE_JSON_ABOVE = 32 * 2**20

# Small-machine defaults (2 cores, shared): no UI, few shuffle partitions, loopback only, quiet logs.
SPARK_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.memory": "2g",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
}


def spark_session(
    master: str = DEFAULT_MASTER, app_name: str = "mqha-analyze", conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A SparkSession with ``SPARK_DEFAULTS`` (overridden by ``conf`` and ``MQHA_SPARK_DRIVER_MEMORY``)."""
    from pyspark.sql import SparkSession

    settings = dict(SPARK_DEFAULTS)
    if os.environ.get("MQHA_SPARK_DRIVER_MEMORY"):
        settings["spark.driver.memory"] = os.environ["MQHA_SPARK_DRIVER_MEMORY"]
    settings.update(conf or {})
    # Spark's launcher reads these before the JVM exists; keep its own chatter off our stdout.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_schema(table: str) -> Any:
    """The ``StructType`` of an exported table (``mqha.history.schema.export_columns``)."""
    from pyspark.sql import types as T

    kinds = {
        STRING: T.StringType(),
        LONG: T.LongType(),
        BOOLEAN: T.BooleanType(),
        LONG_ARRAY: T.ArrayType(T.LongType()),
    }
    return T.StructType([T.StructField(name, kinds[kind], True) for name, kind in export_columns(table)])


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def load_tables(
    spark: SparkSession, input_dir: str | os.PathLike[str], *, cache_json_above: int = CACHE_JSON_ABOVE
) -> dict[str, DataFrame]:
    """Every §5 table of an export directory (see the module docstring). A JSON Lines table larger
    than ``cache_json_above`` bytes is persisted (parsed once, however many queries read it); a
    smaller one is cheaper to re-parse than to cache, and Parquet is columnar and cheap to re-read."""
    from pyspark import StorageLevel

    base = Path(input_dir)
    if not base.is_dir():
        raise FileNotFoundError(f"not a directory: {base}")
    frames: dict[str, DataFrame] = {}
    for table in TABLES:
        schema = spark_schema(table)
        jsonl, parquet = base / f"{table}.jsonl", base / table
        if jsonl.exists():
            df = spark.read.schema(schema).option("mode", "FAILFAST").json(str(jsonl))
            big = _size(jsonl) > cache_json_above
            frames[table] = df.persist(StorageLevel.MEMORY_AND_DISK) if big else df
        elif parquet.is_dir():
            frames[table] = spark.read.schema(schema).parquet(str(parquet))
        else:
            frames[table] = spark.createDataFrame([], schema)
    return frames


def unpersist(frames: Mapping[str, DataFrame]) -> None:
    for df in frames.values():
        df.unpersist()


# --------------------------------------------------------------------------------------------------
# The checks as DataFrames of evidence rows (columns: ``invariants.EVIDENCE[name]``).


def _nn(*names: str) -> Column:
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for name in names:
        cond = cond & F.col(name).isNotNull()
    return cond


def final_masters(ce: DataFrame, fl: DataFrame) -> DataFrame:
    """(brokerName, finalMasterId): the last named master, else the longest final log."""
    from pyspark.sql import functions as F

    from_controller = (
        ce.where(_nn("brokerName", "masterBrokerId", "raftIndex"))
        .groupBy("brokerName")
        .agg(F.max(F.struct("raftIndex", "masterBrokerId")).alias("m"))
        .select("brokerName", F.col("m.masterBrokerId").alias("finalMasterId"))
    )
    ends = (
        fl.where(_nn("brokerName", "brokerId", "offset"))
        .join(F.broadcast(from_controller.select("brokerName")), "brokerName", "left_anti")
        .groupBy("brokerName", "brokerId")
        .agg(F.max(F.col("offset") + F.coalesce(F.col("size"), F.lit(0))).alias("end"))
    )
    from_logs = (
        ends.groupBy("brokerName")
        .agg(F.max(F.struct(F.col("end"), (-F.col("brokerId")).alias("negId"))).alias("m"))
        .select("brokerName", (-F.col("m.negId")).alias("finalMasterId"))
    )
    return from_controller.unionByName(from_logs)


def master_log(fl: DataFrame, masters: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return (
        fl.where(_nn("brokerName", "brokerId", "offset"))
        .join(F.broadcast(masters), "brokerName")
        .where(F.col("brokerId") == F.col("finalMasterId"))
        .select("brokerName", "offset", "msgId")
    )


def _against_master_log(
    rows: DataFrame, masters: DataFrame, log: DataFrame, columns: Sequence[str]
) -> DataFrame:
    """Rows whose msgId is not the final master log's message at (brokerName, offset)."""
    from pyspark.sql import functions as F

    found = log.select(
        "brokerName", "offset", F.col("msgId").alias("foundMsgId"), F.lit(True).alias("_found")
    )
    joined = rows.join(F.broadcast(masters), "brokerName", "left").join(
        found, ["brokerName", "offset"], "left"
    )
    bad = F.col("_found").isNull() | ~F.col("foundMsgId").eqNullSafe(F.col("msgId"))
    return joined.where(bad).select(*columns)


def lost_ack(acks: DataFrame, masters: DataFrame, log: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    checked = acks.where((F.col("status") == inv.PUT_OK) & (F.col("ackMode") == inv.ALL_ACK_MODE))
    return _against_master_log(checked, masters, log, inv.EVIDENCE[inv.LOST_ACK])


def read_uncommitted(reads: DataFrame, masters: DataFrame, log: DataFrame) -> DataFrame:
    return _against_master_log(reads, masters, log, inv.EVIDENCE[inv.READ_UNCOMMITTED])


def divergence_evidence(keys: DataFrame, fl: DataFrame) -> DataFrame:
    """The replicas behind some divergent offsets (``keys`` is already cut to the evidence limit)."""
    from pyspark.sql import functions as F

    return (
        fl.where(_nn("brokerName", "brokerId", "offset"))
        .join(F.broadcast(keys), ["brokerName", "offset"])
        .groupBy("brokerName", "offset")
        .agg(F.array_sort(F.collect_list(F.struct("brokerId", "msgId", "size", "crc"))).alias("replicas"))
    )


def _msg_hash(value: Column) -> Column:
    """xxhash64 of a non-null msgId, else null (``F.xxhash64`` alone maps null to its seed)."""
    from pyspark.sql import functions as F

    return F.when(value.isNotNull(), F.xxhash64(value))


def offset_pass(fl: DataFrame, acks: DataFrame, reads: DataFrame, masters: DataFrame) -> DataFrame:
    """ONE shuffle over (brokerName, offset) for three checks: every replica's log row, every checked
    ack and every read meet in one group, aggregated with min/max/count of 64-bit values only, so
    Spark keeps a fixed-width hash aggregation (min/max of strings or structs force a sort-based
    one, several times slower):

    - ``divergent``: the replicas disagree on size, crc or msgId (compared through xxhash64 of
      msgId, null read as '' as ``invariants.message_signature`` does);
    - ``ackSuspect`` / ``readSuspect``: some ack / read in the group may not match the final master's
      message -- a superset (a group is cleared only when a master row with a msgId exists and every
      ack's msgId hashes to it), made exact afterwards by the per-row rule on the suspect keys alone.

    A violation could hide only behind an xxhash64 collision of two different msgIds at one offset.
    Returns only the flagged groups: (brokerName, offset, divergent, ackSuspect, readSuspect)."""
    from pyspark.sql import functions as F

    msg = F.col("msgId")
    logs = (
        fl.where(_nn("brokerName", "brokerId", "offset"))
        .join(F.broadcast(masters), "brokerName", "left")
        .select(
            "brokerName",
            "offset",
            F.lit(0).alias("kind"),
            F.xxhash64(F.coalesce(msg, F.lit(""))).alias("sigM"),
            F.coalesce(F.col("size"), F.lit(-1)).alias("sigS"),
            F.coalesce(F.col("crc"), F.lit(-1)).alias("sigC"),
            F.coalesce(F.col("brokerId") == F.col("finalMasterId"), F.lit(False)).alias("isMaster"),
            "msgId",
        )
    )
    checked = acks.where((F.col("status") == inv.PUT_OK) & (F.col("ackMode") == inv.ALL_ACK_MODE))
    union = logs.unionByName(
        checked.select("brokerName", "offset", F.lit(1).alias("kind"), "msgId"), allowMissingColumns=True
    ).unionByName(
        reads.select("brokerName", "offset", F.lit(2).alias("kind"), "msgId"), allowMissingColumns=True
    )
    master = F.col("isMaster")
    sig_aggs = [
        agg(F.col(c)).alias(f"{c}{tag}")
        for c in ("sigM", "sigS", "sigC")
        for agg, tag in ((F.min, "Lo"), (F.max, "Hi"))
    ]
    groups = union.groupBy("brokerName", "offset").agg(
        *sig_aggs,
        F.max(F.when(master, F.lit(1))).alias("hasMaster"),
        F.max(F.when(master & msg.isNull(), F.lit(1))).alias("masterNull"),
        F.max(F.when(master, _msg_hash(msg))).alias("masterHash"),
        *(
            agg
            for kind, tag in ((1, "ack"), (2, "read"))
            for agg in (
                F.count(F.when(F.col("kind") == kind, F.lit(1))).alias(f"{tag}N"),
                F.count(F.when((F.col("kind") == kind) & msg.isNull(), F.lit(1))).alias(f"{tag}Null"),
                F.min(F.when(F.col("kind") == kind, _msg_hash(msg))).alias(f"{tag}Lo"),
                F.max(F.when(F.col("kind") == kind, _msg_hash(msg))).alias(f"{tag}Hi"),
            )
        ),
    )

    def suspect(tag: str) -> Column:
        cleared = (
            F.col("hasMaster").isNotNull()
            & F.col("masterNull").isNull()
            & F.col("masterHash").isNotNull()
            & (F.col(f"{tag}Null") == 0)
            & (F.col(f"{tag}Lo") == F.col("masterHash"))
            & (F.col(f"{tag}Hi") == F.col("masterHash"))
        )
        return (F.col(f"{tag}N") > 0) & ~F.coalesce(cleared, F.lit(False))

    differ = F.lit(False)
    for c in ("sigM", "sigS", "sigC"):
        differ = differ | F.coalesce(F.col(f"{c}Lo") != F.col(f"{c}Hi"), F.lit(False))
    flags = groups.select(
        "brokerName",
        "offset",
        differ.alias("divergent"),
        suspect("ack").alias("ackSuspect"),
        suspect("read").alias("readSuspect"),
    )
    return flags.where(F.col("divergent") | F.col("ackSuspect") | F.col("readSuspect"))


def _at_keys(rows: DataFrame, keys: DataFrame) -> DataFrame:
    """``rows`` whose (brokerName, offset) is among ``keys``, nulls matching nulls."""
    from pyspark.sql import functions as F

    k = keys.select(F.col("brokerName").alias("_kName"), F.col("offset").alias("_kOffset"))
    cond = rows["brokerName"].eqNullSafe(k["_kName"]) & rows["offset"].eqNullSafe(k["_kOffset"])
    return rows.join(k, cond, "left_semi")


def two_masters_in_epoch(ce: DataFrame, roles: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    named = ce.where(_nn("brokerName", "masterBrokerId", "masterEpoch")).select(
        "brokerName", "masterEpoch", F.col("masterBrokerId").alias("id")
    )
    claimed = roles.where(
        F.upper(F.col("role")).endswith("MASTER") & _nn("brokerName", "brokerId", "masterEpoch")
    )
    claimed = claimed.select("brokerName", "masterEpoch", F.col("brokerId").alias("id"))
    return (
        named.unionByName(claimed)
        .groupBy("brokerName", "masterEpoch")
        .agg(F.array_sort(F.collect_set("id")).alias("masterIds"))
        .where(F.size("masterIds") > 1)
    )


def epoch_not_increasing(ce: DataFrame) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    upto = (
        Window.partitionBy("node", "brokerName")
        .orderBy("raftIndex")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    removal = (F.col("type") == inv.CLEAN_TYPE) & F.col("masterEpoch").isNull()
    rows = ce.where(_nn("brokerName", "raftIndex")).withColumn(
        "generation", F.sum(F.when(removal, 1).otherwise(0)).over(upto)
    )
    rows = rows.where(F.col("masterEpoch").isNotNull())
    prev = Window.partitionBy("node", "brokerName", "generation").orderBy("raftIndex")
    rows = rows.select(
        "node",
        "brokerName",
        "raftIndex",
        F.lag("raftIndex").over(prev).alias("prevRaftIndex"),
        "masterEpoch",
        F.lag("masterEpoch").over(prev).alias("prevMasterEpoch"),
        "syncStateSetEpoch",
        F.lag("syncStateSetEpoch").over(prev).alias("prevSyncStateSetEpoch"),
    )
    lower = F.coalesce(F.col("masterEpoch") < F.col("prevMasterEpoch"), F.lit(False)) | F.coalesce(
        F.col("syncStateSetEpoch") < F.col("prevSyncStateSetEpoch"), F.lit(False)
    )
    return rows.where(F.col("prevRaftIndex").isNotNull() & lower)


def epoch_start_mismatch(epochs: DataFrame) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    newest_first = Window.partitionBy("brokerName", "brokerId", "epoch").orderBy(
        F.col("ts").desc_nulls_last(), F.col("seq").desc_nulls_last(), F.col("startOffset").desc_nulls_last()
    )
    latest = (
        epochs.where(_nn("brokerName", "brokerId", "epoch"))
        .withColumn("rn", F.row_number().over(newest_first))
        .where(F.col("rn") == 1)
    )
    return (
        latest.groupBy("brokerName", "epoch")
        .agg(F.array_sort(F.collect_set("startOffset")).alias("startOffsets"))
        .where(F.size("startOffsets") > 1)
    )


def master_outside_sss(ce: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    inside = F.coalesce(F.array_contains(F.col("syncStateSet"), F.col("masterBrokerId")), F.lit(False))
    return ce.where(F.col("masterBrokerId").isNotNull() & ~inside).select(
        "node",
        "raftIndex",
        "brokerName",
        "masterBrokerId",
        "masterEpoch",
        F.array_sort(F.col("syncStateSet")).alias("syncStateSet"),
    )


def duplicate_keys(log: DataFrame) -> DataFrame:
    """(brokerName, msgId) at more than one offset of a final master log: min/max, no collect."""
    from pyspark.sql import functions as F

    return (
        log.where(F.col("msgId").isNotNull())
        .groupBy("brokerName", "msgId")
        .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
        .where(F.col("lo") != F.col("hi"))
        .select("brokerName", "msgId")
    )


def duplicate_evidence(keys: DataFrame, log: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return (
        log.join(F.broadcast(keys), ["brokerName", "msgId"])
        .groupBy("brokerName", "msgId")
        .agg(F.array_sort(F.collect_set("offset")).alias("offsets"))
    )


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


def check_tables(frames: Mapping[str, DataFrame], limit: int = inv.DEFAULT_LIMIT) -> inv.Verdict:
    """Every check of §5 on loaded tables; returns the same ``Verdict`` as ``invariants.check_all``.

    Jobs: one counting every table; one counting every check (its big part is ``offset_pass``, one
    shuffle of all logs, acks and reads, plus the duplicate aggregation); only when some ack or read
    is suspect, one making those exact on the suspect keys; and when anything is violated, one
    gathering the evidence rows of every violated check."""
    counts = _count_by_label({table: frames[table] for table in TABLES})
    ce, fl, acks, reads = frames[CONTROLLER_EVENTS], frames[FINAL_LOGS], frames[ACKS], frames[READS]
    masters = final_masters(ce, fl).persist()
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
        if found["ackSuspect"]:
            exact[inv.LOST_ACK] = lost_ack(_at_keys(acks, ack_keys), masters, _at_keys(log, ack_keys))
        if found["readSuspect"]:
            exact[inv.READ_UNCOMMITTED] = read_uncommitted(
                _at_keys(reads, read_keys), masters, _at_keys(log, read_keys)
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
    finally:
        flagged.unpersist()
        masters.unpersist()
    return inv.Verdict(tuple(findings), counts)


def timeline_rows(
    frames: Mapping[str, DataFrame], limit: int = TIMELINE_LIMIT
) -> dict[str, list[dict[str, Any]]]:
    """Rows for the timeline picture, each table cut to ``limit`` rows (controller events: only the
    rows where a set's master, epochs or SyncStateSet change, one per raftIndex)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ce = (
        frames[CONTROLLER_EVENTS]
        .where(_nn("brokerName", "raftIndex"))
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
    return _collect_json(
        {
            table: df.orderBy("ts").limit(limit).select(F.struct(*df.columns).alias("r"))
            for table, df in parts.items()
        }
    )


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

    from mqha.analysis.report import build_timelines, write_reports

    if not Path(input_dir).is_dir():  # before starting a JVM
        raise FileNotFoundError(f"not a directory: {input_dir}")
    # Stop only a session this call started (a caller's or test's session stays up).
    own = spark is None and SparkSession.getActiveSession() is None
    session = spark_session(master) if spark is None else spark
    try:
        frames = load_tables(session, input_dir)
        try:
            verdict = check_tables(frames, limit)
            rows = timeline_rows(frames)
        finally:
            unpersist(frames)
    finally:
        if own:
            session.stop()
    timelines = build_timelines(rows[CONTROLLER_EVENTS], rows[ROLES], rows[EPOCHS], rows[TRUNCATIONS])
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
    from mqha.analysis.export import read_tables
    from mqha.analysis.report import build_timelines, write_reports

    tables = read_tables(input_dir)
    verdict = inv.check_all(tables, limit)
    timelines = build_timelines(tables[CONTROLLER_EVENTS], tables[ROLES], tables[EPOCHS], tables[TRUNCATIONS])
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
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
