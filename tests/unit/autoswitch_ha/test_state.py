"""The HA connection transition table (docs/reference-behaviour.md §11; docs/architecture.md §11 rule 1)."""

import pytest

from mqha.autoswitch_ha.state import (
    ERROR,
    HANDSHAKE,
    OPEN_STATES,
    READY,
    SHUTDOWN,
    SUSPEND,
    TRANSFER,
    TRANSITIONS,
    ConnectionStateMachine,
    Role,
    Trigger,
    expected_frames,
)
from mqha.errors import LocalProtocolError

MASTER_PATH = [(Trigger.HANDSHAKE_REQUEST, HANDSHAKE), (Trigger.OFFSET_REPORT, TRANSFER)]
SLAVE_PATH = [
    (Trigger.CONNECTION_MADE, HANDSHAKE),
    (Trigger.EPOCH_HISTORY_OFFER, SUSPEND),
    (Trigger.TRUNCATION_DONE, TRANSFER),
]


@pytest.mark.parametrize(("role", "path"), [(Role.MASTER, MASTER_PATH), (Role.SLAVE, SLAVE_PATH)])
def test_happy_path_ready_handshake_transfer(role: Role, path) -> None:
    machine = ConnectionStateMachine(role)
    assert machine.state is READY
    for trigger, state in path:
        assert machine.process(trigger) is state
    steady = Trigger.OFFSET_REPORT if role is Role.MASTER else Trigger.TRANSFER_BATCH
    assert machine.process(steady) is TRANSFER
    assert machine.is_open


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize(("trigger", "end"), [(Trigger.CLOSE, SHUTDOWN), (Trigger.FAIL, ERROR)])
def test_every_open_state_can_end(role: Role, trigger: Trigger, end) -> None:
    for state in TRANSITIONS[role]:
        assert TRANSITIONS[role][state][trigger] is end
    machine = ConnectionStateMachine(role)
    machine.process(trigger)
    assert machine.state is end and not machine.is_open


@pytest.mark.parametrize("role", list(Role))
def test_terminal_states_accept_nothing(role: Role) -> None:
    for end_trigger in (Trigger.CLOSE, Trigger.FAIL):
        machine = ConnectionStateMachine(role)
        machine.process(end_trigger)
        for trigger in Trigger:
            assert not machine.can(trigger)
            with pytest.raises(LocalProtocolError):
                machine.process(trigger)


def test_illegal_transition_names_role_state_and_event_and_keeps_state() -> None:
    machine = ConnectionStateMachine(Role.MASTER)
    with pytest.raises(LocalProtocolError) as raised:
        machine.process(Trigger.OFFSET_REPORT)
    assert str(raised.value) == "can't handle OffsetReport frame when role=master and state=READY"
    assert machine.state is READY

    slave = ConnectionStateMachine(Role.SLAVE)
    slave.process(Trigger.CONNECTION_MADE)
    with pytest.raises(LocalProtocolError, match="TransferBatch frame when role=slave and state=HANDSHAKE"):
        slave.process(Trigger.TRANSFER_BATCH)
    assert slave.state is HANDSHAKE


def test_roles_do_not_share_triggers() -> None:
    master_only = {Trigger.HANDSHAKE_REQUEST, Trigger.OFFSET_REPORT}
    slave_only = {
        Trigger.CONNECTION_MADE,
        Trigger.EPOCH_HISTORY_OFFER,
        Trigger.TRUNCATION_DONE,
        Trigger.TRANSFER_BATCH,
    }
    for state, row in TRANSITIONS[Role.MASTER].items():
        assert not set(row) & slave_only, state
    for state, row in TRANSITIONS[Role.SLAVE].items():
        assert not set(row) & master_only, state
    assert SUSPEND not in TRANSITIONS[Role.MASTER]  # the master never waits on its shell
    assert set(TRANSITIONS[Role.SLAVE]) == OPEN_STATES


@pytest.mark.parametrize(
    ("role", "state", "frames"),
    [
        (Role.MASTER, READY, {Trigger.HANDSHAKE_REQUEST}),
        (Role.MASTER, HANDSHAKE, {Trigger.OFFSET_REPORT}),
        (Role.MASTER, TRANSFER, {Trigger.OFFSET_REPORT}),
        (Role.SLAVE, READY, set()),
        (Role.SLAVE, HANDSHAKE, {Trigger.EPOCH_HISTORY_OFFER}),
        (Role.SLAVE, SUSPEND, set()),  # truncating: the master has nothing to send yet
        (Role.SLAVE, TRANSFER, {Trigger.TRANSFER_BATCH}),
        (Role.SLAVE, ERROR, set()),
    ],
)
def test_expected_frames_per_state(role: Role, state, frames) -> None:
    assert expected_frames(role, state) == frames


def test_repr_is_readable() -> None:
    assert repr(ConnectionStateMachine(Role.SLAVE)) == "ConnectionStateMachine(role=slave, state=READY)"
    assert repr(TRANSFER) == "TRANSFER" and repr(Trigger.CLOSE) == "close"
