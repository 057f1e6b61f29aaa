"""Java-properties config files with RocketMQ key names, typed and checked (docs/architecture.md §1).

A process declares its keys as a ``ConfigSpec``; parsing turns text into typed values and stops at
the first unknown key, malformed value, value breaking its key's ``Rule`` (a range, a name rule) or
missing required key with a ``ConfigError`` naming the key and the rule: one line, never a traceback.
Every time value is in milliseconds, as in RocketMQ.
"""

import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import javaproperties

from mqha.errors import ConfigError

REQUIRED = object()
"""Default marker of a key that must be given."""

Default = Any | Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Rule:
    """A rule a typed value must follow beyond its type: a test and the words an error quotes."""

    test: Callable[[Any], bool]
    text: str
    bounds: tuple[int, int] | None = None
    """The range of a numeric rule (tests probe both sides of it)."""


def between(low: int, high: int) -> Rule:
    return Rule(lambda value: low <= value <= high, f"within [{low}, {high}]", (low, high))


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
PORT = between(1, 65535)
MILLIS = between(1, INT32_MAX)
"""A period or timeout in milliseconds (a Java ``int``, as RocketMQ's are; about 24 days at most)."""
POSITIVE_INT = between(1, INT32_MAX)
"""A count or size RocketMQ holds in a Java ``int``."""
POSITIVE_LONG = between(1, INT64_MAX)
NON_NEGATIVE_INT = between(0, INT32_MAX)
NON_NEGATIVE_LONG = between(0, INT64_MAX)
JAVA_INT = between(-(2**31), INT32_MAX)
TEXT = Rule(
    lambda value: bool(value.strip()) and value.isprintable(), "non-empty text without control characters"
)
"""Paths, node ids and group names: something must be there, and on one line."""


USED = "used"
MAPPED = "mapped"
REFUSED = "refused"


@dataclass(frozen=True)
class Support:
    """What mqha does with a key (docs/config.md): no key is accepted and then silently ignored.

    ``used``: the key does what RocketMQ's does (or what ``deviation`` says). ``mapped``: its value
    is translated to an mqha mechanism (``note`` says which). ``refused``: mqha has no such
    mechanism; any value but the default (or one of ``accepted``) stops the process with one line
    saying so and what to use instead (``note``). A mapped key may refuse some values the same way
    (``accepted`` then lists the values it maps)."""

    kind: str = USED
    note: str = ""
    accepted: tuple[Any, ...] | None = None
    """Values accepted besides the default; None: every value."""


def mapped(note: str, accepted: tuple[Any, ...] | None = None) -> Support:
    return Support(MAPPED, note, accepted)


def refused(instead: str, accepted: tuple[Any, ...] = ()) -> Support:
    return Support(REFUSED, instead, accepted)


@dataclass(frozen=True)
class Key:
    """One config key: its type, default, the rule its value follows, and what mqha does with it.

    The default is a value, ``REQUIRED``, or a function of the other values; ``rule`` None admits any
    value of the type. ``doc`` says what the key means (RocketMQ's meaning for RocketMQ's keys),
    ``deviation`` where mqha differs, ``unit`` the value's unit when the rule does not say it, and
    ``runtime`` whether a running process takes a change (``updateControllerConfig`` /
    ``updateBrokerConfig``) at once; every other change waits for a restart."""

    name: str
    kind: type
    default: Default
    doc: str = ""
    choices: tuple[str, ...] = ()
    rule: Rule | None = None
    support: Support = Support()
    runtime: bool = False
    unit: str = ""
    deviation: str = ""
    rocketmq: bool = True
    """A key of RocketMQ's (False: one of mqha's own)."""
    default_text: str = ""
    """The default as docs/config.md shows it, when it depends on the machine or on other keys."""

    @property
    def unit_text(self) -> str:
        return self.unit or ("ms" if self.rule is MILLIS else "")

    def check(self, value: Any) -> None:
        """Raise ``ConfigError`` naming this key and its rule when ``value`` breaks it."""
        if self.rule is not None and not self.rule.test(value):
            shown = _shown(value) if isinstance(value, str) else repr(value)[:80]
            raise ConfigError(self.name, f"must be {self.rule.text}, got {shown}")

    @property
    def allowed_values(self) -> tuple[Any, ...] | None:
        """The only values a process starts with (the default, then the accepted ones) when mqha
        refuses the others; None when every value of the type is taken."""
        if self.support.accepted is None or callable(self.default):
            return None
        return (self.default, *(v for v in self.support.accepted if v != self.default))

    def refusal(self, value: Any) -> str | None:
        """Why mqha refuses ``value`` of this key (one line naming what to use instead), or None."""
        allowed = self.allowed_values
        if allowed is None or value in allowed:
            return None
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        return f"mqha does not support {self.name}={shown[:80]}: {self.support.note}"


