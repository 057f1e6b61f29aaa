"""mqadmin's ACL 2.0 commands (createUser .. listAcl; docs/architecture.md §12.11), pure: the calls to
the controller leader and what to print. Options are RocketMQ's (``-u -p -t``, ``-s -r -a -d -i``);
the controllers are named with ``-n`` / ``--controllerAddress`` because ``-a`` is the actions. Lists
are checked here first (``mqha.security.acl``) so a typo fails before anything is sent."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from mqha.admin_cli.commands.calls import Answer, HttpCall
from mqha.admin_cli.commands.failures import UsageError
from mqha.security.acl import (
    AclError,
    parse_actions,
    parse_decision,
    parse_resources,
    parse_source_ips,
    parse_subject,
    parse_user_type,
)
from mqha.table_text import columns


def _checked(check: Any, value: Any, option: str) -> Any:
    try:
        return check(value)
    except AclError as exc:
        raise UsageError(f"{option}: {exc}") from None


def user_call(command: str, username: str, password: str | None, user_type: str | None) -> HttpCall:
    """createUser, updateUser, deleteUser."""
    body: dict[str, Any] = {"username": username}
    if password is not None:
        body["password"] = password
    if user_type is not None:
        body["userType"] = _checked(parse_user_type, user_type, "-t").value
    path = {"createUser": "create", "updateUser": "update", "deleteUser": "delete"}[command]
    return HttpCall("POST", f"/v1/acl/users/{path}", body, write=True)


def list_users_call(username: str | None = None, name_filter: str | None = None) -> HttpCall:
    query = {k: v for k, v in (("username", username), ("filter", name_filter)) if v}
    return HttpCall("GET", "/v1/acl/users" + (f"?{urlencode(query)}" if query else ""))


def put_acl_call(
    command: str, *, subject: str, resources: str, actions: str, decision: str, source_ips: str | None
) -> HttpCall:
    """createAcl, updateAcl: every list checked before it is sent."""
    body = {
        "subject": f"User:{_checked(parse_subject, subject, '-s')}",
        "resources": [r.key for r in _checked(parse_resources, resources, "-r")],
        "actions": sorted(a.value for a in _checked(parse_actions, actions, "-a")),
        "decision": _checked(parse_decision, decision, "-d").value,
        "sourceIps": list(_checked(parse_source_ips, source_ips or "", "-i")),
    }
    path = {"createAcl": "create", "updateAcl": "update"}[command]
    return HttpCall("POST", f"/v1/acl/policies/{path}", body, write=True)


def delete_acl_call(subject: str, resources: str | None) -> HttpCall:
    body: dict[str, Any] = {"subject": f"User:{_checked(parse_subject, subject, '-s')}"}
    if resources:
        body["resources"] = [r.key for r in _checked(parse_resources, resources, "-r")]
    return HttpCall("POST", "/v1/acl/policies/delete", body, write=True)


def list_acls_call(subject: str | None = None, resource: str | None = None) -> HttpCall:
    query = {}
    if subject:
        query["subject"] = f"User:{_checked(parse_subject, subject, '-s')}"
    if resource:
        query["resource"] = _checked(parse_resources, resource, "-r")[0].key
    return HttpCall("GET", "/v1/acl/policies" + (f"?{urlencode(query)}" if query else ""))


def users_of(answer: Answer) -> list[dict[str, str]]:
    return [{"username": u["username"], "userType": u["userType"]} for u in answer.payload.get("users", [])]


def format_users(users: list[dict[str, str]]) -> str:
    """RocketMQ's ``#UserName #UserType`` table, without its password column (never printed here)."""
    rows = [["#UserName", "#UserType"], *([u["username"], u["userType"]] for u in users)]
    return "\n".join(columns(rows)) + "\n"


def acls_of(answer: Answer) -> list[dict[str, Any]]:
    return [dict(acl) for acl in answer.payload.get("acls", [])]


def format_acls(acls: list[dict[str, Any]]) -> str:
    """One row per entry: ``#Subject #Resource #Actions #SourceIps #Decision`` (RocketMQ's columns)."""
    rows = [["#Subject", "#Resource", "#Actions", "#SourceIps", "#Decision"]]
    for acl in acls:
        for entry in acl["entries"]:
            ips = ",".join(entry.get("sourceIps") or []) or "*"
            rows.append(
                [acl["subject"], entry["resource"], ",".join(entry["actions"]), ips, entry["decision"]]
            )
    return "\n".join(columns(rows)) + "\n"
