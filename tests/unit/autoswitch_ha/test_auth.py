"""The HA port's authenticated handshake (docs/architecture.md §4.1): the auth frames' exact layouts and
bounds, and both sides' decisions (pure: challenges are passed in)."""

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.autoswitch_ha.auth import HAAuthError, MasterAuth, SlaveAuth
from mqha.autoswitch_ha.auth_frames import (
    AUTH_CHALLENGE,
    AUTH_HELLO_HEADER,
    AUTH_PROOF,
    MAX_ACCESS_KEY_BYTES,
    AuthHello,
    auth_hello_size,
    decode_auth_challenge,
    decode_auth_hello,
    decode_auth_proof,
    encode_auth_challenge,
    encode_auth_hello,
    encode_auth_proof,
)
from mqha.autoswitch_ha.config import HAConfig
from mqha.autoswitch_ha.events import HandshakeRequest
from mqha.autoswitch_ha.frames import FrameReader, decode_frame, encode_frame
from mqha.autoswitch_ha.state import Role
from mqha.broker.config import BROKER_CONFIG
from mqha.errors import ConfigError, LocalProtocolError, RemoteProtocolError
from mqha.security.credentials import InnerCredentials
from mqha.security.ha_proof import master_proof, slave_proof

CREDS = InnerCredentials("ak-1", "secret-key-123")
OTHER = InnerCredentials("ak-1", "another-secret")
MC, SC = bytes(range(32)), bytes(range(32, 64))  # master and slave challenges

# -- exact layouts ----------------------------------------------------------------------------


def test_challenge_and_proof_frames_are_36_bytes_with_their_magic() -> None:
    assert encode_auth_challenge(MC) == b"MQA1" + MC
    assert encode_auth_proof(SC) == b"MQA3" + SC
    assert AUTH_CHALLENGE.size == AUTH_PROOF.size == 36
    assert decode_auth_challenge(b"MQA1" + MC) == MC
    assert decode_auth_proof(b"MQA3" + SC) == SC


def test_hello_layout() -> None:
    hello = AuthHello(slave_id=0x0102030405060708, slave_challenge=SC, proof=MC, access_key="ak")
    data = encode_auth_hello(hello)
    assert data == b"MQA2" + bytes.fromhex("0102030405060708") + SC + MC + b"\x00\x02" + b"ak"
    assert len(data) == AUTH_HELLO_HEADER.size + 2 == 80
    assert auth_hello_size(data[:78]) == 80
    assert decode_auth_hello(data) == hello


def test_auth_codes_cannot_be_mistaken_for_ha_frames() -> None:
    # Each dialect refuses the other's first frame at its first four bytes.
    handshake = encode_frame(HandshakeRequest(slave_id=2))
    with pytest.raises(RemoteProtocolError, match="expected an AUTH_HELLO"):
        auth_hello_size(handshake[:4])
    for frame in (encode_auth_challenge(MC), encode_auth_proof(MC)):
        reader = FrameReader(Role.MASTER)
        reader.feed(frame)
        with pytest.raises(RemoteProtocolError, match="bad state code"):
            reader.next_frame()
    with pytest.raises(RemoteProtocolError, match="bad state code"):
        decode_frame(encode_auth_hello(AuthHello(2, SC, MC, "ak")), Role.SLAVE)
    with pytest.raises(RemoteProtocolError, match="expected an AUTH_CHALLENGE"):
        decode_auth_challenge(encode_auth_proof(MC))


def test_bounds() -> None:
    header = struct.pack(">iq32s32sH", 0x4D514132, 2, SC, MC, 0)
    with pytest.raises(RemoteProtocolError, match="access key length 0"):
        auth_hello_size(header)
    too_long = struct.pack(">iq32s32sH", 0x4D514132, 2, SC, MC, MAX_ACCESS_KEY_BYTES + 1)
    with pytest.raises(RemoteProtocolError, match="access key length 257"):
        auth_hello_size(too_long)
    assert auth_hello_size(header[:77]) is None  # the header is not all in yet
    with pytest.raises(LocalProtocolError):
        encode_auth_hello(AuthHello(2, SC, MC, "k" * (MAX_ACCESS_KEY_BYTES + 1)))
    with pytest.raises(LocalProtocolError):
        encode_auth_challenge(b"short")
    with pytest.raises(RemoteProtocolError, match="37 bytes"):
        decode_auth_challenge(encode_auth_challenge(MC) + b"x")
    hello = encode_auth_hello(AuthHello(2, SC, MC, "ak"))
    for bad in (hello[:-1], hello + b"x", hello[:-2] + b"\xff\xfe"):
        with pytest.raises(RemoteProtocolError):
            decode_auth_hello(bad)


