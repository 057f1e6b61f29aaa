"""The shell of mqadmin's controller voter-set commands (getControllerQuorum, addControllerPeer,
removeControllerPeer; docs/architecture.md §6.1): what to ask in which order, the retry loop and its
clock. What to ask, what to retry and what to print are ``mqha.admin_cli.commands.voters`` (pure).

A controller being removed may be down, so removeControllerPeer never contacts it: only the leader
(found through ``-a``) is asked.
"""

from __future__ import annotations

import asyncio

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import Answer, CommandFailed, HttpCall
from mqha.admin_cli.context import Context, Controllers, Output
from mqha.codes import ResponseCode


async def run_get_controller_quorum(ctx: Context) -> Output:
    controllers = ctx.controllers()
    try:
        answer = core.require_success(await controllers.leader_call(core.quorum_call()))
    except CommandFailed as exc:
        if exc.failure.code != ResponseCode.CONTROLLER_NOT_LEADER:
            raise
        ctx.note("no serving leader is known: this is the view of the first controller that answers")
        answer = core.require_success(await controllers.first_answer(core.quorum_call()))
    return core.format_controller_quorum(answer), core.controller_quorum_json(answer)


async def _settled(ctx: Context, controllers: Controllers, call: HttpCall, deadline: float) -> Answer:
    """``call`` on the leader, asked again every ``RETRY_PAUSE`` while the answer is worth retrying,
    until ``deadline`` (the loop's clock); the SUCCESS answer, else the last failure."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            return core.require_success(await controllers.leader_call(call))
        except CommandFailed as exc:
            last = exc
        if not core.worth_retrying(last.failure.code):
            raise last
        if loop.time() + core.RETRY_PAUSE >= deadline:
            raise core.gave_up(last, ctx.args.timeout)
        await asyncio.sleep(core.RETRY_PAUSE)


async def run_add_controller_peer(ctx: Context) -> Output:
    deadline = asyncio.get_running_loop().time() + ctx.args.timeout
    peer = core.check_address(ctx.args.peerAddress)
    try:
        storage = core.require_success(await ctx.http.send(peer, core.storage_call()))
    except CommandFailed as exc:
        raise core.unreadable_peer(peer, exc) from None
    controllers = ctx.controllers()
    quorum = await _settled(ctx, controllers, core.quorum_call(), deadline)
    raft_id = core.raft_id_to_add(peer, storage, quorum)
    answer = await _settled(ctx, controllers, core.add_peer_call(raft_id), deadline)
    return core.format_add_peer(raft_id, answer), core.add_peer_json(raft_id, answer)


async def run_remove_controller_peer(ctx: Context) -> Output:
    deadline = asyncio.get_running_loop().time() + ctx.args.timeout
    peer = core.check_address(ctx.args.peerAddress)
    answer = await _settled(ctx, ctx.controllers(), core.remove_peer_call(peer), deadline)
    return core.format_remove_peer(peer, answer), core.remove_peer_json(peer, answer)
