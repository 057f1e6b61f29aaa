"""The one JSON codec of every wire message (docs/architecture.md §8): msgspec decoders and encoders,
and validation errors turned into remarks that name the field and the rule.

Every message is a frozen ``msgspec.Struct`` with camelCase JSON names. ``Message`` gives each one
``decode(bytes)`` (the fast path: JSON bytes straight into the typed value, checked on the way),
``from_json(obj)`` (an already decoded JSON value, e.g. a client's parsed reply), ``encode()`` and
``to_json()``. A subclass chooses what a violation raises by overriding ``_error`` (requests:
``RequestError(CONTROLLER_INVALID_REQUEST)``; reply payloads: ``RemoteProtocolError``).

Remarks keep the wording of the hand-written codecs they replace, e.g. ``field 'brokerId' of
ApplyBrokerIdRequest: expected an integer, got string`` or ``unknown field 'x' in
AlterSyncStateSetRequest``. Sizes: a body is bounded by the HTTP layer (``maxRequestBodyBytes``);
collections by their ``Meta(max_length)`` (``mqha.wire.types``); nesting by the types themselves
(a value nested deeper than its type allows is a type error, found without descending further), and
for untyped bodies by ``decode_any`` (``MAX_JSON_DEPTH``). A field whose type carries a
``Meta(extra={"rule": ...})`` (names, addresses) is named with that rule when its pattern or length
is broken, e.g. ``field 'brokerName' of ApplyBrokerIdRequest: expected 1..127 characters of
[%|a-zA-Z0-9_-]``.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Self

import msgspec

from mqha.codes import ResponseCode
from mqha.errors import RemoteProtocolError, RequestError
from mqha.wire.types import IntKeyMap

__all__ = [
    "ENCODER",
    "MAX_JSON_DEPTH",
    "Message",
    "Payload",
    "Request",
    "decode_any",
    "decode_json",
    "encode",
    "json_type_name",
    "remark_for",
    "to_builtins",
]


def _enc_hook(value: Any) -> Any:
    if isinstance(value, IntKeyMap):
        return value.to_json()
    if isinstance(value, Mapping):
        return dict(value)
    raise NotImplementedError(f"cannot encode {type(value).__name__} as JSON")


# Sets and string-keyed maps sorted, so equal values give equal bytes (records, snapshots, replies).
ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook, order="deterministic")
_SORTEDENCODER = msgspec.json.Encoder(enc_hook=_enc_hook, order="sorted")


def encode(value: Any, *, sort_keys: bool = False) -> bytes:
    """JSON bytes of a message (or any builtin value); ``sort_keys`` also sorts struct fields."""
    return (_SORTEDENCODER if sort_keys else ENCODER).encode(value)


def to_builtins(value: Any) -> Any:
    """The JSON value of a message as Python (dicts, lists, strings, numbers): exactly what a peer
    decodes from ``encode(value)`` (``msgspec.to_builtins`` would keep tuples as tuples)."""
    return msgspec.json.decode(ENCODER.encode(value))


@functools.cache
def _decoder(tp: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(tp)


def decode_json(data: bytes | str, tp: Any) -> Any:
    """``data`` decoded as ``tp``; raises msgspec's ``DecodeError`` / ``ValidationError``."""
    return _decoder(tp).decode(data)


MAX_JSON_DEPTH = 32
"""Nesting bound of bodies decoded without a type (``decode_any``); every typed body is shallower."""


def _deeper_than(value: Any, limit: int) -> bool:
    level: list[Any] = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