@given(st.binary(max_size=400))
def test_random_bytes_never_decode_into_anything_but_a_protocol_error(data: bytes) -> None:
    for decode in (decode_auth_hello, decode_auth_challenge, decode_auth_proof):
        with contextlib.suppress(RemoteProtocolError):
            decode(data)


# -- decisions --------------------------------------------------------------------------------


def exchange(slave_creds: InnerCredentials, master_creds: InnerCredentials, slave_id: int = 2) -> MasterAuth:
    master, slave = MasterAuth(master_creds, MC), SlaveAuth(slave_creds, slave_id, SC)
    slave.check_proof(master.check_hello(slave.answer(master.challenge_frame())))
    return master


def test_both_sides_prove_the_same_credentials() -> None:
    master = exchange(CREDS, CREDS)
    assert master.proved_slave_id == 2
    assert master.handshake_refusal(2) is None


def test_the_handshake_must_claim_the_proved_id() -> None:
    master = exchange(CREDS, CREDS, slave_id=3)
    assert "proof was for 3" in (master.handshake_refusal(2) or "")
    assert MasterAuth(CREDS, MC).handshake_refusal(2) == "the slave has not authenticated"


def test_wrong_secret_unknown_key_and_replay_are_refused() -> None:
    with pytest.raises(HAAuthError, match="wrong proof"):
        exchange(OTHER, CREDS)
    with pytest.raises(HAAuthError, match="unknown access key"):
        exchange(InnerCredentials("ak-2", CREDS.secret_key), CREDS)
    # A hello captured on one connection is worthless on the next: the master's challenge is fresh.
    captured = SlaveAuth(CREDS, 2, SC).answer(MasterAuth(CREDS, MC).challenge_frame())
    with pytest.raises(HAAuthError, match="wrong proof"):
        MasterAuth(CREDS, bytes(32)).check_hello(captured)
    # Changing the id in a captured hello breaks its proof.
    hello = decode_auth_hello(captured)
    forged = encode_auth_hello(AuthHello(3, hello.slave_challenge, hello.proof, hello.access_key))
    with pytest.raises(HAAuthError, match="wrong proof for slave id 3"):
        MasterAuth(CREDS, MC).check_hello(forged)
    with pytest.raises(HAAuthError, match="not an authentication hello"):
        MasterAuth(CREDS, MC).check_hello(encode_frame(HandshakeRequest(slave_id=2)))


def test_a_master_without_the_secret_is_refused_by_the_slave() -> None:
    slave = SlaveAuth(CREDS, 2, SC)
    slave.answer(encode_auth_challenge(MC))
    with pytest.raises(HAAuthError, match="proof is wrong"):
        slave.check_proof(encode_auth_proof(master_proof(OTHER.secret_key, MC, SC)))
    # Reflection: the slave's own proof is no master proof (the labels differ).
    with pytest.raises(HAAuthError, match="proof is wrong"):
        slave.check_proof(encode_auth_proof(slave_proof(CREDS.secret_key, MC, SC, 2)))
    with pytest.raises(HAAuthError, match="no proof"):
        slave.check_proof(b"MQA1" + MC)
    with pytest.raises(HAAuthError, match="no authentication challenge"):
        SlaveAuth(CREDS, 2, SC).answer(b"\x00\x00\x00\x01" + bytes(32))
    with pytest.raises(HAAuthError, match="before the challenge"):
        SlaveAuth(CREDS, 2, SC).check_proof(encode_auth_proof(MC))


def test_proofs_need_32_byte_challenges() -> None:
    with pytest.raises(ValueError, match="exactly 32"):
        slave_proof("k", MC + b"x", SC[1:], 2)


# -- config -----------------------------------------------------------------------------------


def resolved(**extra: str) -> dict:
    values = {"brokerName": "b", "controllerAddr": "127.0.0.1:1", "enableControllerMode": "true", **extra}
    return BROKER_CONFIG.resolve(values)


def test_config_carries_the_credentials_only_with_authentication_on() -> None:
    creds = '{"accessKey": "ak-1", "secretKey": "secret-key-123"}'
    user = '{"username": "u", "password": "password-1"}'
    assert HAConfig.from_broker_config(resolved()).credentials is None
    off = resolved(innerClientAuthenticationCredentials=creds)
    assert HAConfig.from_broker_config(off).credentials is None
    on = resolved(
        authenticationEnabled="true", innerClientAuthenticationCredentials=creds, initAuthenticationUser=user
    )
    config = HAConfig.from_broker_config(on)
    assert config.credentials == CREDS
    assert "secret-key-123" not in repr(config)
    with pytest.raises(ConfigError):
        HAConfig.from_broker_config({**on, "innerClientAuthenticationCredentials": "{}"})
