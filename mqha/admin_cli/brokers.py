"""The shell of mqadmin's broker commands (clusterList, brokerStatus, getBrokerConfig,
updateBrokerConfig; docs/architecture.md §6): find the brokers through the controllers of ``-a``, then
ask each broker's own API. What to ask and what to print are ``mqha.admin_cli.commands.brokers`` (pure).
"""

from __future__ import annotations

from typing import Any

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import CommandFailed, UsageError
from mqha.admin_cli.commands import brokers as pure
from mqha.admin_cli.commands.calls import ReplicaTarget
from mqha.admin_cli.context import Context, Output
from mqha.codes import ResponseCode


async def _cluster_replicas(ctx: Context, cluster: str | None) -> list[tuple[str, ReplicaTarget, str | None]]:
    """(cluster, replica, its master's address) of every registered replica of ``cluster`` (or of all
    clusters), sets by name, the master first in each."""
    if not ctx.args.controllerAddress:
        raise UsageError("-c needs -a controllerAddress to find the brokers of the cluster")
    controllers = ctx.controllers()
    groups = core.require_success(await controllers.leader_call(core.groups_call()))
    clusters = pure.clusters_of(groups)
    if cluster is not None:
        clusters = {cluster: core.broker_names_of_cluster(groups, cluster)}
    names = sorted({name for members in clusters.values() for name in members})
    if not names:
        return []
    answer = core.require_success(await controllers.leader_call(core.sync_state_data_call(names)))
    table = core.sync_state_table(answer)
    found = []
    for cluster_name, members in clusters.items():
        for name in members:
            if name not in table:
                continue
            for target in core.replica_targets(name, table[name]):
                found.append((cluster_name, target, table[name].master_address))
    return found


async def _targets(ctx: Context) -> list[tuple[ReplicaTarget | None, str, str | None]]:
    """-b: that broker; -c: every live replica of the cluster (a dead one is noted and skipped)."""
    args = ctx.args
    if args.brokerAddr:
        return [(None, core.check_address(args.brokerAddr), None)]
    if not args.clusterName:
        raise UsageError("one of -b brokerAddr or -c clusterName is required")
    targets = []
    for _, target, master in await _cluster_replicas(ctx, args.clusterName):
        if not target.alive:
            ctx.note(
                f"skipped {target.address} ({target.broker_name} broker id {target.broker_id}): not alive"
            )
            continue
        targets.append((target, target.address, master))
    if not targets:
        raise core.failed(
            ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
            f"no broker of cluster '{args.clusterName}' is alive",
        )
    return targets


async def run_cluster_list(ctx: Context) -> Output:
    text = pure.CLUSTER_LIST_HEADER
    rows = []
    for cluster, target, _ in await _cluster_replicas(ctx, ctx.args.clusterName):
        if not target.alive:
            ctx.note(
                f"skipped {target.address} ({target.broker_name} broker id {target.broker_id}): not alive"
            )
            continue
        try:
            answer = core.require_success(
                await ctx.http.send(target.address, pure.broker_status_call(), auth=False)
            )
            status = answer.payload
        except CommandFailed as exc:
            ctx.note(f"{target.address}: {exc.failure.remark}")
            status = None
        text += pure.cluster_list_row(cluster, target, status)
        rows.append(pure.cluster_list_entry(cluster, target, status))
    return text, {"brokers": rows}


async def _each(ctx: Context, call: core.HttpCall, *, auth: bool) -> list[tuple[Any, str, str | None, Any]]:
    """``call`` on every target; (target, address, master, answer), failures reported at the end."""
    done, errors = [], []
    for target, address, master in await _targets(ctx):
        try:
            answer = core.require_success(await ctx.http.send(address, call, auth=auth))
        except CommandFailed as exc:
            errors.append(exc)
            continue
        done.append((target, address, master, answer))
    if errors:
        for exc in errors[:-1]:
            report = core.failure_json if ctx.args.json else core.failure_text
            print(report(ctx.args.command, exc.failure), file=ctx.err)
        raise errors[-1]
    return done


async def run_broker_status(ctx: Context) -> Output:
    by_cluster = ctx.args.brokerAddr is None
    text, statuses = "", {}
    for _, address, _, answer in await _each(ctx, pure.broker_status_call(), auth=False):
        text += pure.format_broker_status(answer.payload, address if by_cluster else None)
        statuses[address] = pure.status_table(answer.payload)
    return text, {"brokers": statuses}


async def run_get_broker_config(ctx: Context) -> Output:
    text, configs = "", {}
    for target, address, master, answer in await _each(ctx, pure.broker_config_call(), auth=False):
        config = pure.config_of(answer)
        text += pure.format_broker_config(pure.broker_config_banner(target, address, master), config)
        configs[address] = config
    return text, {"configs": configs}


async def run_update_broker_config(ctx: Context) -> Output:
    args = ctx.args
    call = pure.update_broker_config_call(args.key, args.value)
    addresses = [address for _, address, _, _ in await _each(ctx, call, auth=True)]
    return (
        pure.format_update_broker_config(addresses),
        {"addresses": addresses, "key": args.key, "value": args.value},
    )
