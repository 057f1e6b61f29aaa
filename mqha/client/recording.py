"""Optional recording of what a client saw into the history store (docs/architecture.md §5 ``acks``,
``reads``).

Thin adapter over ``mqha.history.recorder`` (``HistoryRecorder`` + ``ClientHistory``): recording only queues
a row (a background thread writes batches), so it never slows a send or a read down.
"""

from __future__ import annotations

import os
from pathlib import Path

from mqha.client.results import Message, SendResult
from mqha.history.recorder import ClientHistory, HistoryRecorder, history_path

RecordTarget = str | os.PathLike[str] | HistoryRecorder
"""Where to record: a directory (its ``history.db``), a ``.db`` file, or an open recorder."""


class ClientRecorder:
    """Records send results as ``acks`` rows and received messages as ``reads`` rows."""

    def __init__(self, target: RecordTarget, client_id: str) -> None:
        if isinstance(target, HistoryRecorder):
            self.recorder, self._owned = target, False
        else:
            path = Path(target)
            db = path if path.suffix == ".db" else Path(history_path(path))
            self.recorder, self._owned = HistoryRecorder(db), True
        self.history = ClientHistory(self.recorder, client_id)

    def ack(self, result: SendResult, ack_mode: str | None) -> None:
        self.history.ack(
            msg_id=result.msg_id,
            broker_name=result.broker_name,
            broker_id=result.broker_id,
            offset=result.offset,
            size=result.size,
            epoch=result.epoch,
            status=result.status.value,
            ack_mode=ack_mode,
        )

    def read(self, message: Message) -> None:
        self.history.read(
            msg_id=message.msg_id,
            broker_name=message.broker_name,
            offset=message.offset,
            broker_id=message.broker_id,
        )

    def flush(self, timeout: float = 10.0) -> bool:
        return self.recorder.flush(timeout)

    def close(self) -> None:
        """Flush; close the recorder only if this adapter opened it."""
        if self._owned:
            self.recorder.close()
        else:
            self.recorder.flush()
