"""The Raft port's encryption with ``controllerRaftPassword``: AES-256-GCM-SIV in place of PySyncObj's Fernet.

PySyncObj encrypts and authenticates every frame with the object ``getEncryptor(password)`` returns
(``encrypt_at_time``, ``extract_timestamp``, ``decrypt``; a frame's timestamp must not go back on a
connection). Its Fernet (AES-128-CBC + HMAC-SHA256, base64) cost ~19 µs per frame here, about 15 % of
the controller's write throughput (docs/performance.md §7). :class:`RaftCipher` keeps the interface and
the timestamp rule with an AEAD: ~4 µs per frame, a binary frame instead of base64.

Frame: ``version (1) | timestamp (8, signed) | nonce (12) | ciphertext + tag (16)``; the version and
timestamp are authenticated as associated data. A nonce is a random 4-byte prefix drawn once per cipher
and a counter: no system call per frame (``os.urandom`` releases the GIL, and taking it back behind the
event loop's thread cost the 1-client write latency ~0.3 ms). Two processes that draw the same prefix
can repeat a nonce; GCM-SIV stays safe then (a repeat only reveals that two frames were equal), so one
long-lived key needs no shared nonce state.
The key comes from the password by PBKDF2-HMAC-SHA256 (600,000 iterations, once at start). All members
of a cluster must run this cipher: a member with PySyncObj's stock Fernet cannot talk to it.
"""

from __future__ import annotations

import itertools
import os
import struct

import pysyncobj.syncobj
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

from mqha.errors import MqhaError

VERSION = 1
HEADER = struct.Struct(">Bq")  # version, timestamp
NONCE_SIZE = 12
NONCE_PREFIX_SIZE = 4
NONCE_COUNTER = struct.Struct(">Q")
COUNTER_MASK = 2**64 - 1
TAG_SIZE = 16
MIN_FRAME = HEADER.size + NONCE_SIZE + TAG_SIZE
SALT = b"mqha controllerRaftPassword v1"
ITERATIONS = 600_000  # OWASP's 2023 figure for PBKDF2-HMAC-SHA256


class InvalidFrame(MqhaError):
    """A frame that is not ours or fails authentication (the connection is then closed by PySyncObj)."""


def derive_key(password: str | bytes) -> bytes:
    secret = password.encode() if isinstance(password, str) else password
    kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=SALT, iterations=ITERATIONS)
    return kdf.derive(secret)


class RaftCipher:
    """Encrypts and authenticates Raft frames with one key (PySyncObj's encryptor interface)."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCMSIV(key)
        self._prefix = os.urandom(NONCE_PREFIX_SIZE)
        self._counter = itertools.count()  # next() is atomic under the GIL: one nonce per frame

    def encrypt_at_time(self, data: bytes, current_time: int) -> bytes:
        header = HEADER.pack(VERSION, current_time)
        nonce = self._prefix + NONCE_COUNTER.pack(next(self._counter) & COUNTER_MASK)
        return header + nonce + self._aead.encrypt(nonce, data, header)

    def extract_timestamp(self, token: bytes) -> int:
        """The frame's timestamp, not yet authenticated: ``decrypt`` (which PySyncObj calls next)
        fails for a frame whose header was changed."""
        if len(token) < MIN_FRAME or token[0] != VERSION:
            raise InvalidFrame("not an mqha Raft frame")
        return int(HEADER.unpack_from(token)[1])

    def decrypt(self, token: bytes) -> bytes:
        if len(token) < MIN_FRAME or token[0] != VERSION:
            raise InvalidFrame("not an mqha Raft frame")
        nonce_end = HEADER.size + NONCE_SIZE
        try:
            return self._aead.decrypt(token[HEADER.size : nonce_end], token[nonce_end:], token[: HEADER.size])
        except InvalidTag:
            raise InvalidFrame("Raft frame failed authentication") from None


def raft_cipher(password: str | bytes) -> RaftCipher:
    """``pysyncobj.syncobj.getEncryptor``'s replacement."""
    return RaftCipher(derive_key(password))


def install() -> None:
    """Make every SyncObj built from now on in this process encrypt with :class:`RaftCipher`.
    Idempotent; never undone (as ``decoding.install``)."""
    pysyncobj.syncobj.getEncryptor = raft_cipher  # type: ignore[attr-defined]


def installed() -> bool:
    return pysyncobj.syncobj.getEncryptor is raft_cipher  # type: ignore[attr-defined]
