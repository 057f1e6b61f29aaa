"""ACL users' passwords sealed for storage and transport (docs/architecture.md §12.11).

The official clients sign with HMAC-SHA1 keyed by the password itself (§12.12), so whoever verifies a
signature needs the password, not a hash of it: a one-way hash (what RocketMQ's remoting ACL 1.0 never
had either) cannot work. RocketMQ 5.3 keeps the password in clear in its metadata store and prints it
in ``getUser``. mqha seals it instead: AES-256-GCM under a key derived (HMAC-SHA256) from the
``innerClientAuthenticationCredentials`` secret key that controllers and proxies share, with a random
nonce and the username as associated data (a sealed password moved to another user does not open).
The controllers' leader seals what ``createUser``/``updateUser`` bring; the Raft log and the snapshots
hold only the sealed text; mqproxy opens it. Changing the inner secret key makes the stored passwords
unreadable: set them again (``updateUser -p``) after such a rotation.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mqha.errors import MqhaError

PREFIX = "v1."
_CONTEXT = b"mqha acl password v1"
_NONCE_BYTES = 12


class SealError(MqhaError, ValueError):
    """A sealed password that does not open with this key (wrong key, another user's, or corrupt)."""


def _key(secret_key: str) -> bytes:
    return hmac.new(secret_key.encode(), _CONTEXT, hashlib.sha256).digest()


def seal(secret_key: str, username: str, password: str, *, nonce: bytes | None = None) -> str:
    """``password`` of ``username`` sealed under ``secret_key`` (text: ``v1.`` + base64)."""
    nonce = os.urandom(_NONCE_BYTES) if nonce is None else nonce
    sealed = AESGCM(_key(secret_key)).encrypt(nonce, password.encode(), username.encode())
    return PREFIX + base64.b64encode(nonce + sealed).decode()


def unseal(secret_key: str, username: str, sealed: str) -> str:
    """The password in ``sealed``; ``SealError`` when it does not open."""
    if not sealed.startswith(PREFIX):
        raise SealError("not a sealed password")
    try:
        raw = base64.b64decode(sealed[len(PREFIX) :], validate=True)
        opened = AESGCM(_key(secret_key)).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], username.encode())
        return opened.decode()
    except (binascii.Error, InvalidTag, ValueError, UnicodeDecodeError):
        raise SealError(f"the sealed password of {username!r} does not open with this key") from None
