"""Broker identity files and the store id (docs/reference-behaviour.md §9.3, docs/architecture.md §9.4;
shell around a pure codec).

Files, plain text, at ``storePathBrokerIdentity`` (default ``<storePathRootDir>/brokerIdentity``):

* metadata  ``<clusterName>#<brokerName>#<brokerId>#<storeId>#<crc>``
* temp      the same path + ``-temp``: ``<clusterName>#<brokerName>#<brokerId>#<registerCheckCode>#<crc>``,
  with ``registerCheckCode`` = ``<brokerAddr>;<currentTimeMillis>;<storeId>``
* store id  ``<storePathRootDir>/storeId``: ``<storeId>#<crc>``, 32 lowercase hex digits made when the
  store is first opened by a broker (``ensure_store_id``)

``<crc>`` is the CRC32 of the text before it (8 lowercase hex digits): a flipped bit is detected, never
read as another id. The identity is bound to its store: a metadata file naming another store id than
the store's own was copied from another store, and stops the broker, as does a damaged file (a
checksum that does not match); the controllers record the store id at apply time (in the check code)
and refuse a register of the id from another store (``mqha.controller.broker_claims``).

Files of older brokers have no checksum: metadata ``<clusterName>#<brokerName>#<brokerId>`` and temp
``...#<registerCheckCode>`` (``<brokerAddr>;<millis>``). Such a metadata file is loaded as before and
rewritten with the store id and a checksum at start (``ReplicasManager.start``). As in the reference, one
with an empty field or a non-numeric id counts as absent; a temp file that does not check out counts
as absent too (it only proposes an id to apply: the register flow starts over). A loaded file whose
cluster or broker name differs from the config stops the broker with one ``StorageError`` naming the
file and both pairs of values: the store belongs to another broker.

Writes are atomic (temp file in the same directory, fsync, rename, fsync of the directory), so a
crash leaves the old content or the new one, never a torn file. The functions are blocking and tiny;
the runner calls them through ``asyncio.to_thread``. The atomic write is ``mqha.durable``.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import zlib
from dataclasses import replace

from mqha.durable import remove_durably, write_atomically
from mqha.errors import MqhaError, StorageError
from mqha.replicas_manager.actions import BrokerIdentity, TempBrokerIdentity

log = logging.getLogger(__name__)

TEMP_SUFFIX = "-temp"
SEPARATOR = "#"
STORE_ID_FILE = "storeId"
_STORE_ID = re.compile(r"[0-9a-f]{32}")
_CRC = re.compile(r"[0-9a-f]{8}")
RESET_HINT = "mqha store reset-identity -c <broker.conf>"
"""The command that makes a store a new replica (``mqha.broker.store_commands``)."""


# ------------------------------------------------------------------------------------- codec (pure)


def temp_path(path: str) -> str:
    return path + TEMP_SUFFIX


def new_store_id() -> str:
    """A fresh store id: 32 lowercase hex digits."""
    return secrets.token_hex(16)


def register_check_code(broker_address: str, wall_ms: int, store_id: str | None = None) -> str:
    """``<brokerAddr>;<millis>[;<storeId>]``: the controller reads the address back from the part before
    the first ``;`` and the store id from the third part."""
    return f"{broker_address};{wall_ms}" + ("" if store_id is None else f";{store_id}")


def _with_crc(text: str) -> str:
    return f"{text}{SEPARATOR}{zlib.crc32(text.encode()):08x}"


def _without_crc(text: str) -> str | None:
    """``text`` without its trailing ``#<crc>``, or None when the checksum does not match it."""
    body, _, crc = text.rpartition(SEPARATOR)
    if not _CRC.fullmatch(crc) or int(crc, 16) != zlib.crc32(body.encode()):
        return None
    return body


def format_identity(identity: BrokerIdentity) -> str:
    """The metadata record; with a store id (every broker of ours writes one) checksummed."""
    text = SEPARATOR.join((identity.cluster_name, identity.broker_name, str(identity.broker_id)))
    return text if identity.store_id is None else _with_crc(f"{text}{SEPARATOR}{identity.store_id}")


