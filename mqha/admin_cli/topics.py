"""The shell of mqadmin's topic commands (updateTopic, deleteTopic, topicList, topicRoute,
consumerProgress; docs/architecture.md §4.5, §6): each asks the controller leader (consumerProgress also
each broker set's master). What to ask and what to print
are ``mqha.admin_cli.commands.topics`` (pure)."""

from __future__ import annotations

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import CommandFailed, topics
from mqha.admin_cli.commands import brokers as core_brokers
from mqha.admin_cli.commands.failures import UsageError
from mqha.admin_cli.context import Context, Output
from mqha.wire.controller_api import DEFAULT_TOPIC_QUEUE_NUMS
from mqha.wire.types import MAX_QUEUE_NUMS


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
    groups = topics.consumer_groups_of(answer)
    text = topics.format_topic_list(pairs, ctx.args.clusterName is not None, groups)
    return text, topics.topic_list_json(pairs, groups)


async def run_topic_route(ctx: Context) -> Output:
    answer = core.require_success(
        await ctx.controllers().leader_call(topics.topic_route_call(ctx.args.topic))
    )
    return topics.format_topic_route(answer, ctx.args.list), topics.route_json(answer)


async def _masters(ctx: Context) -> dict[str, str]:
    """Each broker set's master address (sets without a master are left out)."""
    controllers = ctx.controllers()
    groups = core.require_success(await controllers.leader_call(core.groups_call()))
    names = sorted({name for members in core_brokers.clusters_of(groups).values() for name in members})
    if not names:
        return {}
    table = core.sync_state_table(
        core.require_success(await controllers.leader_call(core.sync_state_data_call(names)))
    )
    masters = {name: core.master_target(name, info) for name, info in table.items()}
    return {name: target.address for name, target in masters.items() if target is not None}


async def run_consumer_progress(ctx: Context) -> Output:
    """The group's committed offsets from the controllers, each queue's messages from its broker set's
    master (``GET /v1/queues``, open): a row per queue and the total backlog."""
    args = ctx.args
    answer = await ctx.controllers().leader_call(topics.consumer_offsets_call(args.groupName, args.topic))
    committed = topics.committed_of(core.require_success(answer))
    if args.topic:
        committed.setdefault(args.topic, {})
    masters = await _masters(ctx)
    rows = []
    for topic in sorted(committed):
        for broker in sorted(set(committed[topic]) | set(masters)):
            positions = committed[topic].get(broker, {})
            stats = None
            if broker in masters:
                try:
                    call = topics.queue_stats_call(topic, positions)
                    stats = core.require_success(
                        await ctx.http.send(masters[broker], call, auth=False)
                    ).payload
                except CommandFailed as exc:
                    ctx.note(f"{broker} ({masters[broker]}): {exc.failure.remark}")
            else:
                ctx.note(f"{broker}: no master now")
            rows += topics.progress_rows(topic, broker, stats, positions)
    return topics.format_consumer_progress(rows), {"consumerGroup": args.groupName, "queues": rows}
