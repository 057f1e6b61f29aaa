"""What a controller decision returns: the records to replicate and the reply (docs/architecture.md §11 rule
3).

A result without records is a read (or a rejection) and its reply is final. A result with records is
a write: the shell proposes the records and answers with ``operations.reply_from_outcome(result,
outcome)``, built from what ``apply`` did — ``reply`` here is the leader's prediction, equal to the
final reply when nothing interleaved (a property test checks that).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqha.codes import ResponseCode
from mqha.controller.election import ElectionResult
from mqha.controller.records import Record
from mqha.wire.controller_api import Reply

__all__ = ["ControllerResult", "Reply"]


@dataclass(frozen=True)
class ControllerResult:
    """A decision's outcome: the records to replicate (none for a read or a rejection) and the reply."""

    records: tuple[Record, ...]
    reply: Reply
    election: ElectionResult | None = field(default=None, compare=False)
    """An election's decision (what it chose, waits for or declares lost), for the shell's soft state."""

    @classmethod
    def read(cls, reply: Reply) -> ControllerResult:
        return cls((), reply)

    @classmethod
    def reject(cls, code: ResponseCode, remark: str) -> ControllerResult:
        return cls((), Reply(code, remark))

    @property
    def is_write(self) -> bool:
        return bool(self.records)
