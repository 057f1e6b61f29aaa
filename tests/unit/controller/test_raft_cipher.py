"""The Raft port's cipher: round trip, authentication of every byte, PySyncObj's timestamp rule."""

from __future__ import annotations

import pytest

from mqha.controller.raft.cipher import MIN_FRAME, InvalidFrame, RaftCipher, derive_key

KEY = derive_key("a-raft-password")


def test_a_frame_round_trips_and_carries_its_timestamp() -> None:
    cipher = RaftCipher(KEY)
    token = cipher.encrypt_at_time(b"append_entries", 1234)
    assert cipher.extract_timestamp(token) == 1234
    assert cipher.decrypt(token) == b"append_entries"
    assert b"append_entries" not in token
    assert cipher.encrypt_at_time(b"x", 1) != cipher.encrypt_at_time(b"x", 1)  # fresh nonce per frame


def test_every_changed_byte_fails_authentication() -> None:
    cipher = RaftCipher(KEY)
    token = cipher.encrypt_at_time(b"payload", 7)
    for index in range(1, len(token)):  # byte 0 is the version, refused as not ours
        tampered = bytearray(token)
        tampered[index] ^= 0x01
        with pytest.raises(InvalidFrame):
            cipher.decrypt(bytes(tampered))


def test_another_password_and_foreign_frames_are_refused() -> None:
    token = RaftCipher(KEY).encrypt_at_time(b"payload", 7)
    with pytest.raises(InvalidFrame):
        RaftCipher(derive_key("another-password")).decrypt(token)
    for foreign in (b"", b"\x01" * (MIN_FRAME - 1), b"gAAAAAB" + b"A" * 100):  # the last: a Fernet token
        with pytest.raises(InvalidFrame):
            RaftCipher(KEY).extract_timestamp(foreign)
        with pytest.raises(InvalidFrame):
            RaftCipher(KEY).decrypt(foreign)


def test_the_key_depends_on_the_password_only() -> None:
    assert derive_key("a-raft-password") == KEY
    assert derive_key(b"a-raft-password") == KEY
    assert len(KEY) == 32 and derive_key("other") != KEY