def format_temp_identity(temp: TempBrokerIdentity) -> str:
    return _with_crc(
        SEPARATOR.join((temp.cluster_name, temp.broker_name, str(temp.broker_id), temp.register_check_code))
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


class DamagedIdentity(MqhaError, ValueError):
    """An identity or store id file whose checksum does not match its text."""


def parse_identity(text: str) -> BrokerIdentity | None:
    """The metadata record, or None when the text is not a loaded file. Raises ``DamagedIdentity`` when
    it carries a checksum (more than 3 fields) that does not check out."""
    text = text.strip()
    if text.count(SEPARATOR) < 3:
        parts = _fields(text, 3)  # an older broker's file, or not loaded
        return None if parts is None else BrokerIdentity(parts[0], parts[1], int(parts[2]))
    body = _without_crc(text)
    parts = None if body is None else _fields(body, 4)
    if parts is None or not _STORE_ID.fullmatch(parts[3]):
        raise DamagedIdentity(f"checksum or fields do not match: {text[:120]!r}")
    return BrokerIdentity(parts[0], parts[1], int(parts[2]), parts[3])


def parse_temp_identity(text: str) -> TempBrokerIdentity | None:
    """The temp record, or None when it is not loaded (an older broker's has no checksum; one whose
    checksum does not match counts as absent: the register flow starts over)."""
    text = text.strip()
    body = _without_crc(text)
    parts = _fields(text if body is None else body, 4)
    return None if parts is None else TempBrokerIdentity(parts[0], parts[1], int(parts[2]), parts[3])


def format_store_id(store_id: str) -> str:
    return _with_crc(store_id)


def parse_store_id(text: str) -> str:
    """The store id; ``DamagedIdentity`` when the text does not check out."""
    body = _without_crc(text.strip())
    if body is None or not _STORE_ID.fullmatch(body):
        raise DamagedIdentity(f"not a store id with its checksum: {text[:80]!r}")
    return body


def check_store(path: str, identity: BrokerIdentity, store_id: str | None) -> None:
    """An identity written for another store than this one (``store_id``) stops the broker: the file
    was copied from another store (docs/architecture.md §9.4)."""
    if identity.store_id is None or store_id is None or identity.store_id == store_id:
        return
    raise StorageError(
        path,
        f"broker identity file (id {identity.broker_id}) was written for store {identity.store_id}, but "
        f"this store is {store_id}: the file comes from another replica's store; put back this store's "
        f"own file, or make this store a new replica with `{RESET_HINT}`",
    )


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


def read_records(path: str) -> tuple[BrokerIdentity | None, TempBrokerIdentity | None]:
    """Both identity files as they are (no config check); ``StorageError`` on a damaged metadata file."""
    identity = temp = None
    text = _read(path)
    if text is not None:
        try:
            identity = parse_identity(text)
        except DamagedIdentity as exc:
            raise StorageError(
                path,
                f"broker identity file is damaged ({exc}); put back a good copy, or make this store a new "
                f"replica with `{RESET_HINT}`",
            ) from None
        if identity is None:
            log.warning("broker identity file %s is not complete (%r): ignored", path, text[:80])
    text = _read(temp_path(path))
    if text is not None:
        temp = parse_temp_identity(text)
        if temp is None:
            log.warning("broker identity file %s is not complete (%r): ignored", temp_path(path), text[:80])
    return identity, temp


def load(
    path: str, cluster_name: str, broker_name: str, store_id: str | None = None
) -> tuple[BrokerIdentity | None, TempBrokerIdentity | None]:
    """Both identity files, checked against the config and the store (``StorageError`` on a mismatch
    or a damaged file).

    The metadata file wins: when it is loaded the temp file is not consulted (docs/reference-behaviour.md §9.3
    step 1).
    """
    identity, temp = read_records(path)
    if identity is not None:
        check_names(path, identity, cluster_name, broker_name)
        check_store(path, identity, store_id)
        return identity, None
    if temp is not None:
        check_names(temp_path(path), temp, cluster_name, broker_name)
    return None, temp


def bind_to_store(path: str, identity: BrokerIdentity, store_id: str) -> BrokerIdentity:
    """An older broker's metadata file (no store id, no checksum) rewritten for this store."""
    bound = replace(identity, store_id=store_id)
    write_identity(path, bound)
    log.info("broker identity file %s bound to store %s (checksummed)", path, store_id)
    return bound


def write_identity(path: str, identity: BrokerIdentity) -> None:
    write_atomically(path, format_identity(identity), make_dirs=True)


def write_temp_identity(path: str, temp: TempBrokerIdentity) -> None:
    write_atomically(temp_path(path), format_temp_identity(temp), make_dirs=True)


def delete(path: str) -> None:
    """Remove a file; a missing one is fine (``clear()`` of the reference)."""
    remove_durably(path)


def store_id_path(store_root: str) -> str:
    return os.path.join(store_root, STORE_ID_FILE)


def load_store_id(path: str) -> str | None:
    """The store's id, None when it has none yet; ``StorageError`` when the file is damaged."""
    text = _read(path)
    if text is None:
        return None
    try:
        return parse_store_id(text)
    except DamagedIdentity as exc:
        raise StorageError(
            path, f"store id file is damaged ({exc}); make this store a new replica with `{RESET_HINT}`"
        ) from None


def ensure_store_id(path: str) -> str:
    """The store's id, made (and written atomically) on the first start of a broker on it."""
    found = load_store_id(path)
    if found is not None:
        return found
    made = new_store_id()
    write_atomically(path, format_store_id(made), make_dirs=True)
    log.info("new store id %s (%s)", made, path)
    return made
