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
