"""The §5 invariants as PySpark DataFrames of evidence rows (shell over ``mqha.analysis.invariants``).

Each check mirrors the pure function of the same name in ``mqha.analysis.invariants`` and yields the
evidence columns ``invariants.EVIDENCE[name]``; ``mqha.analysis.spark_job`` counts them and collects
the evidence (its module docstring has the cost model: one shared shuffle for the offset checks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mqha.analysis import invariants as inv

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def not_null(*names: str) -> Column:
    """All of ``names`` are not null."""
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for name in names:
        cond = cond & F.col(name).isNotNull()
    return cond


def final_masters(ce: DataFrame, replica_logs: DataFrame) -> DataFrame:
    """(brokerName, finalMasterId): the last named master, else the longest final log.
    ``replica_logs`` is :func:`log_stats` (one small row per replica: the log is scanned once, for
    this fallback and for the coverage counts alike)."""
    from pyspark.sql import functions as F

    from_controller = (
        ce.where(not_null("brokerName", "masterBrokerId", "raftIndex"))
        .groupBy("brokerName")
        .agg(F.max(F.struct("raftIndex", "masterBrokerId")).alias("m"))
        .select("brokerName", F.col("m.masterBrokerId").alias("finalMasterId"))
    )
    from_logs = (
        replica_logs.join(F.broadcast(from_controller.select("brokerName")), "brokerName", "left_anti")
        .groupBy("brokerName")
        .agg(F.max(F.struct(F.col("end"), (-F.col("brokerId")).alias("negId"))).alias("m"))
        .select("brokerName", (-F.col("m.negId")).alias("finalMasterId"))
    )
    return from_controller.unionByName(from_logs)


def master_log(fl: DataFrame, masters: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return (
        fl.where(not_null("brokerName", "brokerId", "offset"))
        .join(F.broadcast(masters), "brokerName")
        .where(F.col("brokerId") == F.col("finalMasterId"))
        .select("brokerName", "offset", "msgId")
    )


def with_log_starts(masters: DataFrame, log: DataFrame) -> DataFrame:
    """``masters`` plus ``logStart``: the lowest offset of each final master log (retention cuts only
    the front of a log; below it a message expired, it was not lost). One small aggregation."""
    from pyspark.sql import functions as F

    starts = log.groupBy("brokerName").agg(F.min("offset").alias("logStart"))
    return masters.join(starts, "brokerName", "left")


def _against_master_log(
    rows: DataFrame, masters: DataFrame, log: DataFrame, columns: Sequence[str]
) -> DataFrame:
    """Rows at or above the log start whose msgId is not the final master log's message at
    (brokerName, offset), in sets with a final master log. ``masters`` carries ``logStart``
    (:func:`with_log_starts`)."""
    from pyspark.sql import functions as F

    found = log.select(
        "brokerName", "offset", F.col("msgId").alias("foundMsgId"), F.lit(True).alias("_found")
    )
    joined = rows.join(F.broadcast(masters), "brokerName", "left").join(
        found, ["brokerName", "offset"], "left"
    )
    # A set without a final master log is not checked (coverage.judge: inconclusive, never a loss).
    live = F.col("logStart").isNotNull() & (F.col("offset") >= F.col("logStart"))
    bad = live & (F.col("_found").isNull() | ~F.col("foundMsgId").eqNullSafe(F.col("msgId")))
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
        fl.where(not_null("brokerName", "brokerId", "offset"))
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
        fl.where(not_null("brokerName", "brokerId", "offset"))
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


def at_keys(rows: DataFrame, keys: DataFrame) -> DataFrame:
    """``rows`` whose (brokerName, offset) is among ``keys``, nulls matching nulls."""
    from pyspark.sql import functions as F

    k = keys.select(F.col("brokerName").alias("_kName"), F.col("offset").alias("_kOffset"))
    cond = rows["brokerName"].eqNullSafe(k["_kName"]) & rows["offset"].eqNullSafe(k["_kOffset"])
    return rows.join(k, cond, "left_semi")


def two_masters_in_epoch(ce: DataFrame, roles: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    named = ce.where(not_null("brokerName", "masterBrokerId", "masterEpoch")).select(
        "brokerName", "masterEpoch", F.col("masterBrokerId").alias("id")
    )
    claimed = roles.where(
        F.upper(F.col("role")).endswith("MASTER") & not_null("brokerName", "brokerId", "masterEpoch")
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
    rows = ce.where(not_null("brokerName", "raftIndex")).withColumn(
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
        epochs.where(not_null("brokerName", "brokerId", "epoch"))
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
# Coverage (``mqha.analysis.coverage``): small aggregates, the same numbers as the pure functions.


def log_stats(fl: DataFrame) -> DataFrame:
    """(brokerName, brokerId, rows, start, end) of every replica's final log."""
    from pyspark.sql import functions as F

    return (
        fl.where(not_null("brokerName", "brokerId", "offset"))
        .groupBy("brokerName", "brokerId")
        .agg(
            F.count("*").alias("rows"),
            F.min("offset").alias("start"),
            F.max(F.col("offset") + F.coalesce(F.col("size"), F.lit(0))).alias("end"),
        )
    )


