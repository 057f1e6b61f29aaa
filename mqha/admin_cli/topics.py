"""The shell of mqadmin's topic commands (updateTopic, deleteTopic, topicList, topicRoute;
docs/architecture.md §4.5, §6): each asks the controller leader once. What to ask and what to print
are ``mqha.admin_cli.commands.topics`` (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import topics
from mqha.admin_cli.commands.failures import UsageError
from mqha.wire.controller_api import DEFAULT_TOPIC_QUEUE_NUMS
from mqha.wire.types import MAX_QUEUE_NUMS

if TYPE_CHECKING:
    from mqha.admin_cli.__main__ import Context

Output = tuple[str, Any]


def _count(value: int | None, option: str) -> int:
    count = DEFAULT_TOPIC_QUEUE_NUMS if value is None else value
    if not 0 <= count <= MAX_QUEUE_NUMS:
        raise UsageError(f"{option}: expected 0..{MAX_QUEUE_NUMS}, got {count}")
    return count


async def run_update_topic(ctx: Context) -> Output:
    args = ctx.args
    perm = 6 if args.perm is None else args.perm
    if not 0 <= perm <= 7:
        raise UsageError(f"-p: expected 2 (write), 4 (read) or 6 (read and write), got {perm}")
    call = topics.update_topic_call(
        args.clusterName,
        args.topic,
        _count(args.readQueueNums, "-r"),
        _count(args.writeQueueNums, "-w"),
        perm,
    )
    answer = core.require_success(await ctx.controllers().leader_call(call))
    return topics.format_update_topic(answer), topics.update_topic_json(answer)


async def run_delete_topic(ctx: Context) -> Output:
    args = ctx.args
    call = topics.delete_topic_call(args.clusterName, args.topic)
    core.require_success(await ctx.controllers().leader_call(call))
    obj = {"clusterName": args.clusterName, "topic": args.topic, "deleted": True}
    return topics.format_delete_topic(args.clusterName, args.topic), obj


async def run_topic_list(ctx: Context) -> Output:
    answer = core.require_success(await ctx.controllers().leader_call(topics.topic_list_call()))
    pairs = topics.topic_list_of(answer, ctx.args.clusterName)
    return topics.format_topic_list(pairs, ctx.args.clusterName is not None), topics.topic_list_json(pairs)


async def run_topic_route(ctx: Context) -> Output:
    answer = core.require_success(
        await ctx.controllers().leader_call(topics.topic_route_call(ctx.args.topic))
    )
    return topics.format_topic_route(answer, ctx.args.list), topics.route_json(answer)
