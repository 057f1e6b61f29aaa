"""The HA port's authentication frames (codec; docs/architecture.md §4.1), sent before any frame of
``frames.py`` when ``authenticationEnabled``. Big-endian, sizes fixed. What each side checks is
``auth.py``'s.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mqha.autoswitch_ha.frames import STATE_CODE
from mqha.errors import LocalProtocolError, RemoteProtocolError
from mqha.security.ha_proof import CHALLENGE_SIZE, PROOF_SIZE

# -- the authenticated handshake (authenticationEnabled; docs/architecture.md §4.1) -------------
#
# * master AUTH_CHALLENGE, 36 bytes:  0:4 code "MQA1" | 4:32 master challenge
# * slave AUTH_HELLO, 78 + k bytes:   0:4 code "MQA2" | 4:8 slave id | 12:32 slave challenge
#                                     | 44:32 proof | 76:2 access key length k | then k bytes UTF-8
# * master AUTH_PROOF, 36 bytes:      0:4 code "MQA3" | 4:32 master proof
#
# The codes (ASCII; as int32 ~1.3e9) are far from the state codes 0-4: a peer that speaks the other
# dialect is refused at its first four bytes. Challenges and proofs have ha_proof's fixed 32 bytes.

AUTH_CHALLENGE_CODE, AUTH_HELLO_CODE, AUTH_PROOF_CODE = 0x4D514131, 0x4D514132, 0x4D514133
AUTH_CHALLENGE = AUTH_PROOF = struct.Struct(">i32s")  # code, challenge or proof
AUTH_HELLO_HEADER = struct.Struct(">iq32s32sH")  # code, slave id, slave challenge, proof, key length
assert (AUTH_CHALLENGE.size, AUTH_HELLO_HEADER.size, CHALLENGE_SIZE, PROOF_SIZE) == (36, 78, 32, 32)
MAX_ACCESS_KEY_BYTES = 256
"""Longest access key a hello may carry: a master reads at most 78 + 256 bytes from an unproved peer."""


@dataclass(frozen=True)
class AuthHello:
    """The slave's answer to a challenge: who it says it is, its own challenge and its proof."""

    slave_id: int
    slave_challenge: bytes
    proof: bytes
    access_key: str


def _check_code(data: bytes | bytearray | memoryview, expected: int, name: str, size: int) -> None:
    if len(data) < size:
        raise RemoteProtocolError(f"{name} frame of {len(data)} bytes, expected {size}")
    if (code := STATE_CODE.unpack_from(data)[0]) != expected:
        raise RemoteProtocolError(f"expected an {name} frame, got state code {code}")


def _secret(name: str, value: bytes) -> bytes:
    if len(value) != CHALLENGE_SIZE:  # == PROOF_SIZE
        raise LocalProtocolError(f"{name} must be {CHALLENGE_SIZE} bytes, got {len(value)}")
    return value


def encode_auth_challenge(challenge: bytes) -> bytes:
    return AUTH_CHALLENGE.pack(AUTH_CHALLENGE_CODE, _secret("a challenge", challenge))


def encode_auth_proof(proof: bytes) -> bytes:
    return AUTH_PROOF.pack(AUTH_PROOF_CODE, _secret("a proof", proof))


def decode_auth_challenge(data: bytes | bytearray | memoryview) -> bytes:
    """The master challenge of exactly one AUTH_CHALLENGE frame."""
    _check_code(data, AUTH_CHALLENGE_CODE, "AUTH_CHALLENGE", AUTH_CHALLENGE.size)
    return _exact(data, AUTH_CHALLENGE.size, "AUTH_CHALLENGE", AUTH_CHALLENGE.unpack_from(data)[1])


def decode_auth_proof(data: bytes | bytearray | memoryview) -> bytes:
    """The master proof of exactly one AUTH_PROOF frame."""
    _check_code(data, AUTH_PROOF_CODE, "AUTH_PROOF", AUTH_PROOF.size)
    return _exact(data, AUTH_PROOF.size, "AUTH_PROOF", AUTH_PROOF.unpack_from(data)[1])


def _exact(data: bytes | bytearray | memoryview, size: int, name: str, value: bytes) -> bytes:
    if len(data) != size:
        raise RemoteProtocolError(f"{name} frame of {len(data)} bytes, expected {size}")
    return value


def encode_auth_hello(hello: AuthHello) -> bytes:
    key = hello.access_key.encode()
    if not 1 <= len(key) <= MAX_ACCESS_KEY_BYTES or not -(2**63) <= hello.slave_id < 2**63:
        raise LocalProtocolError(f"access key of {len(key)} bytes or slave id {hello.slave_id} out of range")
    challenge, proof = _secret("a challenge", hello.slave_challenge), _secret("a proof", hello.proof)
    return AUTH_HELLO_HEADER.pack(AUTH_HELLO_CODE, hello.slave_id, challenge, proof, len(key)) + key


def auth_hello_size(header: bytes | bytearray | memoryview) -> int | None:
    """Total size of the AUTH_HELLO frame that starts with ``header``; None while its 78-byte header is
    not all in. Raises on a wrong code (as soon as 4 bytes are in) or a key length out of [1, 256]."""
    if len(header) >= STATE_CODE.size:
        _check_code(header, AUTH_HELLO_CODE, "AUTH_HELLO", STATE_CODE.size)
    if len(header) < AUTH_HELLO_HEADER.size:
        return None
    key_size = AUTH_HELLO_HEADER.unpack_from(header)[4]
    if not 1 <= key_size <= MAX_ACCESS_KEY_BYTES:
        raise RemoteProtocolError(f"access key length {key_size} out of [1, {MAX_ACCESS_KEY_BYTES}]")
    return AUTH_HELLO_HEADER.size + key_size


def decode_auth_hello(data: bytes | bytearray | memoryview) -> AuthHello:
    """Exactly one AUTH_HELLO frame; anything else raises :class:`RemoteProtocolError`."""
    _exact(data, auth_hello_size(data) or AUTH_HELLO_HEADER.size, "AUTH_HELLO", b"")
    _, slave_id, challenge, proof, _ = AUTH_HELLO_HEADER.unpack_from(data)
    try:
        access_key = bytes(data[AUTH_HELLO_HEADER.size :]).decode()
    except UnicodeDecodeError:
        raise RemoteProtocolError("the access key is not UTF-8") from None
    return AuthHello(slave_id=slave_id, slave_challenge=challenge, proof=proof, access_key=access_key)
