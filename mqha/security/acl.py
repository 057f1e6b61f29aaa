"""ACL 2.0 as RocketMQ 5.3 defines it: users, policies and the decision (pure; docs/architecture.md §12.11).

A user is Super (allowed everything) or Normal (allowed what its policy allows). A policy belongs to a
subject ``User:NAME`` and holds one entry per resource: ``Topic:X`` / ``Group:Y`` with a literal name,
a prefix (``X*``) or any name (``Topic:*``), or ``*`` (every resource); the actions Pub, Sub, Create,
Update, Delete, Get, List or All; a decision Allow or Deny; and optional source IPs (addresses or
CIDR ranges; none: any source).

The decision (:func:`decide`): a Super user is allowed; a Normal user is denied when any matching
entry denies (**Deny wins**, whatever the specificity: §7), allowed when one allows, and denied when
none matches. Unknown users are denied.

Everything here is a value: parsing raises ``AclError`` (a code and a message), editing returns new
tuples, and nothing reads a clock or does IO.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from mqha.errors import MqhaError

MAX_USERNAME_LENGTH = 64
USERNAME_RULE = f"1..{MAX_USERNAME_LENGTH} characters of [a-zA-Z0-9_-]"
_USERNAME_RE = re.compile(rf"[a-zA-Z0-9_-]{{1,{MAX_USERNAME_LENGTH}}}")
MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 256
MAX_RESOURCE_NAME_LENGTH = 255
_RESOURCE_NAME_RE = re.compile(r"[%|a-zA-Z0-9_-]*")
MAX_ENTRIES = 1024
"""Entries of one subject's policy; and source IPs of one entry: bounded like every input."""
MAX_SOURCE_IPS = 64


class AclError(MqhaError, ValueError):
    """Bad ACL input: ``code`` is RocketMQ-style (``INVALID_PARAMETER``, ``USER_NOT_FOUND``...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class UserType(Enum):
    """A Super user is allowed everything; a Normal one what its policy allows."""

    SUPER = "Super"
    NORMAL = "Normal"


class Action(Enum):
    """RocketMQ's action names; All covers every other one."""

    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"
    ALL = "All"


class Decision(Enum):
    """What a matching policy entry says."""

    ALLOW = "Allow"
    DENY = "Deny"


class ResourceType(Enum):
    """The kinds of resource a policy names."""

    TOPIC = "Topic"
    GROUP = "Group"


def _by_name(enum: type[Enum], text: str, what: str) -> Any:
    """RocketMQ matches these names case-insensitively (``getByName``)."""
    for member in enum:
        if member.value.lower() == text.strip().lower():
            return member
    names = ", ".join(member.value for member in enum)
    raise AclError("INVALID_PARAMETER", f"unknown {what} {text!r}: expected one of {names}")


def parse_user_type(text: str) -> UserType:
    return _by_name(UserType, text, "user type")  # type: ignore[no-any-return]


def parse_decision(text: str) -> Decision:
    return _by_name(Decision, text, "decision")  # type: ignore[no-any-return]