def primary_address() -> str:
    """The address of the interface that routes outward (RocketMQ's default ``brokerIP1``): a UDP
    socket "connected" to a public address sends nothing but picks the interface. 127.0.0.1 when
    the host has no route."""
    for probe in ("192.0.2.1", "10.255.255.255"):  # TEST-NET-1, then a private address
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.connect((probe, 9))
                address = sock.getsockname()[0]
        except OSError:
            continue
        if address and address != "0.0.0.0":
            return str(address)
    return "127.0.0.1"


def is_unspecified_host(host: str) -> bool:
    """0.0.0.0 or ::: bindable, but an address no peer can reach (never advertise it)."""
    return host.strip("[]") in ("0.0.0.0", "::", "0:0:0:0:0:0:0:0")


def parse_properties(text: str, source: str = "<config>") -> dict[str, str]:
    """Parse Java-properties text with ``java.util.Properties``' rules (the javaproperties library):
    ``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments; ``\\`` escapes and ``\\uXXXX``;
    a line ending in an odd number of backslashes continues. Later duplicates win, as in Java.

    Trailing whitespace of a value is dropped (a config file's invisible spaces are never meant)."""
    result: dict[str, str] = {}
    try:
        for element in javaproperties.parse(text):
            if not isinstance(element, javaproperties.KeyValue):
                continue
            if not element.key:
                raise ConfigError(element.source.strip(), f"line in {source} has no key")
            result[element.key] = element.value.rstrip()
    except javaproperties.InvalidUEscapeError as exc:
        raise ConfigError(source, f"invalid unicode escape {exc.escape!r}") from None
    return result


def read_given(path: str) -> dict[str, str]:
    """The keys a config file sets, as text (not typed: ``ConfigSpec.resolve`` does that)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(path, f"cannot read config file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"config file is not UTF-8 text (byte {exc.start})") from None
    return parse_properties(text, path)


def _shown(raw: str) -> str:
    """``raw`` quoted for an error line, cut short (a value can be any length)."""
    return repr(raw) if len(raw) <= 80 else repr(raw[:80]) + f"... ({len(raw)} characters)"


def _coerce(key: Key, raw: str) -> Any:
    if key.choices and raw.strip() not in key.choices:
        raise ConfigError(key.name, f"expected one of {', '.join(key.choices)}, got {_shown(raw)}")
    if key.kind is bool:
        lowered = raw.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise ConfigError(key.name, f"expected true or false, got {_shown(raw)}")
    if key.kind is int:
        try:
            return int(raw.strip(), 10)
        except ValueError:
            raise ConfigError(key.name, f"expected an integer, got {_shown(raw)}") from None
    if key.kind is float:
        try:
            return float(raw.strip())
        except ValueError:
            raise ConfigError(key.name, f"expected a number, got {_shown(raw)}") from None
    return raw


class ConfigSpec:
    """The keys a process accepts, in declaration order (which is also the ``-p`` print order)."""

    def __init__(self, keys: Iterable[Key]) -> None:
        self.keys: dict[str, Key] = {}
        for key in keys:
            if key.name in self.keys:
                raise ValueError(f"duplicate config key {key.name}")
            self.keys[key.name] = key

    def coerce(self, name: str, raw: str) -> Any:
        """Typed value of one key given as text; unknown keys and refused values are a ``ConfigError``."""
        if name not in self.keys:
            raise ConfigError(name, "unknown key")
        key = self.keys[name]
        value = _coerce(key, raw)
        key.check(value)
        why = key.refusal(value)
        if why is not None:
            raise ConfigError(name, why)
        return value

    def resolve(self, given: Mapping[str, str]) -> dict[str, Any]:
        """Typed values of every key: given ones coerced, the rest from defaults (derived ones last)."""
        values: dict[str, Any] = {name: self.coerce(name, raw) for name, raw in given.items()}
        derived = []
        for name, key in self.keys.items():
            if name in values:
                continue
            if key.default is REQUIRED:
                raise ConfigError(name, "required but not set")
            if callable(key.default):
                derived.append(key)
            else:
                values[name] = key.default
        for key in derived:
            values[key.name] = key.default(values)
            key.check(values[key.name])  # e.g. listenPort + 1 beyond 65535
        return {name: values[name] for name in self.keys}

    def parse(self, text: str, source: str = "<config>") -> dict[str, Any]:
        return self.resolve(parse_properties(text, source))

    def load(self, path: str) -> dict[str, Any]:
        return self.resolve(read_given(path))

    def load_layers(self, paths: Iterable[str]) -> tuple[dict[str, Any], dict[str, str]]:
        """Typed values from several files, a later file's key winning, and where each value came
        from: the file's path, or ``default`` (a derived default counts as default)."""
        given: dict[str, str] = {}
        sources: dict[str, str] = {}
        for path in paths:
            for name, raw in read_given(path).items():
                given[name] = raw
                sources[name] = path
        try:
            values = self.resolve(given)
        except ConfigError as exc:
            if len(set(sources.values())) < 2 or exc.key not in sources:
                raise
            # More than one file: say which one set the key.
            why = str(exc).partition(": ")[2]
            raise ConfigError(exc.key, f"{why} (set in {sources[exc.key]})") from None
        return values, {name: sources.get(name, DEFAULT_SOURCE) for name in values}


