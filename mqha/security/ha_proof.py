"""The HA port's mutual challenge proofs (docs/architecture.md §12): both sides prove the inner credentials.

With authentication on, the master opens a connection with a random challenge; the slave answers with
its access key, its own challenge and ``HMAC(secretKey, "slave" | master challenge | slave challenge |
slave id)``; the master checks it before it sends any log data or counts any ack, and proves itself
with ``HMAC(secretKey, "master" | master challenge | slave challenge)``. Fresh challenges on both sides
make every proof single-use, so no clock or replay cache is needed. Pure: challenges are passed in.

The parts are joined with ``|``; that is unambiguous only because both challenges have exactly
``CHALLENGE_SIZE`` bytes (a longer first challenge could otherwise move bytes into the second), so
:func:`_mac` refuses any other size. The slave id goes last, the only variable-length part.
"""

from __future__ import annotations

import hashlib
import hmac

CHALLENGE_SIZE = 32
PROOF_SIZE = 32  # HMAC-SHA256


def _mac(
    secret_key: str, label: bytes, master_challenge: bytes, slave_challenge: bytes, *rest: bytes
) -> bytes:
    if len(master_challenge) != CHALLENGE_SIZE or len(slave_challenge) != CHALLENGE_SIZE:
        raise ValueError(f"a challenge has exactly {CHALLENGE_SIZE} bytes")
    parts = (label, master_challenge, slave_challenge, *rest)
    return hmac.new(secret_key.encode(), b"|".join(parts), hashlib.sha256).digest()


def slave_proof(secret_key: str, master_challenge: bytes, slave_challenge: bytes, slave_id: int) -> bytes:
    return _mac(secret_key, b"slave", master_challenge, slave_challenge, str(slave_id).encode())


def master_proof(secret_key: str, master_challenge: bytes, slave_challenge: bytes) -> bytes:
    return _mac(secret_key, b"master", master_challenge, slave_challenge)


def proof_matches(expected: bytes, given: bytes) -> bool:
    return hmac.compare_digest(expected, given)
