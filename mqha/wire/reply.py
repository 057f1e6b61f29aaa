"""The controller's reply envelope (docs/architecture.md §3.3, §8.1): ``{"code", "codeName", "remark",
**payload}``, and its decoding on the client side. Callers import it from ``mqha.wire.controller_api``."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from mqha.codes import ResponseCode
from mqha.errors import RemoteProtocolError
from mqha.wire.codec import ENCODER, Message, json_type_name, to_builtins

# --------------------------------------------------------------------------------------------------
# The reply envelope.

P = TypeVar("P", bound=Message)
_ENCODE = ENCODER.encode


@functools.cache
def _envelope_head(code: ResponseCode) -> bytes:
    """``{"code":N,"codeName":"NAME","remark":`` of ``code``, built once per code (the write path)."""
    return b'{"code":%d,"codeName":"%s","remark":' % (code, code.name.encode())


_NO_PAYLOAD: Mapping[str, Any] = {}


def _reply_error(remark: str) -> RemoteProtocolError:
    return RemoteProtocolError(remark)


class Reply(msgspec.Struct, frozen=True, eq=False):
    """Every controller reply: a response code, a remark and the payload's top-level fields.

    ``payload`` is a payload struct on the server (typed until ``encode`` writes the HTTP body
    ``{"code", "codeName", "remark", **payload}``, docs/architecture.md §3), and the body's other
    fields as a JSON object on the client (``decode`` / ``from_json``). Two replies are equal when
    their bodies are.
    """

    code: ResponseCode
    remark: str = ""
    payload: Message | Mapping[str, Any] = _NO_PAYLOAD

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS

    def payload_json(self) -> dict[str, Any]:
        """The payload as a JSON object (camelCase names, sorted id sets)."""
        payload = self.payload
        if isinstance(payload, Message):
            result: dict[str, Any] = to_builtins(payload)
            return result
        return to_builtins(dict(payload)) if payload else {}

    def payload_as(self, payload_type: type[P]) -> P:
        """The payload as a ``payload_type`` (checked; ``RemoteProtocolError`` when it is not one)."""
        if isinstance(self.payload, payload_type):
            return self.payload
        # A struct of another type goes through its JSON too: decoding ``{}`` instead would hand back a
        # payload of defaults for types whose fields are all optional.
        return payload_type.from_json(self.payload_json())

    def to_json(self) -> dict[str, Any]:
        return {
            "code": int(self.code),
            "codeName": self.code.name,
            "remark": self.remark,
            **self.payload_json(),
        }

    def encode(self) -> bytes:
        """The HTTP body: the envelope, then the payload's fields encoded straight from the struct."""
        head = _envelope_head(self.code) + _ENCODE(self.remark)
        payload = self.payload
        if not isinstance(payload, Message):
            if not payload:
                return head + b"}"
            payload = dict(payload)
        body = _ENCODE(payload)
        return head + b"}" if body == b"{}" else head + b"," + body[1:]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Reply):
            return NotImplemented
        return (self.code, self.remark, self.payload_json()) == (
            other.code,
            other.remark,
            other.payload_json(),
        )

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_json(cls, obj: object) -> Reply:
        """A reply from its decoded JSON body (the client's side)."""
        if not isinstance(obj, dict):
            raise _reply_error(f"reply must be a JSON object, got {json_type_name(obj)}")
        code = obj.get("code")
        if isinstance(code, bool) or not isinstance(code, int):
            raise _reply_error(f"field 'code' of reply: expected an integer, got {json_type_name(code)}")
        try:
            response_code = ResponseCode(code)
        except ValueError:
            raise _reply_error(f"field 'code' of reply: unknown response code {code}") from None
        remark = obj.get("remark", "")
        if remark is None:
            remark = ""
        if not isinstance(remark, str):
            raise _reply_error(f"field 'remark' of reply: expected a string, got {json_type_name(remark)}")
        payload = {key: value for key, value in obj.items() if key not in ("code", "codeName", "remark")}
        return cls(response_code, remark, payload)

    @classmethod
    def decode(cls, body: bytes | str) -> Reply:
        """A reply from its HTTP body (JSON text)."""
        try:
            obj = msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            raise _reply_error(f"reply is not JSON: {exc}") from None
        return cls.from_json(obj)


def decode_reply(body: bytes | str, payload_type: type[P]) -> tuple[Reply, P | None]:
    """A reply body and, when it succeeded, its payload as a ``payload_type``."""
    reply = Reply.decode(body)
    return reply, (reply.payload_as(payload_type) if reply.ok else None)
