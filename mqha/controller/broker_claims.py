"""One live process per broker id (core; docs/architecture.md §3.2 "One live process per broker id").

A *claim* is a register or a heartbeat for one broker id from one broker process: its address and its
incarnation (a fresh one per process, docs/architecture.md §8.6). The *holder* is this node's heartbeat
entry for the id (soft state, §11 rule 5). A live holder keeps the id against:

* a process at **another address** (a store copied to another host or port, or an identity file that
  names another replica): refused with ``CONTROLLER_BROKER_ID_INVALID``; the broker stops;
* **another incarnation at the same address** while the holder's session is open here: only one
  process can listen on an address, so this is the holder restarted before its old session closed
  here (or someone replaying a session): refused with ``CONTROLLER_INVALID_REQUEST``; the broker
  retries, and the old session closes within a ping interval or times out.

Everything else stands: no live holder, the holder itself (a new session of the same incarnation), or
a restart at the holder's address whose old session is gone. The id's holder is whichever live process
this node heard first: after a controller restart (an empty table) the first one to heartbeat holds it
until its heartbeat times out (``controllerHeartBeatTimeoutMills``); a crashed holder's session closes,
or its heartbeat times out, and then a new incarnation may take the id.

A broker session is bound to the id and incarnation of its first heartbeat
(``handle_session_heartbeat``): a heartbeat for another id or incarnation on it is refused, so a
session opened by one process never speaks, or closes, for another.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqha.codes import ResponseCode
from mqha.controller.liveness import BrokerLiveInfo, LiveKey
from mqha.wire.controller_api import Reply, check_code_store_id

__all__ = ["Claim", "SessionBinding", "handle_claim", "handle_session_heartbeat", "handle_store_claim"]

Code = ResponseCode


@dataclass(frozen=True)
class Claim:
    """A register or heartbeat for ``broker_id`` of ``broker_name`` by the process at ``address``."""

    broker_name: str
    broker_id: int
    address: str
    incarnation: str | None  # None: an older broker that reports none


@dataclass(frozen=True)
class SessionBinding:
    """The broker id and incarnation a session's first accepted heartbeat bound it to."""

    key: LiveKey
    incarnation: str | None


def _process(address: str, incarnation: str | None) -> str:
    return f"{address} (incarnation {incarnation or 'unknown'})"


def handle_claim(holder: BrokerLiveInfo | None, claim: Claim, now_ms: int) -> Reply | None:
    """None when ``claim`` may stand against this node's entry ``holder`` at ``now_ms``, else the
    refusal (see the module docstring). ``holder.session`` not None means its session is open here:
    a closed session's entries are dropped at once."""
    if holder is None or not holder.is_alive(now_ms):
        return None
    who = f"BrokerId: {claim.broker_id} of broker-set: {claim.broker_name}"
    age = now_ms - holder.last_seen_ms
    if holder.broker_addr != claim.address:
        return Reply(
            Code.CONTROLLER_BROKER_ID_INVALID,
            f"{who} is held by another live process at {_process(holder.broker_addr, holder.incarnation)}, "
            f"heard {age} ms ago; refused to {_process(claim.address, claim.incarnation)}: two processes "
            "may not share one id",
        )
    if holder.incarnation == claim.incarnation or holder.session is None:
        return None  # the holder itself, or its restart once its old session is gone
    return Reply(
        Code.CONTROLLER_INVALID_REQUEST,
        f"{who}: the previous process at {_process(holder.broker_addr, holder.incarnation)} still has an "
        f"open session here; retry once it closes or its heartbeat times out ({holder.timeout_ms} ms)",
    )


def handle_store_claim(
    broker_name: str, broker_id: int, register_check_code: str, store_id: str | None
) -> Reply | None:
    """None when a register from store ``store_id`` may claim ``broker_id``, whose apply recorded
    ``register_check_code``; else the refusal: the id was applied by another store, so this broker's
    identity file names another replica (docs/architecture.md §9.4). Older brokers and ids applied by
    them carry no store id: nothing to compare."""
    applied_by = check_code_store_id(register_check_code)
    if store_id is None or applied_by is None or applied_by == store_id:
        return None
    return Reply(
        Code.CONTROLLER_BROKER_ID_INVALID,
        f"BrokerId: {broker_id} of broker-set: {broker_name} was applied by store {applied_by}, but this "
        f"broker's store is {store_id}: its identity file names another replica",
    )


def handle_session_heartbeat(bound: SessionBinding | None, heard: SessionBinding) -> Reply | None:
    """None when a heartbeat for ``heard`` may go on a session bound to ``bound`` (None: not bound
    yet; the caller binds it once the heartbeat is accepted), else the refusal."""
    if bound is None or bound == heard:
        return None
    name, broker_id = bound.key
    return Reply(
        Code.CONTROLLER_INVALID_REQUEST,
        f"this session is bound to broker {name}/{broker_id} (incarnation {bound.incarnation or 'unknown'}); "
        f"a heartbeat for {heard.key[0]}/{heard.key[1]} (incarnation {heard.incarnation or 'unknown'}) "
        "needs a session of its own",
    )
