"""The controller's ACL decisions (createUser .. listAcl, the book): what they record, what they
refuse (2005, nothing recorded), and that no answer but the book's sealed ones carries a password."""

from __future__ import annotations

from mqha.codes import ResponseCode
from mqha.controller import acls
from mqha.controller.apply import apply
from mqha.controller.state import ControllerState
from mqha.wire.acl_api import AclQuery, DeleteAclRequest, PutAclRequest, UserQuery, UserRequest

INVALID = ResponseCode.CONTROLLER_INVALID_REQUEST


def run(state: ControllerState, result: acls.ControllerResult) -> ControllerState:
    for record in result.records:
        state, outcome = apply(state, record, state.applied_index + 1)
        assert outcome.accepted, outcome
    return state


def put(
    subject: str, resources: tuple[str, ...], actions: tuple[str, ...], decision: str = "Allow"
) -> PutAclRequest:
    return PutAclRequest(subject=subject, resources=resources, actions=actions, decision=decision)


def with_app() -> ControllerState:
    state = ControllerState.empty()
    return run(
        state,
        acls.handle_create_user(state, UserRequest(username="app", password="pw-12345678"), "v1.sealed"),
    )


def test_users_are_created_updated_listed_without_passwords_and_deleted_with_their_policy() -> None:
    state = with_app()
    assert (
        state.acl_users["app"].user_type == "Normal" and state.acl_users["app"].sealed_password == "v1.sealed"
    )
    again = acls.handle_create_user(state, UserRequest(username="app", password="pw-12345678"), "v1.x")
    assert again.reply.code == INVALID and not again.records and "The user is existed" in again.reply.remark
    state = run(state, acls.handle_update_user(state, UserRequest(username="app", user_type="Super"), None))
    assert (
        state.acl_users["app"].user_type == "Super" and state.acl_users["app"].sealed_password == "v1.sealed"
    )
    assert acls.handle_update_user(state, UserRequest(username="app"), None).reply.code == INVALID
    assert acls.handle_update_user(state, UserRequest(username="ghost"), "v1.y").reply.code == INVALID
    listed = acls.handle_list_users(state, UserQuery()).reply
    assert listed.encode().count(b"sealed") == 0 and b'"userType":"Super"' in listed.encode()
    assert acls.handle_list_users(state, UserQuery(username="ghost")).reply.code == INVALID
    assert acls.handle_list_users(state, UserQuery(filter="zz")).reply.payload.users == ()
    state = run(state, acls.handle_put_acl(state, put("User:app", ("Topic:A",), ("Pub",))))
    state = run(state, acls.handle_delete_user(state, UserRequest(username="app")))
    assert not state.acl_users and not state.acl_policies
    assert acls.handle_delete_user(state, UserRequest(username="app")).reply.code == INVALID


def test_policies_merge_per_resource_and_bad_input_records_nothing() -> None:
    state = with_app()
    state = run(state, acls.handle_put_acl(state, put("User:app", ("Topic:A", "Group:G"), ("Pub",))))
    state = run(state, acls.handle_put_acl(state, put("User:app", ("Topic:A",), ("Pub", "Sub"))))
    entries = state.acl_policies["app"]
    assert [(e.resource, e.actions) for e in entries] == [("Topic:A", ("Pub", "Sub")), ("Group:G", ("Pub",))]
    for bad, why in (
        (put("User:ghost", ("Topic:A",), ("Pub",)), "The subject of User:ghost is not exist"),
        (put("app", ("Topic:A",), ("Pub",)), "User:NAME"),
        (put("User:app", ("Queue:A",), ("Pub",)), "unknown resource type"),
        (put("User:app", ("Topic:A",), ("Publish",)), "unknown action"),
        (put("User:app", ("Topic:A",), ("Pub",), "Maybe"), "unknown decision"),
        (
            PutAclRequest(
                subject="User:app",
                resources=("Topic:A",),
                actions=("Pub",),
                decision="Allow",
                source_ips=("x",),
            ),
            "source IP",
        ),
    ):
        result = acls.handle_put_acl(state, bad)
        assert result.reply.code == INVALID and not result.records and why in result.reply.remark, (
            result.reply
        )
    state = run(
        state, acls.handle_delete_acl(state, DeleteAclRequest(subject="User:app", resources=("Group:G",)))
    )
    assert [e.resource for e in state.acl_policies["app"]] == ["Topic:A"]
    listed = acls.handle_list_acls(state, AclQuery(resource="Topic:A")).reply.payload
    assert [a.subject for a in listed.acls] == ["User:app"]
    assert acls.handle_list_acls(state, AclQuery(resource="Topic:B")).reply.payload.acls == ()
    state = run(state, acls.handle_delete_acl(state, DeleteAclRequest(subject="User:app")))
    assert not state.acl_policies
    assert (
        "The acl is not exist"
        in acls.handle_delete_acl(state, DeleteAclRequest(subject="User:app")).reply.remark
    )


def test_the_book_carries_sealed_passwords_and_every_policy() -> None:
    state = with_app()
    state = run(state, acls.handle_put_acl(state, put("User:app", ("Topic:A*",), ("All",), "Deny")))
    book = acls.handle_acl_book(state).reply.payload
    assert [(u.username, u.user_type, u.sealed_password) for u in book.users] == [
        ("app", "Normal", "v1.sealed")
    ]
    assert book.acls[0].subject == "User:app" and book.acls[0].entries[0].resource == "Topic:A*"
    assert book.applied_index == state.applied_index
