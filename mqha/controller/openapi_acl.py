"""The OpenAPI operations of the controller's ACL 2.0 routes (``mqha.controller.acl_routes``,
docs/architecture.md §12.11), for ``mqha.controller.openapi``.
"""

from __future__ import annotations

from typing import Any

from mqha.controller.openapi_schema import READ, WRITE, query_param, request_body, request_schema, responses
from mqha.wire import acl_api


def _write_operation(summary: str, cls: type[Any]) -> dict[str, Any]:
    return {
        "summary": f"docs/architecture.md §12.11, leader, admin: {summary}",
        "requestBody": request_body(request_schema(cls)),
        "responses": responses(WRITE),
    }


def _read_operation(summary: str, parameters: list[dict[str, Any]], payload: type[Any]) -> dict[str, Any]:
    return {"summary": summary, "parameters": parameters, "responses": responses(READ, payload)}


def acl_operations() -> list[tuple[str, str, str, dict[str, Any]]]:
    """The ACL routes' operations (``mqha.controller.acl_routes``)."""
    user, put, delete = acl_api.UserRequest, acl_api.PutAclRequest, acl_api.DeleteAclRequest
    users = _read_operation(
        "docs/architecture.md §12.11, leader, admin: getUser / listUser, never a password",
        [query_param("username", "one user (getUser)"), query_param("filter", "names containing this")],
        acl_api.UsersPayload,
    )
    policies = _read_operation(
        "docs/architecture.md §12.11, leader, admin: getAcl / listAcl",
        [
            query_param("subject", "User:NAME (getAcl, listAcl -s)"),
            query_param("resource", "only policies with an entry of this resource (listAcl -r)"),
        ],
        acl_api.AclsPayload,
    )
    book = _read_operation(
        "docs/architecture.md §12.11, leader, broker credentials (mqproxy): every user with its sealed "
        "password and every policy",
        [],
        acl_api.AclBookPayload,
    )
    return [
        (
            "POST",
            "/v1/acl/users/create",
            "createUser",
            _write_operation("createUser (-u -p -t), sealed", user),
        ),
        (
            "POST",
            "/v1/acl/users/update",
            "updateUser",
            _write_operation("updateUser (-u [-p] [-t])", user),
        ),
        (
            "POST",
            "/v1/acl/users/delete",
            "deleteUser",
            _write_operation("deleteUser (-u) and its policy", user),
        ),
        ("GET", "/v1/acl/users", "listUser", users),
        (
            "POST",
            "/v1/acl/policies/create",
            "createAcl",
            _write_operation("createAcl (-s -r -a -d [-i])", put),
        ),
        (
            "POST",
            "/v1/acl/policies/update",
            "updateAcl",
            _write_operation("updateAcl (-s -r -a -d [-i])", put),
        ),
        ("POST", "/v1/acl/policies/delete", "deleteAcl", _write_operation("deleteAcl (-s [-r])", delete)),
        ("GET", "/v1/acl/policies", "listAcl", policies),
        ("GET", "/v1/acl/book", "getAclBook", book),
    ]