_VALUE_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"})


def _escape_value(text: str) -> str:
    """Escape what Java's reader would otherwise change: backslashes, line breaks, a leading blank."""
    escaped = text.translate(_VALUE_ESCAPES)
    return "\\" + escaped if escaped.startswith(" ") else escaped


def render_properties(values: Mapping[str, Any]) -> str:
    """Java-properties text of typed values (booleans lower-case, as Java prints them).

    Values are escaped so that ``parse_properties`` reads back exactly what was written (a saved
    ``C:\\data`` stays ``C:\\data``); ``:`` and ``=`` inside a value need no escape after the first
    separator, so ``-p`` output stays readable.
    """
    lines = []
    for name, value in values.items():
        text = str(value).lower() if isinstance(value, bool) else "" if value is None else str(value)
        lines.append(f"{name}={_escape_value(text)}")
    return "\n".join(lines) + "\n"


def with_values(text: str, changes: Mapping[str, Any]) -> str:
    """Java-properties ``text`` with each key of ``changes`` set: its first line rewritten in place,
    later duplicates dropped, keys not there appended. Comments and every other line stay as they are
    (a config file an operator wrote remains theirs after a runtime change)."""
    rendered = {name: render_properties({name: value}) for name, value in changes.items()}
    out: list[str] = []
    done: set[str] = set()
    for element in javaproperties.parse(text):
        if isinstance(element, javaproperties.KeyValue) and element.key in rendered:
            if element.key not in done:
                out.append(rendered[element.key])
                done.add(element.key)
            continue
        out.append(element.source)
    if out and not out[-1].endswith("\n"):
        out.append("\n")
    out.extend(line for name, line in rendered.items() if name not in done)
    return "".join(out)


def typed_changes(spec: ConfigSpec, body: Mapping[str, Any]) -> dict[str, Any]:
    """A config update's JSON ``{key: value}`` typed by ``spec`` (strings, integers and booleans, as
    text in a file would be); raises ``ConfigError`` naming the first bad key."""
    changes: dict[str, Any] = {}
    for name, value in body.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | str):
            text = str(value)
        else:
            raise ConfigError(name, "expected a string, integer or boolean value")
        changes[name] = spec.coerce(name, text)
    return changes


DEFAULT_SOURCE = "default"


def render_with_sources(values: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    """``-p``: the effective config as Java-properties text, grouped by where each value came from
    (a file, or ``default``), one ``# from <source>`` comment line per group, files first."""
    order = list(dict.fromkeys(sources[name] for name in values if sources[name] != DEFAULT_SOURCE))
    parts = []
    for source in [*order, DEFAULT_SOURCE]:
        group = {name: value for name, value in values.items() if sources[name] == source}
        if group:
            parts.append(f"# from {source}\n" + render_properties(group))
    return "".join(parts)
