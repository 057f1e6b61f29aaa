"""``storage.json`` in ``controllerStorePath``: reading and durably writing a store's identity (shell)."""

from __future__ import annotations

import json
import os

from mqha import durable
from mqha.controller.raft.addresses import JOURNAL_FILE_NAME
from mqha.controller.raft.identity import VOTER, IdentityError, StorageIdentity, dumps

STORAGE_FILE_NAME = "storage.json"


def storage_file(store_dir: str) -> str:
    return os.path.join(store_dir, STORAGE_FILE_NAME)


def load(store_dir: str) -> StorageIdentity | None:
    """The store's identity; None for a blank store. ``IdentityError`` for a damaged identity, or for
    Raft files without one (a store made before storage identities: its term and votes cannot be tied
    to a storageId, so it is not silently adopted)."""
    path = storage_file(store_dir)
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        if os.path.exists(os.path.join(store_dir, JOURNAL_FILE_NAME)):
            raise IdentityError(
                f"{store_dir} holds Raft files but no {STORAGE_FILE_NAME}: it predates storage "
                "identities or lost that file; move it away and start with an empty store (the node "
                "then rejoins as an observer, docs/raft.md §10)"
            ) from None
        return None
    try:
        identity = StorageIdentity.from_json(json.loads(text))
    except (ValueError, IdentityError) as exc:
        raise IdentityError(f"{path}: {exc}") from None
    if identity.role == VOTER and not os.path.exists(os.path.join(store_dir, JOURNAL_FILE_NAME)):
        raise IdentityError(
            f"{path} says this store votes, but its Raft journal is gone: the store lost data it may have "
            "voted or acknowledged from; move it away and start with an empty store (the node then "
            "rejoins as an observer, docs/raft.md §10)"
        )
    return identity


def save(store_dir: str, identity: StorageIdentity) -> None:
    """Replace the store's identity durably (temp file, fsync, rename, directory fsync)."""
    identity.check()
    durable.write_atomically(storage_file(store_dir), dumps(identity), make_dirs=True)
