"""Who a controller's store is, and how a node with a blank store joins (core: pure, no IO).

docs/raft.md §10. A store's identity is ``(nodeId, storageId)``; ``storageId`` is made once, when the
store is first formatted, so a store that was wiped and made again is a *different* member. A member's
Raft identity (``raftId``) is ``<raft host:port>/<storageId>``: PySyncObj's node id, so votes, the voter
set in the log and the transport handshake all name the store, not just the address.

A node never votes with a store the cluster does not know it by. A blank store starts ``pending`` and
asks its configured peers (:func:`decide_start`): if the cluster exists the node joins as an *observer*
(it receives the log, never votes, never counts toward a quorum) until an admin adds its raftId to the
voter set; only when every configured peer answers and all are pending do they bootstrap, each
computing the same initial voter set.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mqha.errors import MqhaError

FORMAT = 1
PENDING, VOTER, OBSERVER = "pending", "voter", "observer"
ROLES = (PENDING, VOTER, OBSERVER)
OBSERVER_HANDSHAKE_PREFIX = "observer:"
_STORAGE_ID = re.compile(r"^[0-9a-f]{32}$")


class IdentityError(MqhaError, ValueError):
    """A storage identity document or raftId that cannot be what it claims to be."""


def new_storage_id() -> str:
    return uuid.uuid4().hex


def raft_id(raft_address: str, storage_id: str) -> str:
    """The Raft identity of the store ``storage_id`` serving at ``raft_address``."""
    return f"{raft_address}/{storage_id}"


def split_raft_id(value: str) -> tuple[str, str]:
    """(raft host:port, storageId) of a raftId; ``IdentityError`` for anything else."""
    address, sep, storage_id = value.rpartition("/")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not host or not port.isdigit() or not _STORAGE_ID.match(storage_id):
        raise IdentityError(f"expected <host:port>/<32 hex storageId>, got {value!r}")
    return address, storage_id


@dataclass(frozen=True)
class StorageIdentity:
    """The identity a controller store carries (``storage.json``) and the role it starts in."""

    node_id: str
    storage_id: str
    role: str = PENDING
    cluster_id: str | None = None
    bootstrap_voters: tuple[str, ...] = ()
    voters: tuple[str, ...] = ()  # the voter set as last seen here: where a restart starts from

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "nodeId": self.node_id,
            "storageId": self.storage_id,
            "role": self.role,
            "clusterId": self.cluster_id,
            "bootstrapVoters": list(self.bootstrap_voters),
            "voters": list(self.voters),
        }

    @classmethod
    def from_json(cls, doc: object) -> StorageIdentity:
        if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
            raise IdentityError(f"not a format-{FORMAT} storage identity")
        try:
            identity = cls(
                node_id=_text(doc, "nodeId"),
                storage_id=_text(doc, "storageId"),
                role=_text(doc, "role"),
                cluster_id=doc.get("clusterId"),
                bootstrap_voters=tuple(doc.get("bootstrapVoters") or ()),
                voters=tuple(doc.get("voters") or ()),
            )
        except (TypeError, ValueError) as exc:
            raise IdentityError(str(exc)) from None
        identity.check()
        return identity

    def check(self) -> None:
        if not _STORAGE_ID.match(self.storage_id):
            raise IdentityError(f"storageId {self.storage_id!r} is not 32 hex digits")
        if self.role not in ROLES:
            raise IdentityError(f"role {self.role!r} is not one of {', '.join(ROLES)}")
        if self.role != PENDING and not self.cluster_id:
            raise IdentityError(f"a {self.role} store has no clusterId")
        for member in (*self.bootstrap_voters, *self.voters):
            if not isinstance(member, str):
                raise IdentityError(f"voter {member!r} is not a raftId")
            split_raft_id(member)

    def raft_id(self, raft_address: str) -> str:
        return raft_id(raft_address, self.storage_id)

    def with_voters(self, voters: Sequence[str]) -> StorageIdentity:
        return dataclasses.replace(self, voters=tuple(sorted(voters)))

    def promoted(self, voters: Sequence[str]) -> StorageIdentity:
        """This store after the voter set came to include it."""
        return dataclasses.replace(self, role=VOTER, voters=tuple(sorted(voters)))


def _text(doc: Mapping[str, Any], key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise IdentityError(f"{key} missing or not a string")
    return value


def pending(node_id: str) -> StorageIdentity:
    """A freshly formatted store: a new storageId, no cluster yet."""
    return StorageIdentity(node_id=node_id, storage_id=new_storage_id())


@dataclass(frozen=True)
class PeerAnswer:
    """What a configured peer said about its store (``GET /v1/controller/storage``)."""

    node_id: str
    raft_id: str
    role: str
    cluster_id: str | None
    bootstrap_voters: tuple[str, ...]
    voters: tuple[str, ...]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PeerAnswer:
        role = doc.get("role")
        if role not in ROLES:
            raise IdentityError(f"role {role!r} is not one of {', '.join(ROLES)}")
        answer = cls(
            node_id=_text(doc, "nodeId"),
            raft_id=_text(doc, "raftId"),
            role=role,
            cluster_id=doc.get("clusterId"),
            bootstrap_voters=tuple(doc.get("bootstrapVoters") or ()),
            voters=tuple(doc.get("voters") or ()),
        )
        split_raft_id(answer.raft_id)
        return answer


@dataclass(frozen=True)
class Wait:
    """Not decidable yet: ask again."""

    reason: str


def decide_start(
    identity: StorageIdentity, self_raft_address: str, answers: Mapping[str, PeerAnswer | None]
) -> StorageIdentity | Wait:
    """The role a *pending* store starts in, from every configured peer's answer (None: no answer).

    - A peer that belongs to a cluster decides: we are a voter only if that cluster's voter set (or its
      bootstrap set) holds our raftId, else an observer of it. Several clusters answering is refused.
    - Every peer answered and all are pending: bootstrap; every node computes the same voter set.
    - Otherwise wait: a first start needs every configured peer up, so that a node that lost its
      store can never mistake a cluster whose members are down for a cluster yet to be made.
    """
    me = identity.raft_id(self_raft_address)
    clusters = {a.cluster_id for a in answers.values() if a is not None and a.cluster_id}
    if len(clusters) > 1:
        return Wait(f"peers belong to different clusters: {', '.join(sorted(clusters))}")
    if clusters:
        (cluster_id,) = clusters
        known = [a for a in answers.values() if a is not None and a.cluster_id == cluster_id]
        voters = sorted({v for a in known for v in a.voters})  # where to connect; the log decides
        bootstrap = known[0].bootstrap_voters
        member = any(me in a.voters or me in a.bootstrap_voters for a in known)
        return dataclasses.replace(
            identity,
            role=VOTER if member else OBSERVER,
            cluster_id=cluster_id,
            bootstrap_voters=bootstrap,
            voters=tuple(sorted(voters or bootstrap)),
        )
    missing = sorted(node for node, answer in answers.items() if answer is None)
    if missing:
        return Wait(f"no answer yet from {', '.join(missing)} (a first start needs every configured peer)")
    members = sorted([me, *(a.raft_id for a in answers.values() if a is not None)])
    return dataclasses.replace(
        identity,
        role=VOTER,
        cluster_id=cluster_id_of(members),
        bootstrap_voters=tuple(members),
        voters=tuple(members),
    )


def cluster_id_of(bootstrap_voters: Sequence[str]) -> str:
    return hashlib.sha256(",".join(sorted(bootstrap_voters)).encode()).hexdigest()[:16]


def dumps(identity: StorageIdentity) -> str:
    return json.dumps(identity.to_json(), indent=1, sort_keys=True) + "\n"
