"""The HA port's authenticated handshake: what each side checks (core; docs/architecture.md §4.1). No
sockets, clocks, randomness or files: the shell passes the challenges in and moves the frames.

With ``authenticationEnabled`` a connection starts with this exchange, before any HA frame:

    master → slave   AUTH_CHALLENGE (master challenge)                         MasterAuth.challenge_frame
    slave → master   AUTH_HELLO (slave id, slave challenge, access key, proof)  SlaveAuth.answer
    master → slave   AUTH_PROOF (master proof)                                  MasterAuth.check_hello
    slave → master   HANDSHAKE, with the proved slave id                        MasterAuth.handshake_refusal

Only then does the master feed bytes to its ``MasterConnection`` (so nothing is sent and no ack is
counted before), and only then does the slave feed bytes to its ``SlaveConnection`` (so a master that
cannot prove the credentials feeds it nothing). Proofs are ``mqha.security.ha_proof``'s; any failure
is an :class:`HAAuthError` and the shell closes the connection without sending anything more.
"""

from __future__ import annotations

import hmac

from mqha.autoswitch_ha.auth_frames import (
    AuthHello,
    decode_auth_challenge,
    decode_auth_hello,
    decode_auth_proof,
    encode_auth_challenge,
    encode_auth_hello,
    encode_auth_proof,
)
from mqha.errors import ProtocolError
from mqha.security.credentials import InnerCredentials
from mqha.security.ha_proof import master_proof, proof_matches, slave_proof


class HAAuthError(ProtocolError):
    """The peer did not prove the inner credentials (the connection is closed, nothing more is sent)."""


class MasterAuth:
    """Decides whether the slave of one accepted connection proved the credentials, and for which id."""

    def __init__(self, credentials: InnerCredentials, challenge: bytes) -> None:
        self._credentials = credentials
        self._challenge = challenge
        self.proved_slave_id: int | None = None

    def challenge_frame(self) -> bytes:
        return encode_auth_challenge(self._challenge)

    def check_hello(self, frame: bytes) -> bytes:
        """The AUTH_PROOF frame to send if the AUTH_HELLO ``frame`` proves the credentials; else
        :class:`HAAuthError` (a corrupt frame too)."""
        try:
            hello = decode_auth_hello(frame)
        except ProtocolError as exc:
            raise HAAuthError(f"not an authentication hello: {exc}") from None
        credentials = self._credentials
        # Both compared in constant time, and both always: the timing tells nothing about which failed.
        key_ok = hmac.compare_digest(hello.access_key.encode(), credentials.access_key.encode())
        expected = slave_proof(credentials.secret_key, self._challenge, hello.slave_challenge, hello.slave_id)
        proof_ok = proof_matches(expected, hello.proof)
        if not key_ok:
            raise HAAuthError(f"unknown access key {hello.access_key[:64]!r}")
        if not proof_ok:
            raise HAAuthError(f"wrong proof for slave id {hello.slave_id}")
        self.proved_slave_id = hello.slave_id
        return encode_auth_proof(master_proof(credentials.secret_key, self._challenge, hello.slave_challenge))

    def handshake_refusal(self, slave_id: int) -> str | None:
        """Why a HANDSHAKE claiming ``slave_id`` is refused on this connection, or None."""
        if self.proved_slave_id is None:
            return "the slave has not authenticated"
        if slave_id != self.proved_slave_id:
            return f"handshake claims slave id {slave_id} but the proof was for {self.proved_slave_id}"
        return None


class SlaveAuth:
    """Answers the master's challenge for one connection and checks the master's proof."""

    def __init__(self, credentials: InnerCredentials, slave_id: int, challenge: bytes) -> None:
        self._credentials = credentials
        self._slave_id = slave_id
        self._challenge = challenge
        self._master_challenge: bytes | None = None

    def answer(self, frame: bytes) -> bytes:
        """The AUTH_HELLO frame answering the AUTH_CHALLENGE ``frame``; :class:`HAAuthError` if it is none."""
        try:
            master_challenge = decode_auth_challenge(frame)
        except ProtocolError as exc:
            raise HAAuthError(f"the master sent no authentication challenge: {exc}") from None
        self._master_challenge = master_challenge
        secret = self._credentials.secret_key
        proof = slave_proof(secret, master_challenge, self._challenge, self._slave_id)
        return encode_auth_hello(
            AuthHello(self._slave_id, self._challenge, proof, self._credentials.access_key)
        )

    def check_proof(self, frame: bytes) -> None:
        """Returns if the AUTH_PROOF ``frame`` proves the master knows the credentials; else raises."""
        if self._master_challenge is None:
            raise HAAuthError("a master proof before the challenge")
        try:
            given = decode_auth_proof(frame)
        except ProtocolError as exc:
            raise HAAuthError(f"the master sent no proof: {exc}") from None
        expected = master_proof(self._credentials.secret_key, self._master_challenge, self._challenge)
        if not proof_matches(expected, given):
            raise HAAuthError("the master's proof is wrong: it does not hold the inner credentials")
