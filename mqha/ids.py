"""Identifier types shared by every package (docs/reference-behaviour.md §1.1)."""

from typing import NewType

BrokerId = NewType("BrokerId", int)
"""Controller broker id: persistent, unique per broker set, starting at 1."""

Epoch = NewType("Epoch", int)
Offset = NewType("Offset", int)
GroupName = NewType("GroupName", str)

FIRST_BROKER_ID = BrokerId(1)
MASTER_ROLE_ID = BrokerId(0)
"""Role broker id a master reports (classic "id 0 = master" convention)."""

NO_MASTER: BrokerId | None = None
"""A broker set without a master has ``masterBrokerId`` null."""

MAX_OFFSET = Offset(2**63 - 1)
"""End offset of the open last epoch entry (Java ``Long.MAX_VALUE``)."""
