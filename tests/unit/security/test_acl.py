"""ACL 2.0 core: parsing (every bad input a coded error), entry editing, and the decision exhaustively:
every user type x resource pattern x action x decision x source-IP case."""

from __future__ import annotations

import itertools

import pytest

from mqha.security.acl import (
    AclError,
    Action,
    Decision,
    PolicyEntry,
    ResourceType,
    UserType,
    check_password,
    check_username,
    decide,
    delete_entries,
    entries_from_json,
    make_entries,
    parse_actions,
    parse_decision,
    parse_resource,
    parse_resources,
    parse_source_ips,
    parse_subject,
    parse_user_type,
    upsert_entries,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


def entry(resource: str, actions: str, decision: str = "Allow", ips: str = "") -> PolicyEntry:
    return PolicyEntry(
        parse_resource(resource), parse_actions(actions), parse_decision(decision), parse_source_ips(ips)
    )


def allowed(
    entries: list[PolicyEntry], kind: ResourceType, name: str, action: Action, ip: str | None = "10.0.0.1"
) -> bool:
    return decide(
        UserType.NORMAL, entries, kind=kind, name=name, action=action, source_ip=ip, username="app"
    ).allowed


# -- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "kind", "name", "prefix"),
    [
        ("*", "*", None, None, False),
        ("Topic:*", "Topic:*", TOPIC, None, False),
        ("Group:*", "Group:*", GROUP, None, False),
        ("Topic:Orders", "Topic:Orders", TOPIC, "Orders", False),
        ("topic:Orders", "Topic:Orders", TOPIC, "Orders", False),
        ("Group:G1", "Group:G1", GROUP, "G1", False),
        ("Topic:Ord*", "Topic:Ord*", TOPIC, "Ord", True),
        (" Group:app-* ", "Group:app-*", GROUP, "app-", True),
        ("Topic:%RETRY%G", "Topic:%RETRY%G", TOPIC, "%RETRY%G", False),
    ],
)
def test_resources_parse_and_render(
    text: str, key: str, kind: ResourceType | None, name: str | None, prefix: bool
) -> None:
    resource = parse_resource(text)
    assert (resource.kind, resource.name, resource.prefix, resource.key) == (kind, name, prefix, key)
    assert parse_resource(resource.key) == resource


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Topic",
        "Topic:",
        "Cluster:c",
        "Queue:q",
        "Topic:a b",
        "Topic:a*b",
        "Topic:**",
        "Topic:" + "x" * 256,
        "User:x",
    ],
)
def test_bad_resources_are_coded_errors(text: str) -> None:
    with pytest.raises(AclError) as refused:
        parse_resource(text)
    assert refused.value.code == "INVALID_PARAMETER"


def test_lists_parse_deduplicated_and_refuse_empty() -> None:
    assert parse_resources("Topic:A, Group:G,Topic:A") == (
        parse_resource("Topic:A"),
        parse_resource("Group:G"),
    )
    assert parse_actions("pub,SUB, Pub") == frozenset({Action.PUB, Action.SUB})
    assert parse_actions(["All"]) == frozenset({Action.ALL})
    for bad in ("", " , "):
        with pytest.raises(AclError):
            parse_resources(bad)
        with pytest.raises(AclError):
            parse_actions(bad)
    with pytest.raises(AclError, match="unknown action 'Publish'"):
        parse_actions("Pub,Publish")
    assert parse_source_ips("10.0.0.1, 192.168.0.0/16,10.0.0.1,::1") == (
        "10.0.0.1/32",
        "192.168.0.0/16",
        "::1/128",
    )
    assert parse_source_ips("") == ()
    for bad in ("10.0.0.256", "host.example", "10.0.0.0/33"):
        with pytest.raises(AclError):
            parse_source_ips(bad)
    with pytest.raises(AclError):
        parse_source_ips(",".join(f"10.0.0.{i}" for i in range(65)))


