"""The history tables of docs/architecture.md §5, written once for every layer that touches them (core).

The recorder (``mqha.history.recorder``) creates the SQLite tables from this, the exporter
(``mqha.analysis.export``) types each JSON Lines value by it and writes it out as ``schema.json``, and the
Spark job (``mqha.analysis.spark_job``) reads the export with exactly this schema -- so an offset is a
64-bit integer from the broker's ``int`` to Spark's ``LongType`` and never passes through a driver
that narrows it (SQLite's JDBC driver reads INTEGER as 32-bit unless told otherwise).

The §5 column names are fixed; the extra columns are ours (§5 allows adding, never renaming):

- every table: ``seq`` -- the SQLite rowid, added by the exporter: insertion order inside one database,
  used as the tie-break after ``ts``;
- ``controller_events``: ``code`` / ``accepted`` (the apply outcome), ``remark``; ``ackedWatermark``,
  ``eligibleReplicas`` (the set's election state after the entry) and ``ackedDataLostFrom`` /
  ``ackedDataLostTo`` (an election that declared acknowledged data lost, docs/architecture.md §3.2);
- ``broker_starts`` (ours): each broker process a controller node heard of, with its start report;
- ``roles``: ``masterBrokerId`` (the master a slave follows, or itself);
- ``reads``: ``brokerId`` (the replica that served the read);
- ``final_logs``: ``node`` (the broker process that dumped it).

Kinds: ``string``, ``long`` (64-bit signed), ``boolean``, ``array<long>`` (stored in SQLite as JSON
text, exported as a JSON array). ``ts`` is wall-clock milliseconds since the Unix epoch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

VERDICT_FILE = "verdict.json"
"""Where an ``mqha analyze`` report puts its verdict; the controller's console reads it from there."""

BROKER_ACK_PREFIX = "broker@"
"""The ``acks.client`` of an ack a master recorded itself: ``broker@<its address>`` (§5)."""

STRING = "string"
LONG = "long"
BOOLEAN = "boolean"
LONG_ARRAY = "array<long>"

Column = tuple[str, str]

CONTROLLER_EVENTS = "controller_events"
EPOCHS = "epochs"
ROLES = "roles"
TRUNCATIONS = "truncations"
ACKS = "acks"
READS = "reads"
FINAL_LOGS = "final_logs"
BROKER_STARTS = "broker_starts"

TABLES: dict[str, tuple[Column, ...]] = {
    CONTROLLER_EVENTS: (
        ("node", STRING),
        ("raftIndex", LONG),
        ("ts", LONG),
        ("type", STRING),
        ("clusterName", STRING),
        ("brokerName", STRING),
        ("brokerId", LONG),
        ("masterBrokerId", LONG),
        ("masterEpoch", LONG),
        ("syncStateSet", LONG_ARRAY),
        ("syncStateSetEpoch", LONG),
        ("code", LONG),
        ("accepted", BOOLEAN),
        ("remark", STRING),
        ("ackedWatermark", LONG),
        ("eligibleReplicas", LONG_ARRAY),
        ("ackedDataLostFrom", LONG),
        ("ackedDataLostTo", LONG),
    ),
    EPOCHS: (
        ("node", STRING),
        ("brokerName", STRING),
        ("brokerId", LONG),
        ("epoch", LONG),
        ("startOffset", LONG),
        ("ts", LONG),
    ),
    ROLES: (
        ("node", STRING),
        ("brokerName", STRING),
        ("brokerId", LONG),
        ("role", STRING),
        ("masterEpoch", LONG),
        ("ts", LONG),
        ("masterBrokerId", LONG),
    ),
    TRUNCATIONS: (
        ("node", STRING),
        ("brokerName", STRING),
        ("brokerId", LONG),
        ("fromOffset", LONG),
        ("toOffset", LONG),
        ("reason", STRING),
        ("ts", LONG),
    ),
    ACKS: (
        ("client", STRING),
        ("msgId", STRING),
        ("brokerName", STRING),
        ("brokerId", LONG),
        ("offset", LONG),
        ("size", LONG),
        ("epoch", LONG),
        ("status", STRING),
        ("ackMode", STRING),
        ("ts", LONG),
    ),
    READS: (
        ("client", STRING),
        ("msgId", STRING),
        ("brokerName", STRING),
        ("offset", LONG),
        ("ts", LONG),
        ("brokerId", LONG),
    ),
    FINAL_LOGS: (
        ("brokerName", STRING),
        ("brokerId", LONG),
        ("offset", LONG),
        ("size", LONG),
        ("msgId", STRING),
        ("crc", LONG),
        ("node", STRING),
    ),
    BROKER_STARTS: (
        ("node", STRING),
        ("ts", LONG),
        ("clusterName", STRING),
        ("brokerName", STRING),
        ("brokerId", LONG),
        ("brokerAddr", STRING),
        ("incarnation", STRING),
        ("cleanShutdown", BOOLEAN),
        ("lossyRecovery", BOOLEAN),
        ("confirmOffsetBeforeRecovery", LONG),
        ("maxOffset", LONG),
    ),
}

# SQLite primary keys: a controller replays its journal on restart and re-applies entries it already
# recorded (same index, same outcome), so its events are keyed and re-inserts ignored; a log dump
# replaces the previous dump of the same replica.
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    CONTROLLER_EVENTS: ("node", "raftIndex"),
    FINAL_LOGS: ("brokerName", "brokerId", "offset"),
}

SEQ_COLUMN: Column = ("seq", LONG)


def columns(table: str) -> tuple[str, ...]:
    """The column names of ``table`` as recorded (without the exporter's ``seq``)."""
    return tuple(name for name, _ in TABLES[table])


def export_columns(table: str) -> tuple[Column, ...]:
    """The columns of the exported file: the recorded ones plus ``seq``."""
    return (*TABLES[table], SEQ_COLUMN)


def schema_document() -> dict[str, Any]:
    """What ``mqha export`` writes as ``schema.json``: every table, every column and its kind."""
    return {
        "format": "mqha-history",
        "version": 1,
        "tables": {
            table: [{"name": name, "type": kind} for name, kind in export_columns(table)] for table in TABLES
        },
    }


def _to_long(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return int(value)
    return int(value)


def _to_bool(value: Any) -> bool | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def _to_long_array(value: Any) -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    return sorted(int(v) for v in value)


_CONVERTERS = {
    STRING: lambda v: None if v is None else str(v),
    LONG: _to_long,
    BOOLEAN: _to_bool,
    LONG_ARRAY: _to_long_array,
}


def typed_row(table: str, row: Mapping[str, Any], *, with_seq: bool = False) -> dict[str, Any]:
    """``row`` with exactly the columns of ``table`` (missing ones null), each value of its kind."""
    cols = export_columns(table) if with_seq else TABLES[table]
    return {name: _CONVERTERS[kind](row.get(name)) for name, kind in cols}
