"""Config parsing: Java-properties syntax, typed keys, one clear error per bad key (docs/architecture.md
§1)."""

import pytest

from mqha.config import REQUIRED, ConfigSpec, Key, parse_properties, render_properties
from mqha.errors import ConfigError

SPEC = ConfigSpec(
    [
        Key("brokerName", str, REQUIRED),
        Key("listenPort", int, 10911),
        Key("haListenPort", int, lambda v: v["listenPort"] + 1),
        Key("allAckInSyncStateSet", bool, False),
    ]
)


def test_properties_syntax_separators_comments_and_continuation() -> None:
    text = "# comment\n! also\na=1\nb: 2\nc 3\nd = spaced value \ne=x\\\n  y\n\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "spaced value", "e": "xy"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A line ending in an odd number of backslashes continues; an even number is escaped backslashes.
        ("a=x\\\n  y\nb=2\n", {"a": "xy", "b": "2"}),
        ("a=x\\\\\nb=2\n", {"a": "x\\", "b": "2"}),
        ("a=x\\\\\\\n  y\nb=2\n", {"a": "x\\y", "b": "2"}),
        ("a=x\\\\\\\\\nb=2\n", {"a": "x\\\\", "b": "2"}),
        # A continued line's leading whitespace is dropped; a comment-looking continuation is value text.
        ("a=one,\\\n    two,\\\n    # three\n", {"a": "one,two,# three"}),
    ],
)
def test_properties_continuations_count_trailing_backslashes(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key=value\n", {"key": "value"}),
        ("key:value\n", {"key": "value"}),
        ("key value\n", {"key": "value"}),
        ("key\tvalue\n", {"key": "value"}),
        ("key  =  value\n", {"key": "value"}),
        ("key = a=b:c\n", {"key": "a=b:c"}),  # only the first separator separates
        ("key\n", {"key": ""}),
        ("  # a comment\n  ! another\nk=v # not a comment\n", {"k": "v # not a comment"}),
    ],
)
def test_properties_separators_and_comments(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_properties_escapes() -> None:
    text = "a\\=b\\:c\\ d=v\nt=tab\\there\nu=caf\\u00e9\nw=\\#x\\!\nn=line\\nbreak\n"
    assert parse_properties(text) == {
        "a=b:c d": "v",
        "t": "tab\there",
        "u": "café",
        "w": "#x!",
        "n": "line\nbreak",
    }


def test_later_duplicates_win_and_crlf_lines() -> None:
    assert parse_properties("a=1\r\nb=2\r\na=3\r\n") == {"a": "3", "b": "2"}


def test_bad_unicode_escape_and_missing_key_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="invalid unicode escape"):
        parse_properties("a=\\u12g4\n", "broker.conf")
    with pytest.raises(ConfigError, match="has no key") as info:
        parse_properties("=value\n", "broker.conf")
    assert "\n" not in str(info.value)


def test_defaults_and_derived_defaults() -> None:
    values = SPEC.parse("brokerName=broker-a\nlistenPort=20911\n")
    assert values == {
        "brokerName": "broker-a",
        "listenPort": 20911,
        "haListenPort": 20912,
        "allAckInSyncStateSet": False,
    }


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("brokerName=a\nnoSuchKey=1\n", "noSuchKey"),
        ("brokerName=a\nlistenPort=ten\n", "listenPort"),
        ("brokerName=a\nallAckInSyncStateSet=yes\n", "allAckInSyncStateSet"),
        ("listenPort=1\n", "brokerName"),
    ],
)
def test_bad_config_names_the_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        SPEC.parse(text)
    assert info.value.key == key
    assert key in str(info.value)


def test_render_round_trips() -> None:
    values = SPEC.parse("brokerName=a\nallAckInSyncStateSet=true\n")
    assert SPEC.parse(render_properties(values)) == values


def test_missing_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        SPEC.load(str(tmp_path / "absent.conf"))


def test_rendered_values_read_back_unchanged() -> None:
    # A saved config (updateControllerConfig) must read back as written, backslashes included.
    values = {
        "storePathRootDir": "C:\\data\\store",
        "trailingBackslash": "end\\",
        "leadingBlank": " x",
        "separators": "a=b:c d",
        "lines": "one\ntwo\tthree",
        "unicode": "brökér",
    }
    assert parse_properties(render_properties(values)) == values
