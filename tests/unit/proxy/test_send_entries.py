"""What a client is told about a send (mqha.proxy.service.entry_for, and batch_status for a request of
several messages), and which RPCs answer UNIMPLEMENTED."""

from __future__ import annotations

import pytest

from mqha.client.results import SendResult, SendStatus
from mqha.proxy.service import IMPLEMENTED, MessagingService, batch_status, entry_for
from mqha.proxy.v2 import definition as d
from mqha.proxy.v2 import service as s


def result(status: SendStatus, error: str | None = None) -> SendResult:
    return SendResult(msg_id="ID", status=status, broker_name="broker-a", offset=640, attempts=2, error=error)


@pytest.mark.parametrize(
    ("status", "error", "code"),
    [
        (SendStatus.PUT_OK, None, d.Code.OK),
        (SendStatus.FLUSH_DISK_TIMEOUT, None, d.Code.MASTER_PERSISTENCE_TIMEOUT),
        (SendStatus.FLUSH_SLAVE_TIMEOUT, None, d.Code.SLAVE_PERSISTENCE_TIMEOUT),
        (SendStatus.FAILED, "MESSAGE_ILLEGAL: body too large", d.Code.BAD_REQUEST),
        (SendStatus.FAILED, "NO_PERMISSION: wrong user", d.Code.FORBIDDEN),
        (SendStatus.FAILED, "SERVICE_NOT_AVAILABLE: slave", d.Code.PROXY_TIMEOUT),
        (SendStatus.UNKNOWN, "connection reset", d.Code.PROXY_TIMEOUT),
    ],
)
def test_each_outcome_maps_to_the_code_the_java_proxy_answers(
    status: SendStatus, error: str | None, code: int
) -> None:
    entry = entry_for("client-id", result(status, error))
    assert entry.status.code == code and entry.message_id == "client-id"
    assert entry.offset == (640 if status.stored else 0)
    if error:
        assert error in entry.status.message


def test_every_rpc_but_the_implemented_ones_answers_unimplemented() -> None:
    methods = {m.name for m in s.DESCRIPTOR.services_by_name["MessagingService"].methods}
    assert methods >= IMPLEMENTED
    for name in methods - IMPLEMENTED:
        assert getattr(MessagingService, name).__qualname__.startswith("_unimplemented"), name
    for name in IMPLEMENTED:
        owner = getattr(MessagingService, name).__qualname__.split(".")[0]
        assert owner in ("MessagingService", "ClientSessionRpcs"), name


@pytest.mark.parametrize(
    ("codes", "top"),
    [
        ([d.Code.OK, d.Code.OK, d.Code.OK], d.Code.OK),
        ([d.Code.PROXY_TIMEOUT, d.Code.PROXY_TIMEOUT], d.Code.PROXY_TIMEOUT),
        ([d.Code.OK, d.Code.SLAVE_PERSISTENCE_TIMEOUT], d.Code.MULTIPLE_RESULTS),
    ],
)
def test_a_batch_answers_its_one_code_else_multiple_results(codes: list[int], top: int) -> None:
    """As RocketMQ's proxy: the entries' code when they share one (with the first entry's text)."""
    entries = [
        s.SendResultEntry(status=d.Status(code=code, message=f"entry {i}")) for i, code in enumerate(codes)
    ]
    answer = batch_status(entries)
    assert answer.code == top
    if top != d.Code.MULTIPLE_RESULTS:
        assert answer.message == "entry 0"
