"""The proxy's ledger of sends by the client's message id (mqha.proxy.dedupe): a retry of a message
in flight waits for it, a retry of a stored one gets the stored answer, anything else is sent again."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqha.proxy.dedupe import Decision, SendLedger


def test_a_retry_waits_for_the_attempt_in_flight_then_gets_its_answer() -> None:
    ledger: SendLedger[str] = SendLedger(window_ms=1000, capacity=10)
    assert ledger.begin("m1", 0) == (Decision.SEND, None)
    assert ledger.begin("m1", 5) == (Decision.WAIT, None)
    ledger.finish("m1", "offset 42", 10)
    assert ledger.begin("m1", 20) == (Decision.STORED, "offset 42")


def test_an_attempt_that_stored_nothing_is_forgotten_so_the_retry_sends_again() -> None:
    ledger: SendLedger[str] = SendLedger(window_ms=1000, capacity=10)
    ledger.begin("m1", 0)
    ledger.finish("m1", None, 10)
    assert ledger.begin("m1", 20) == (Decision.SEND, None)


def test_stored_ids_expire_after_the_window_and_beyond_capacity() -> None:
    ledger: SendLedger[int] = SendLedger(window_ms=100, capacity=2)
    for i, name in enumerate("abc"):
        ledger.begin(name, i)
        ledger.finish(name, i, i)
    assert ledger.begin("a", 3)[0] is Decision.SEND  # pushed out by capacity
    ledger.finish("a", None, 3)
    assert ledger.begin("b", 50)[0] is Decision.STORED
    assert ledger.begin("b", 200)[0] is Decision.SEND  # older than the window


@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from(["begin", "stored", "failed"]), st.integers(0, 50)),
        max_size=60,
    )
)
def test_against_a_model(steps: list[tuple[str, str, int]]) -> None:
    """In flight and stored ids, as a plain dict would track them (a large window and capacity)."""
    ledger: SendLedger[int] = SendLedger(window_ms=10**9, capacity=10**6)
    model: dict[str, str | int] = {}
    now = 0
    for name, action, step in steps:
        now += step
        if action == "begin":
            decision, result = ledger.begin(name, now)
            state = model.get(name)
            if state is None:
                assert decision is Decision.SEND
                model[name] = "flight"
            elif state == "flight":
                assert decision is Decision.WAIT
            else:
                assert (decision, result) == (Decision.STORED, state)
        elif model.get(name) == "flight":
            ledger.finish(name, now if action == "stored" else None, now)
            if action == "stored":
                model[name] = now
            else:
                del model[name]
        assert len(ledger) == len(model)