def ack_stats(acks: DataFrame, starts: DataFrame) -> DataFrame:
    """(brokerName, source, put_ok, checked, expired, unchecked): ``coverage.AckStat`` per row;
    ``starts`` is (brokerName, logStart) of the sets with a final master log."""
    from pyspark.sql import functions as F

    from mqha.history.schema import BROKER_ACK_PREFIX

    all_ack = F.col("ackMode") == inv.ALL_ACK_MODE
    start = F.col("logStart")
    below = F.coalesce(F.col("offset") < start, F.lit(False))
    source = F.when(
        F.coalesce(F.col("client").startswith(BROKER_ACK_PREFIX), F.lit(False)), F.lit("broker")
    ).otherwise(F.lit("client"))

    def total(cond: Column) -> Column:
        return F.sum(F.when(F.coalesce(cond, F.lit(False)), 1).otherwise(0))

    return (
        acks.where((F.col("status") == inv.PUT_OK) & F.col("brokerName").isNotNull())
        .join(F.broadcast(starts), "brokerName", "left")
        .groupBy("brokerName", source.alias("source"))
        .agg(
            F.count("*").alias("put_ok"),
            total(all_ack & start.isNotNull() & ~below).alias("checked"),
            total(all_ack & start.isNotNull() & below).alias("expired"),
            total(all_ack & start.isNull()).alias("unchecked"),
        )
    )


def replica_ids(ce: DataFrame, roles: DataFrame) -> DataFrame:
    """(brokerName, brokerId): ``coverage.expected_replicas`` as rows."""
    from pyspark.sql import functions as F

    ran = roles.where(not_null("brokerName", "brokerId")).select("brokerName", "brokerId")
    masters = ce.where(not_null("brokerName", "masterBrokerId")).select(
        "brokerName", F.col("masterBrokerId").alias("brokerId")
    )
    members = ce.where(not_null("brokerName", "syncStateSet")).select(
        "brokerName", F.explode("syncStateSet").alias("brokerId")
    )
    return ran.unionByName(masters).unionByName(members).where(not_null("brokerId")).distinct()


def terms(ce: DataFrame) -> DataFrame:
    """(brokerName, masterEpoch, masterId, opened, highest): ``coverage.terms_of`` as rows."""
    from pyspark.sql import functions as F

    mark = F.greatest(F.coalesce("ackedWatermark", F.lit(-1)), F.coalesce("ackedDataLostTo", F.lit(-1)))
    return (
        ce.where(not_null("brokerName", "masterEpoch", "raftIndex"))
        .withColumn("mark", mark)
        .groupBy("brokerName", "masterEpoch")
        .agg(
            F.max("masterBrokerId").alias("masterId"),
            F.min(F.struct("raftIndex", "mark")).alias("first"),
            F.max("mark").alias("highest"),
        )
        .select("brokerName", "masterEpoch", "masterId", F.col("first.mark").alias("opened"), "highest")
    )


def ack_ends(acks: DataFrame) -> DataFrame:
    """(brokerName, epoch, end): ``coverage.ack_ends`` as rows."""
    from pyspark.sql import functions as F

    return (
        acks.where((F.col("status") == inv.PUT_OK) & not_null("brokerName", "epoch", "offset"))
        .groupBy("brokerName", "epoch")
        .agg(F.max(F.col("offset") + F.coalesce(F.col("size"), F.lit(0))).alias("end"))
    )


def epoch_starts(epochs: DataFrame) -> DataFrame:
    """(brokerName, epoch, start): ``coverage.epoch_starts`` as rows."""
    from pyspark.sql import functions as F

    return (
        epochs.where(not_null("brokerName", "epoch", "startOffset"))
        .groupBy("brokerName", "epoch")
        .agg(F.min("startOffset").alias("start"))
    )