def parse_actions(text: str | Iterable[str]) -> frozenset[Action]:
    """``Pub,Sub`` (or a list of names) as a non-empty set of actions."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    actions = frozenset(_by_name(Action, part, "action") for part in parts if part.strip())
    if not actions:
        raise AclError("INVALID_PARAMETER", "at least one action is required (Pub, Sub, ..., All)")
    return actions


def check_username(name: str) -> str:
    if not isinstance(name, str) or not _USERNAME_RE.fullmatch(name):
        raise AclError("INVALID_PARAMETER", f"the username must be {USERNAME_RULE}, got {name!r}")
    return name


def check_password(password: str) -> str:
    if not isinstance(password, str) or not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise AclError(
            "INVALID_PARAMETER",
            f"the password must be {MIN_PASSWORD_LENGTH}..{MAX_PASSWORD_LENGTH} characters",
        )
    if not password.isprintable():
        raise AclError("INVALID_PARAMETER", "the password must be printable characters")
    return password


def parse_subject(text: str) -> str:
    """``User:NAME`` -> NAME (the only subject type RocketMQ 5.3 has)."""
    kind, colon, name = text.strip().partition(":")
    if not colon or kind.lower() != "user":
        raise AclError("INVALID_PARAMETER", f"the subject must be User:NAME, got {text!r}")
    return check_username(name)


@dataclass(frozen=True)
class Resource:
    """A resource pattern of a policy entry.

    ``kind`` None is ``*`` (every resource); ``name`` None is any name of ``kind``; ``prefix`` marks
    ``name*``."""

    kind: ResourceType | None
    name: str | None = None
    prefix: bool = False

    @property
    def key(self) -> str:
        if self.kind is None:
            return "*"
        return f"{self.kind.value}:{'*' if self.name is None else self.name + ('*' if self.prefix else '')}"

    def matches(self, kind: ResourceType, name: str) -> bool:
        if self.kind is None:
            return True
        if self.kind is not kind:
            return False
        if self.name is None:
            return True
        return name.startswith(self.name) if self.prefix else name == self.name

    @property
    def specificity(self) -> tuple[int, int]:
        """For listing: literal before prefix (longer first) before any."""
        if self.kind is None:
            return (3, 0)
        if self.name is None:
            return (2, 0)
        return (1, -len(self.name)) if self.prefix else (0, 0)


def parse_resource(text: str) -> Resource:
    """``*``, ``Topic:*``, ``Topic:Name``, ``Topic:Prefix*`` (and ``Group:`` alike)."""
    text = text.strip()
    if text == "*":
        return Resource(None)
    kind_text, colon, name = text.partition(":")
    if not colon:
        raise AclError("INVALID_PARAMETER", f"a resource is *, Topic:NAME or Group:NAME, got {text!r}")
    kind = _by_name(ResourceType, kind_text, "resource type")
    if name == "*":
        return Resource(kind)
    prefix = name.endswith("*")
    stem = name[:-1] if prefix else name
    if not stem or len(stem) > MAX_RESOURCE_NAME_LENGTH or not _RESOURCE_NAME_RE.fullmatch(stem):
        raise AclError(
            "INVALID_PARAMETER",
            f"a resource name is 1..{MAX_RESOURCE_NAME_LENGTH} characters of [%|a-zA-Z0-9_-], "
            f"optionally ending in * (a prefix), got {text!r}",
        )
    return Resource(kind, stem, prefix)


def parse_resources(text: str | Iterable[str]) -> tuple[Resource, ...]:
    parts = text.split(",") if isinstance(text, str) else list(text)
    resources = tuple(dict.fromkeys(parse_resource(part) for part in parts if part.strip()))
    if not resources:
        raise AclError("INVALID_PARAMETER", "at least one resource is required (Topic:A,Group:G or *)")
    return resources


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_source_ips(text: str | Iterable[str]) -> tuple[str, ...]:
    """Addresses or CIDR ranges (``10.0.0.1``, ``10.0.0.0/8``, ``::1``), normalised; empty: any."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        try:
            out.append(str(ipaddress.ip_network(part, strict=False)))
        except ValueError:
            raise AclError(
                "INVALID_PARAMETER", f"a source IP is an address or a CIDR range, got {part!r}"
            ) from None
    if len(out) > MAX_SOURCE_IPS:
        raise AclError("INVALID_PARAMETER", f"at most {MAX_SOURCE_IPS} source IPs per entry")
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class PolicyEntry:
    """One resource's actions, decision and source IPs in a subject's policy."""

    resource: Resource
    actions: frozenset[Action]
    decision: Decision
    source_ips: tuple[str, ...] = ()

    def matches(self, kind: ResourceType, name: str, action: Action, source_ip: str | None) -> bool:
        if not self.resource.matches(kind, name):
            return False
        if action not in self.actions and Action.ALL not in self.actions:
            return False
        return not self.source_ips or _ip_in(source_ip, self.source_ips)

    def as_json(self) -> dict[str, Any]:
        """RocketMQ's ``PolicyEntryInfo`` fields (``getAcl`` output)."""
        return {
            "resource": self.resource.key,
            "actions": sorted(action.value for action in self.actions),
            "sourceIps": list(self.source_ips),
            "decision": self.decision.value,
        }


def _ip_in(source_ip: str | None, ranges: tuple[str, ...]) -> bool:
    if not source_ip:
        return False
    try:
        address = ipaddress.ip_address(source_ip)
    except ValueError:
        return False
    for text in ranges:
        network = ipaddress.ip_network(text)
        if address.version == network.version and address in network:
            return True
    return False