def test_names_types_and_subjects() -> None:
    assert parse_user_type("super") is UserType.SUPER and parse_user_type("Normal") is UserType.NORMAL
    assert parse_decision("deny") is Decision.DENY
    assert parse_subject("User:app_1") == "app_1" and parse_subject("user:x") == "x"
    for bad in ("app", "Role:app", "User:", "User:a b", "User:" + "a" * 65):
        with pytest.raises(AclError):
            parse_subject(bad)
    for bad_type in ("Admin", ""):
        with pytest.raises(AclError):
            parse_user_type(bad_type)
    with pytest.raises(AclError):
        parse_decision("Maybe")
    assert check_username("a-b_C9") == "a-b_C9"
    with pytest.raises(AclError):
        check_username("a:b")
    assert check_password("12345678") == "12345678"
    for bad_password in ("short", "x" * 257, "tab\there1"):
        with pytest.raises(AclError):
            check_password(bad_password)


def test_entries_round_trip_through_json() -> None:
    entries = (entry("Topic:A", "Pub,Sub", "Allow", "10.0.0.0/8"), entry("*", "All", "Deny"))
    as_json = [e.as_json() for e in entries]
    assert as_json[0] == {
        "resource": "Topic:A",
        "actions": ["Pub", "Sub"],
        "sourceIps": ["10.0.0.0/8"],
        "decision": "Allow",
    }
    assert entries_from_json(as_json) == entries


# -- editing ----------------------------------------------------------------------------------


def test_upsert_replaces_per_resource_and_delete_removes() -> None:
    first = make_entries(parse_resources("Topic:A,Group:G"), parse_actions("Pub"), Decision.ALLOW, ())
    assert [e.resource.key for e in first] == ["Topic:A", "Group:G"]
    updated = upsert_entries(
        first, make_entries(parse_resources("Topic:A,Topic:B"), parse_actions("Pub,Sub"), Decision.ALLOW, ())
    )
    assert [(e.resource.key, sorted(a.value for a in e.actions)) for e in updated] == [
        ("Topic:A", ["Pub", "Sub"]),
        ("Group:G", ["Pub"]),
        ("Topic:B", ["Pub", "Sub"]),
    ]
    assert [
        e.resource.key
        for e in delete_entries(updated, [parse_resource("Topic:A"), parse_resource("Topic:X")])
    ] == [
        "Group:G",
        "Topic:B",
    ]
    assert delete_entries(updated, None) == ()
    many = make_entries(
        (parse_resource(f"Topic:T{i}") for i in range(1024)), parse_actions("Pub"), Decision.ALLOW, ()
    )
    with pytest.raises(AclError):
        upsert_entries(many, [entry("Topic:one-more", "Pub")])


# -- the decision -------------------------------------------------------------------------------


def test_super_is_allowed_everything_and_unknown_users_nothing() -> None:
    deny_all = [entry("*", "All", "Deny")]
    for kind, action in itertools.product(ResourceType, Action):
        assert decide(UserType.SUPER, deny_all, kind=kind, name="X", action=action, source_ip=None).allowed
        verdict = decide(
            None, [entry("*", "All")], kind=kind, name="X", action=action, source_ip=None, username="ghost"
        )
        assert not verdict.allowed and "User:ghost is not found" in verdict.reason


def test_a_normal_user_without_a_policy_is_denied_everything() -> None:
    for kind, action in itertools.product(ResourceType, Action):
        verdict = decide(
            UserType.NORMAL, [], kind=kind, name="X", action=action, source_ip="10.0.0.1", username="app"
        )
        assert not verdict.allowed and "no matched policies" in verdict.reason


@pytest.mark.parametrize(
    ("resource", "kind", "name", "matches"),
    [
        ("*", TOPIC, "A", True),
        ("*", GROUP, "G", True),
        ("Topic:*", TOPIC, "anything", True),
        ("Topic:*", GROUP, "anything", False),
        ("Topic:A", TOPIC, "A", True),
        ("Topic:A", TOPIC, "AB", False),
        ("Topic:A", TOPIC, "a", False),
        ("Topic:A", GROUP, "A", False),
        ("Topic:Ord*", TOPIC, "Ord", True),
        ("Topic:Ord*", TOPIC, "Orders", True),
        ("Topic:Ord*", TOPIC, "Or", False),
        ("Topic:Ord*", TOPIC, "XOrd", False),
        ("Group:G", GROUP, "G", True),
        ("Group:G*", TOPIC, "G1", False),
    ],
)
def test_resource_patterns(resource: str, kind: ResourceType, name: str, matches: bool) -> None:
    for action in Action:
        if action is Action.ALL:
            continue
        assert allowed([entry(resource, "All")], kind, name, action) is matches
        assert allowed([entry(resource, action.value)], kind, name, action) is matches


