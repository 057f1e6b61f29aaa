"""The Spark side of an export (shell): a small-machine SparkSession and every §5 table of an export
directory as a DataFrame with the declared schema (docs/architecture.md §5; ``mqha.analysis.spark_job``
says what reads them and how large inputs are cached).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqha.history.schema import (
    BOOLEAN,
    LONG,
    LONG_ARRAY,
    STRING,
    TABLES,
    export_columns,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


DEFAULT_MASTER = "local[*]"
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