def entries_from_json(items: Iterable[Mapping[str, Any]]) -> tuple[PolicyEntry, ...]:
    """Entries back from :meth:`PolicyEntry.as_json` (snapshots, the controllers' answers)."""
    return tuple(
        PolicyEntry(
            parse_resource(item["resource"]),
            parse_actions(item["actions"]),
            parse_decision(item["decision"]),
            parse_source_ips(item.get("sourceIps", ())),
        )
        for item in items
    )


def make_entries(
    resources: Iterable[Resource], actions: frozenset[Action], decision: Decision, source_ips: tuple[str, ...]
) -> tuple[PolicyEntry, ...]:
    """One entry per resource, as ``createAcl -r A,B -a ... -d ...`` makes them."""
    return tuple(PolicyEntry(resource, actions, decision, source_ips) for resource in resources)


def upsert_entries(current: tuple[PolicyEntry, ...], new: Iterable[PolicyEntry]) -> tuple[PolicyEntry, ...]:
    """``current`` with each of ``new`` replacing the entry of its resource, or added (RocketMQ's
    ``createAcl`` and ``updateAcl`` both merge this way)."""
    by_resource = {entry.resource: entry for entry in current}
    for entry in new:
        by_resource[entry.resource] = entry
    if len(by_resource) > MAX_ENTRIES:
        raise AclError("INVALID_PARAMETER", f"a subject's policy holds at most {MAX_ENTRIES} entries")
    return tuple(by_resource.values())


def delete_entries(
    current: tuple[PolicyEntry, ...], resources: Iterable[Resource] | None
) -> tuple[PolicyEntry, ...]:
    """``current`` without the entries of ``resources`` (None: without every entry)."""
    if resources is None:
        return ()
    gone = set(resources)
    return tuple(entry for entry in current if entry.resource not in gone)


@dataclass(frozen=True)
class Verdict:
    """The decision and a sentence saying why (for the refusal's message)."""

    allowed: bool
    reason: str


ALLOWED = Verdict(True, "allowed")


def decide(
    user_type: UserType | None,
    entries: Iterable[PolicyEntry],
    *,
    kind: ResourceType,
    name: str,
    action: Action,
    source_ip: str | None,
    username: str = "",
) -> Verdict:
    """May a user of ``user_type`` (None: no such user) with ``entries`` do ``action`` on ``kind:name``
    from ``source_ip``? Super: yes; Normal: a matching Deny says no, else a matching Allow says yes,
    else no. (On every call of the proxy: the refusal's words are made only for a refusal.)"""
    if user_type is None:
        return Verdict(False, f"User:{username} is not found")
    if user_type is UserType.SUPER:
        return ALLOWED
    allowed = False
    for entry in entries:
        if entry.matches(kind, name, action, source_ip):
            if entry.decision is Decision.DENY:
                return Verdict(
                    False,
                    f"User:{username} has no permission to {action.value} {kind.value}:{name} from "
                    f"{source_ip}: the entry {entry.resource.key} denies it",
                )
            allowed = True
    if allowed:
        return ALLOWED
    return Verdict(
        False,
        f"User:{username} has no permission to {action.value} {kind.value}:{name} from {source_ip}: "
        "no matched policies",
    )


@dataclass(frozen=True, repr=False)
class AclUser:
    """A user as the deciders need it; the password is the clients' secret key (never printed)."""

    username: str
    user_type: UserType
    password: str

    def __repr__(self) -> str:
        return f"AclUser(username={self.username!r}, user_type={self.user_type.value}, password=***)"


@dataclass(frozen=True)
class AccessBook:
    """Every user and every subject's policy entries at one moment: what a decider reads."""

    users: Mapping[str, AclUser]
    policies: Mapping[str, tuple[PolicyEntry, ...]]

    def secret_of(self, username: str) -> str | None:
        user = self.users.get(username)
        return None if user is None else user.password

    def check(
        self, username: str, kind: ResourceType, name: str, action: Action, source_ip: str | None
    ) -> Verdict:
        user = self.users.get(username)
        return decide(
            None if user is None else user.user_type,
            self.policies.get(username, ()),
            kind=kind,
            name=name,
            action=action,
            source_ip=source_ip,
            username=username,
        )