def test_actions_must_match_and_all_covers_every_one() -> None:
    for granted, asked in itertools.product(Action, Action):
        expected = granted is asked or granted is Action.ALL
        assert allowed([entry("Topic:A", granted.value)], TOPIC, "A", asked) is expected, (granted, asked)


def test_deny_wins_over_any_allow_whatever_the_specificity() -> None:
    patterns = ["*", "Topic:*", "Topic:A*", "Topic:AB"]
    for allow_on, deny_on in itertools.product(patterns, patterns):
        for order in ("allow-first", "deny-first"):
            entries = [entry(allow_on, "Pub,Sub"), entry(deny_on, "Pub", "Deny")]
            if order == "deny-first":
                entries.reverse()
            assert not allowed(entries, TOPIC, "AB", Action.PUB), (allow_on, deny_on, order)
            assert allowed(entries, TOPIC, "AB", Action.SUB), (allow_on, deny_on, order)  # deny is Pub only
            verdict = decide(
                UserType.NORMAL,
                entries,
                kind=TOPIC,
                name="AB",
                action=Action.PUB,
                source_ip="10.0.0.1",
                username="app",
            )
            assert f"the entry {parse_resource(deny_on).key} denies it" in verdict.reason
    # A Deny that does not match (another topic, another action, another source) changes nothing.
    assert allowed([entry("Topic:A", "Pub"), entry("Topic:B", "Pub", "Deny")], TOPIC, "A", Action.PUB)


@pytest.mark.parametrize(
    ("ips", "source", "matches"),
    [
        ("", "10.0.0.1", True),
        ("", None, True),
        ("10.0.0.1", "10.0.0.1", True),
        ("10.0.0.1", "10.0.0.2", False),
        ("10.0.0.0/24", "10.0.0.200", True),
        ("10.0.0.0/24", "10.0.1.1", False),
        ("192.168.0.1,10.0.0.0/8", "10.9.9.9", True),
        ("::1", "::1", True),
        ("::1", "127.0.0.1", False),
        ("10.0.0.0/8", "::ffff:10.0.0.1", False),
        ("10.0.0.0/8", None, False),
        ("10.0.0.0/8", "not-an-ip", False),
    ],
)
def test_source_ips(ips: str, source: str | None, matches: bool) -> None:
    assert allowed([entry("Topic:A", "Pub", "Allow", ips)], TOPIC, "A", Action.PUB, source) is matches
    # A Deny limited to sources denies only from them.
    both = [entry("Topic:A", "Pub"), entry("Topic:A*", "Pub", "Deny", ips)]
    assert allowed(both, TOPIC, "A", Action.PUB, source) is not matches


def test_exhaustive_single_entry_table() -> None:
    """Every (decision, pattern, granted action, asked action, asked resource) with one entry: allowed
    exactly when the entry allows and matches."""
    patterns = ["*", "Topic:*", "Group:*", "Topic:A", "Topic:A*", "Group:G", "Group:G*"]
    targets = [(TOPIC, "A"), (TOPIC, "AZ"), (TOPIC, "B"), (GROUP, "G"), (GROUP, "GZ"), (GROUP, "A")]
    for decision, pattern, granted, asked, (kind, name) in itertools.product(
        Decision, patterns, Action, Action, targets
    ):
        one = entry(pattern, granted.value, decision.value)
        matches = parse_resource(pattern).matches(kind, name) and (granted is asked or granted is Action.ALL)
        assert allowed([one], kind, name, asked) is (matches and decision is Decision.ALLOW)
        assert decide(UserType.SUPER, [one], kind=kind, name=name, action=asked, source_ip=None).allowed
