"""Broker identity files (docs/reference-behaviour.md §9.3; shell around a pure codec).

Files, plain text, at ``storePathBrokerIdentity`` (default ``<storePathRootDir>/brokerIdentity``):

* metadata  ``<clusterName>#<brokerName>#<brokerId>``
* temp      the same path + ``-temp``: ``<clusterName>#<brokerName>#<brokerId>#<registerCheckCode>``,
  with ``registerCheckCode`` = ``<brokerAddr>;<currentTimeMillis>``.

A file is *loaded* only when every field is non-empty and the id is a number (docs/reference-behaviour.md
§9.3); anything else is treated as absent, as in the reference, and gets rewritten by the register flow. A
loaded file whose cluster or broker name differs from the config stops the broker with one ``StorageError``
naming the file and both pairs of values: the store belongs to another broker.

Writes are atomic (temp file in the same directory, fsync, rename, fsync of the directory), so a
crash leaves the old content or the new one, never a torn file. The functions are blocking and tiny;
the runner calls them through ``asyncio.to_thread``. The atomic write is ``mqha.durable``.
"""

from __future__ import annotations

import logging

from mqha.durable import remove_durably, write_atomically
from mqha.errors import StorageError
from mqha.replicas_manager.actions import BrokerIdentity, TempBrokerIdentity

log = logging.getLogger(__name__)

TEMP_SUFFIX = "-temp"
SEPARATOR = "#"


# ------------------------------------------------------------------------------------- codec (pure)


def temp_path(path: str) -> str:
    return path + TEMP_SUFFIX


def register_check_code(broker_address: str, wall_ms: int) -> str:
    """``<brokerAddr>;<millis>``: the controller reads the address back from the part before ``;``."""
    return f"{broker_address};{wall_ms}"


def format_identity(identity: BrokerIdentity) -> str:
    return SEPARATOR.join((identity.cluster_name, identity.broker_name, str(identity.broker_id)))


def format_temp_identity(temp: TempBrokerIdentity) -> str:
    return SEPARATOR.join(
        (temp.cluster_name, temp.broker_name, str(temp.broker_id), temp.register_check_code)
    )


def _fields(text: str, count: int) -> list[str] | None:
    parts = text.strip().split(SEPARATOR)
    if len(parts) != count or not all(parts):
        return None
    try:
        if int(parts[2], 10) < 0:
            return None
    except ValueError:
        return None
    return parts


def parse_identity(text: str) -> BrokerIdentity | None:
    """The metadata record, or None when the text is not a loaded file."""
    parts = _fields(text, 3)
    return None if parts is None else BrokerIdentity(parts[0], parts[1], int(parts[2]))


def parse_temp_identity(text: str) -> TempBrokerIdentity | None:
    parts = _fields(text, 4)
    return None if parts is None else TempBrokerIdentity(parts[0], parts[1], int(parts[2]), parts[3])


def check_names(
    path: str, record: BrokerIdentity | TempBrokerIdentity, cluster_name: str, broker_name: str
) -> None:
    """docs/reference-behaviour.md §9.3 step 2: a file of another cluster or broker name refuses to start."""
    if (record.cluster_name, record.broker_name) == (cluster_name, broker_name):
        return
    raise StorageError(
        path,
        f"broker identity file belongs to brokerClusterName='{record.cluster_name}' "
        f"brokerName='{record.broker_name}' (id {record.broker_id}), but the config says "
        f"brokerClusterName='{cluster_name}' brokerName='{broker_name}'; fix the config or use "
        "another storePathBrokerIdentity",
    )


# ---------------------------------------------------------------------------------------- files


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(path, f"cannot read the broker identity file: {exc}") from None


def load(
    path: str, cluster_name: str, broker_name: str
) -> tuple[BrokerIdentity | None, TempBrokerIdentity | None]:
    """Both identity files, checked against the config (``StorageError`` on a mismatch).

    The metadata file wins: when it is loaded the temp file is not consulted (docs/reference-behaviour.md §9.3
    step 1).
    """
    text = _read(path)
    if text is not None:
        identity = parse_identity(text)
        if identity is not None:
            check_names(path, identity, cluster_name, broker_name)
            return identity, None
        log.warning("broker identity file %s is not complete (%r): ignored", path, text[:80])
    text = _read(temp_path(path))
    if text is not None:
        temp = parse_temp_identity(text)
        if temp is not None:
            check_names(temp_path(path), temp, cluster_name, broker_name)
            return None, temp
        log.warning("broker identity file %s is not complete (%r): ignored", temp_path(path), text[:80])
    return None, None


def write_identity(path: str, identity: BrokerIdentity) -> None:
    write_atomically(path, format_identity(identity), make_dirs=True)


def write_temp_identity(path: str, temp: TempBrokerIdentity) -> None:
    write_atomically(temp_path(path), format_temp_identity(temp), make_dirs=True)


def delete(path: str) -> None:
    """Remove a file; a missing one is fine (``clear()`` of the reference)."""
    remove_durably(path)
