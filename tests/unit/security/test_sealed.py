"""Sealed ACL passwords: open with the same key and user only."""

from __future__ import annotations

import pytest

from mqha.security.sealed import SealError, seal, unseal


def test_seal_round_trip_and_refusals() -> None:
    sealed = seal("inner-secret-1", "app", "pw-12345678")
    assert sealed.startswith("v1.") and "pw-12345678" not in sealed
    assert unseal("inner-secret-1", "app", sealed) == "pw-12345678"
    assert seal("inner-secret-1", "app", "pw-12345678") != sealed  # a fresh nonce each time
    for key, user, text in (
        ("inner-secret-2", "app", sealed),  # another key (the inner credentials changed)
        ("inner-secret-1", "ops", sealed),  # moved to another user
        ("inner-secret-1", "app", sealed[:-4] + "AAAA"),  # corrupt
        ("inner-secret-1", "app", "v1.!!"),
        ("inner-secret-1", "app", "plain"),
    ):
        with pytest.raises(SealError):
            unseal(key, user, text)
