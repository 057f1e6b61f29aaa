"""ACL 2.0 decisions of the controller (core): createUser .. listAcl and mqproxy's book.

(state, request) -> ``ControllerResult``, as ``mqha.controller.topics`` (docs/architecture.md §12.11).
A password arrives here already sealed by the shell (sealing draws a random nonce); nothing here
returns one, except the book, whose passwords are sealed. Bad input is 2005 with RocketMQ's wording
where it has one, and changes nothing.
"""

from __future__ import annotations

from mqha.codes import ResponseCode
from mqha.controller.records import DeleteAclUserRecord, PutAclPolicyRecord, PutAclUserRecord
from mqha.controller.replies import reject_result, write_result
from mqha.controller.result import ControllerResult
from mqha.controller.state import ControllerState
from mqha.security.acl import (
    AclError,
    PolicyEntry,
    delete_entries,
    entries_from_json,
    make_entries,
    parse_actions,
    parse_decision,
    parse_resource,
    parse_resources,
    parse_source_ips,
    parse_subject,
    upsert_entries,
)
from mqha.wire.acl_api import (
    AclBookPayload,
    AclInfo,
    AclQuery,
    AclsPayload,
    DeleteAclRequest,
    PutAclRequest,
    SealedUser,
    UserInfo,
    UserQuery,
    UserRequest,
    UsersPayload,
)
from mqha.wire.controller_api import Reply
from mqha.wire.records import AclEntry

SUCCESS = ResponseCode.SUCCESS
INVALID = ResponseCode.CONTROLLER_INVALID_REQUEST


def acl_lock_key(username: str) -> str:
    """The write-path lock of a user and its policy (``/`` never meets a broker set's or a topic's)."""
    return f"acl/{username}"


def _invalid(remark: str) -> ControllerResult:
    return reject_result(INVALID, remark)


def handle_create_user(state: ControllerState, request: UserRequest, sealed: str | None) -> ControllerResult:
    if request.username in state.acl_users:
        return _invalid(f"The user is existed: {request.username}")
    if sealed is None:
        return _invalid("createUser needs a password (-p)")
    record = PutAclUserRecord(request.username, request.user_type or "Normal", sealed)
    return write_result(state, record, Reply(SUCCESS))


def handle_update_user(state: ControllerState, request: UserRequest, sealed: str | None) -> ControllerResult:
    user = state.acl_users.get(request.username)
    if user is None:
        return _invalid(f"The user is not exist: {request.username}")
    if sealed is None and request.user_type is None:
        return _invalid("updateUser needs a password (-p) or a user type (-t)")
    record = PutAclUserRecord(
        request.username,
        request.user_type or user.user_type,
        sealed or user.sealed_password,  # type: ignore[arg-type]
    )
    return write_result(state, record, Reply(SUCCESS))


def handle_delete_user(state: ControllerState, request: UserRequest) -> ControllerResult:
    """As RocketMQ: the user's policy goes with it; deleting an absent user is refused."""
    if request.username not in state.acl_users:
        return _invalid(f"The user is not exist: {request.username}")
    return write_result(state, DeleteAclUserRecord(request.username), Reply(SUCCESS))


def handle_list_users(state: ControllerState, query: UserQuery) -> ControllerResult:
    if query.username is not None and query.username not in state.acl_users:
        return _invalid(f"The user is not exist: {query.username}")
    users = tuple(
        UserInfo(name, user.user_type)
        for name, user in sorted(state.acl_users.items())
        if (query.username is None or name == query.username) and (not query.filter or query.filter in name)
    )
    return ControllerResult.read(Reply(SUCCESS, "", UsersPayload(users=users)))


def wire_entries(entries: tuple[PolicyEntry, ...]) -> tuple[AclEntry, ...]:
    return tuple(
        AclEntry(e.resource.key, tuple(sorted(a.value for a in e.actions)), e.decision.value, e.source_ips)
        for e in entries
    )


def policy_entries(entries: tuple[AclEntry, ...]) -> tuple[PolicyEntry, ...]:
    """Recorded entries back as the core's values (they were checked before they were recorded)."""
    return entries_from_json(
        {"resource": e.resource, "actions": e.actions, "decision": e.decision, "sourceIps": e.source_ips}
        for e in entries
    )


def handle_put_acl(state: ControllerState, request: PutAclRequest) -> ControllerResult:
    """createAcl and updateAcl: RocketMQ's both merge per resource into the subject's policy."""
    try:
        username = parse_subject(request.subject)
        new = make_entries(
            parse_resources(request.resources),
            parse_actions(request.actions),
            parse_decision(request.decision),
            parse_source_ips(request.source_ips),
        )
        if username not in state.acl_users:
            return _invalid(f"The subject of User:{username} is not exist")
        merged = upsert_entries(policy_entries(state.acl_policies.get(username, ())), new)
    except AclError as exc:
        return _invalid(str(exc))
    return write_result(state, PutAclPolicyRecord(username, wire_entries(merged)), Reply(SUCCESS))


def handle_delete_acl(state: ControllerState, request: DeleteAclRequest) -> ControllerResult:
    try:
        username = parse_subject(request.subject)
        resources = parse_resources(request.resources) if request.resources else None
    except AclError as exc:
        return _invalid(str(exc))
    if username not in state.acl_users:
        return _invalid("The subject is not exist.")
    current = state.acl_policies.get(username)
    if current is None:
        return _invalid("The acl is not exist.")
    kept = delete_entries(policy_entries(current), resources)
    return write_result(state, PutAclPolicyRecord(username, wire_entries(kept)), Reply(SUCCESS))


def handle_list_acls(state: ControllerState, query: AclQuery) -> ControllerResult:
    """getAcl (a subject) and listAcl (filtered by subject and by a resource its entries name)."""
    try:
        username = parse_subject(query.subject) if query.subject else None
        resource = parse_resource(query.resource) if query.resource else None
    except AclError as exc:
        return _invalid(str(exc))
    acls = []
    for name, entries in sorted(state.acl_policies.items()):
        if username is not None and name != username:
            continue
        if resource is not None and resource.key not in {entry.resource for entry in entries}:
            continue
        acls.append(AclInfo(f"User:{name}", entries))
    return ControllerResult.read(Reply(SUCCESS, "", AclsPayload(acls=tuple(acls))))


def handle_acl_book(state: ControllerState) -> ControllerResult:
    users = tuple(
        SealedUser(name, user.user_type, user.sealed_password)
        for name, user in sorted(state.acl_users.items())
    )
    acls = tuple(AclInfo(f"User:{name}", entries) for name, entries in sorted(state.acl_policies.items()))
    payload = AclBookPayload(applied_index=state.applied_index, users=users, acls=acls)
    return ControllerResult.read(Reply(SUCCESS, "", payload))