def decode_any(data: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``data`` as an untyped JSON value nested at most ``max_depth`` arrays/objects deep.

    Raises msgspec's ``DecodeError`` on malformed or too deeply nested JSON (msgspec itself stops at
    the interpreter's recursion limit with a ``RecursionError``, which must not become a 500).
    """
    try:
        value = msgspec.json.decode(data)
    except RecursionError:
        value = None
    else:
        if not _deeper_than(value, max_depth):
            return value
    raise msgspec.DecodeError(f"JSON nested deeper than {max_depth} arrays or objects")


# --------------------------------------------------------------------------------------------------
# Remarks: msgspec's messages ("Expected `int`, got `str` - at `$.brokerId`") in our wording.

_JSON_NAMES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "null": "null",
    "array": "array",
    "object": "object",
}
_WANT_LABELS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "array": "an array",
    "object": "an object",
}
_PLURALS = {"int": "integers", "str": "strings", "bool": "booleans", "object": "objects", "array": "arrays"}
_AT = re.compile(r"^(?P<message>.*?)(?: - at `(?P<key>key` in `)?(?P<path>\$[^`]*)`)?$", re.S)
_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]*)`(?:, got `(?P<got>[^`]*)`)?(?P<rule>.*)$", re.S)
_ELEMENT = re.compile(r"\[\d+\]|\[\.\.\.\]")
_FIELD = re.compile(r"^\$\.(?P<name>[A-Za-z0-9_]+)(?P<rest>.*)$")


def _label(tp: Any) -> str:
    """How a remark names what a field of type ``tp`` must be ("an integer", "an array of strings")."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        for meta in tp.__metadata__:
            label = (getattr(meta, "extra", None) or {}).get("label")
            if label:
                return str(label)
        return _label(tp.__origin__)
    if origin in (types.UnionType, typing.Union):
        members = [arg for arg in typing.get_args(tp) if arg not in (type(None), msgspec.UnsetType)]
        return _label(members[0]) if len(members) == 1 else "a valid value"
    simple = {int: "an integer", str: "a string", bool: "a boolean", float: "a number", bytes: "base64 text"}
    if tp in simple:
        return simple[tp]
    if origin in (list, tuple, frozenset, set) or tp in (list, tuple, frozenset, set):
        args = [arg for arg in typing.get_args(tp) if arg is not Ellipsis]
        item = _label(args[0]) if args else ""
        plural = {"an integer": "integers", "a string": "strings"}.get(item)
        return f"an array of {plural}" if plural else "an array"
    return "an object"


@functools.cache
def _labels(cls: type[msgspec.Struct]) -> dict[str, str]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return {f.encode_name: _label(hints[f.name]) for f in msgspec.structs.fields(cls)}


def _rule_text(tp: Any) -> str | None:
    """The ``Meta(extra={"rule": ...})`` text of an annotated type (a name or address rule), if any."""
    if typing.get_origin(tp) is typing.Annotated:
        for meta in tp.__metadata__:
            rule = (getattr(meta, "extra", None) or {}).get("rule")
            if rule:
                return str(rule)
        return _rule_text(tp.__origin__)
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        rules = {_rule_text(arg) for arg in typing.get_args(tp)} - {None}
        return rules.pop() if len(rules) == 1 else None
    return None


def _element_type(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = tp.__origin__
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        members = [arg for arg in typing.get_args(tp) if arg not in (type(None), msgspec.UnsetType)]
        return _element_type(members[0]) if len(members) == 1 else None
    args = [arg for arg in typing.get_args(tp) if arg is not Ellipsis]
    return args[0] if typing.get_origin(tp) in (list, tuple, frozenset, set) and args else None


@functools.cache
def _rules(cls: type[msgspec.Struct]) -> dict[str, tuple[str | None, str | None]]:
    """Per JSON field name: the rule text of the field itself and of its elements."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {
        f.encode_name: (_rule_text(hints[f.name]), _rule_text(_element_type(hints[f.name])))
        for f in msgspec.structs.fields(cls)
    }


def json_type_name(value: Any) -> str:
    """The JSON type of a decoded value, as remarks name it ("integer", "string", "null", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for kind, name in (
        (int, "integer"),
        (float, "number"),
        (str, "string"),
        (list, "array"),
        (dict, "object"),
    ):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _json_name(msgspec_name: str) -> str:
    return _JSON_NAMES.get(msgspec_name, msgspec_name)


def remark_for(cls: type, exc: msgspec.ValidationError, *, name: str | None = None) -> str:
    """Our remark for msgspec's ``exc`` raised while decoding a ``cls`` (called ``name`` in it)."""
    match = _AT.match(str(exc))
    assert match is not None  # the pattern matches any text
    message, path, at_key = match["message"], match["path"] or "$", bool(match["key"])
    name = name or cls.__name__
    if message.startswith("Object missing required field `"):
        return f"missing required field '{message.split('`')[1]}' in {_where(name, path)}"
    if message.startswith("Object contains unknown field `"):
        return f"unknown field '{message.split('`')[1]}' in {_where(name, path)}"
    field = _FIELD.match(path)
    if field is None:  # the body itself
        expected = _EXPECTED.match(message)
        if expected and expected["got"] and expected["want"] == "object":
            return f"{name} must be a JSON object, got {_json_name(expected['got'])}"
        return f"{name}: {message[:1].lower()}{message[1:]}"
    json_name, rest = field["name"], field["rest"]
    element = bool(rest) and _ELEMENT.fullmatch(rest) is not None
    shown = json_name + rest if rest and not element else json_name
    label = _labels(cls).get(json_name) if shown == json_name else None
    own, of_element = _rules(cls).get(json_name, (None, None))
    rule = own if shown == json_name and not element else of_element if element else None
    expected = _EXPECTED.match(message)
    if rule and expected and expected["got"] is None:  # a length or pattern rule with its own wording
        return f"field '{json_name + rest}' of {name}: expected {rule}"
    return f"field '{shown}' of {name}: {_rule(message, rest if element else '', at_key, label)}"


def _where(name: str, path: str) -> str:
    return name if path == "$" else f"{name} at '{path[2:]}'"


def _rule(message: str, element: str, at_key: bool, label: str | None) -> str:
    expected = _EXPECTED.match(message)
    if at_key:
        want = expected["want"] if expected else "valid"
        return f"expected {_json_name(want)} keys"
    if expected is None:
        if message.startswith("Invalid base64"):
            return "not valid base64"
        return message[:1].lower() + message[1:]
    want, got, rule = expected["want"], expected["got"], expected["rule"].strip()
    if got is None:  # a range or length rule: "Expected `int` >= 0"
        return f"expected {label or 'a value'} {rule}".strip()
    got_name = _json_name(got)
    if element:  # an element of an array (or a value of a map) that is the field
        plural = _PLURALS.get(want, f"{want} values")
        container = "an object" if element == "[...]" else "an array"
        return f"expected {container} of {plural}, found {got_name}"
    return f"expected {label or _WANT_LABELS.get(want, 'a ' + want)}, got {got_name}"


# --------------------------------------------------------------------------------------------------
# Base classes.


class Message(msgspec.Struct, frozen=True, rename="camel", kw_only=True):
    """Base of every wire message: decode from bytes or a JSON value, encode to bytes or builtins."""

    @classmethod
    def _error(cls, remark: str) -> Exception:
        return RemoteProtocolError(remark)

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        """``data`` (JSON text) as a ``cls``; a violation raises ``cls._error(remark)``."""
        try:
            return _decoder(cls).decode(data)
        except msgspec.ValidationError as exc:
            raise cls._error(remark_for(cls, exc)) from None
        except msgspec.DecodeError as exc:
            raise cls._error(f"malformed JSON: {exc}") from None

    @classmethod
    def from_json(cls, obj: object) -> Self:
        """An already decoded JSON value as a ``cls`` (same checks and remarks as ``decode``).

        Goes through bytes so that decimal-string object keys become integer ids as on the wire
        (``msgspec.convert`` keeps keys as given); this is the clients' path, never a hot one.
        """
        if isinstance(obj, cls):
            return obj
        try:
            data = ENCODER.encode(obj)
        except (TypeError, OverflowError) as exc:
            raise cls._error(f"{cls.__name__} is not JSON: {exc}") from None
        return cls.decode(data)

    def encode(self) -> bytes:
        return ENCODER.encode(self)

    def to_json(self) -> dict[str, Any]:
        result: dict[str, Any] = to_builtins(self)
        return result


class Request(Message, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A request body: strict (unknown fields refused); violations are 2005 naming the field."""

    @classmethod
    def _error(cls, remark: str) -> Exception:
        return RequestError(ResponseCode.CONTROLLER_INVALID_REQUEST, remark)


class Payload(Message, frozen=True, kw_only=True):
    """A reply payload, decoded leniently: unknown fields are ignored.

    A newer controller may add some; type errors are the peer's fault (``RemoteProtocolError``).
    """
