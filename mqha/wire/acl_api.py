"""The controllers' ACL 2.0 API bodies (docs/architecture.md §12.11): users and policies, as RocketMQ's
mqadmin ``createUser`` .. ``listAcl`` carry them, and the book mqproxy fetches.

Requests are strict (``mqha.wire.codec.Request``): an unknown field, a wrong type or a bound crossed is
2005 naming the field. What each string means (a resource key, an action) is checked by the decision
(``mqha.security.acl``), which answers 2005 with the reason. No payload but the book carries a
password, and the book's are sealed (``mqha.security.sealed``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from mqha.wire.codec import Payload, Request
from mqha.wire.records import AclEntry, AclText, AclTexts

__all__ = [
    "AclBookPayload",
    "AclInfo",
    "AclQuery",
    "AclsPayload",
    "DeleteAclRequest",
    "PutAclRequest",
    "SealedUser",
    "UserInfo",
    "UserQuery",
    "UserRequest",
    "UsersPayload",
]

Username = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")]
Password = Annotated[str, msgspec.Meta(min_length=8, max_length=256)]
UserType = Literal["Super", "Normal"]


class UserRequest(Request, frozen=True, kw_only=True):
    """The body of createUser, updateUser and deleteUser (``-u -p -t``).

    updateUser changes what it names; deleteUser reads only the username."""

    username: Username
    password: Password | None = None
    user_type: UserType | None = None


class UserQuery(Request, frozen=True, kw_only=True):
    """The query of getUser (``username``) and listUser (``filter``: a part of the names; none: all)."""

    username: Username | None = None
    filter: Annotated[str, msgspec.Meta(max_length=64)] | None = None


class UserInfo(msgspec.Struct, frozen=True, rename="camel"):
    """A user as admins see it: never its password."""

    username: str
    user_type: str


class UsersPayload(Payload, frozen=True, kw_only=True):
    """The reply of getUser and listUser."""

    users: tuple[UserInfo, ...] = ()


class PutAclRequest(Request, frozen=True, kw_only=True):
    """The body of createAcl and updateAcl (``-s User:NAME -r Topic:A,Group:G -a Pub,Sub -d Allow``).

    One entry per resource, replacing the subject's entry of that resource or added (``-i``: source
    IPs)."""

    subject: AclText
    resources: AclTexts
    actions: AclTexts
    decision: AclText
    source_ips: AclTexts = ()


class DeleteAclRequest(Request, frozen=True, kw_only=True):
    """The body of deleteAcl (``-s [-r]``): the subject's entries of ``resources``, or its whole policy."""

    subject: AclText
    resources: AclTexts = ()


class AclQuery(Request, frozen=True, kw_only=True):
    """The query of getAcl (``subject``) and listAcl (``subject``, ``resource``: filters; none: all)."""

    subject: AclText | None = None
    resource: AclText | None = None


class AclInfo(msgspec.Struct, frozen=True, rename="camel"):
    """A subject (``User:NAME``) and its policy entries (RocketMQ's ``AclInfo``)."""

    subject: str
    entries: tuple[AclEntry, ...]


class AclsPayload(Payload, frozen=True, kw_only=True):
    """The reply of getAcl and listAcl."""

    acls: tuple[AclInfo, ...] = ()


class SealedUser(msgspec.Struct, frozen=True, rename="camel"):
    """A user as mqproxy fetches it: the password sealed under the inner credentials."""

    username: str
    user_type: str
    sealed_password: str


class AclBookPayload(Payload, frozen=True, kw_only=True):
    """Every user (sealed) and every policy: what mqproxy decides with.

    ``applied_index`` lets it skip a book it already has."""

    applied_index: int = 0
    users: tuple[SealedUser, ...] = ()
    acls: tuple[AclInfo, ...] = ()


MESSAGES = (UserRequest, UsersPayload, PutAclRequest, DeleteAclRequest, AclsPayload, AclBookPayload)
"""The ACL API's bodies, for the controller's OpenAPI description."""
