"""The shell of mqadmin's controller and HA commands (getControllerMetaData, getSyncStateSet,
getBrokerEpoch, haStatus, electMaster, cleanBrokerMetadata, getControllerConfig,
updateControllerConfig): which calls to send where. What to ask and how to print it are
``mqha.admin_cli.commands`` (pure).
"""

from __future__ import annotations

from typing import Any

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import CommandFailed, UsageError
from mqha.admin_cli.context import Context, Controllers, Output, fail_if_any
from mqha.codes import ResponseCode


async def run_get_controller_metadata(ctx: Context) -> Output:
    answer = core.require_success(await ctx.controllers().first_answer(core.metadata_call()))
    return core.format_controller_metadata(answer), core.controller_metadata_json(answer)


async def _sync_state_table(ctx: Context, controllers: Controllers) -> dict[str, core.ReplicasInfo]:
    args = ctx.args
    if args.brokerName:
        names = [args.brokerName]
    elif args.clusterName:
        groups = core.require_success(await controllers.leader_call(core.groups_call()))
        names = core.broker_names_of_cluster(groups, args.clusterName)
    else:
        raise UsageError("one of -b brokerName or -c clusterName is required")
    answer = core.require_success(await controllers.leader_call(core.sync_state_data_call(names)))
    table = core.sync_state_table(answer)
    core.require_known_sets(table, names, answer.address)
    return {name: table[name] for name in names}


async def run_get_sync_state_set(ctx: Context) -> Output:
    table = await _sync_state_table(ctx, ctx.controllers())
    return core.format_sync_state_sets(table), core.sync_state_sets_json(table)


async def run_get_broker_epoch(ctx: Context) -> Output:
    table = await _sync_state_table(ctx, ctx.controllers())
    texts: list[str] = []
    caches: list[dict[str, Any]] = []
    errors: list[CommandFailed] = []
    for name in sorted(table):
        for target in core.replica_targets(name, table[name]):
            if not target.alive:
                ctx.note(f"skipped {target.address} ({name} broker id {target.broker_id}): not alive")
                continue
            try:
                answer = core.require_success(
                    await ctx.http.send(target.address, core.broker_epochs_call(), auth=False)
                )
            except CommandFailed as exc:
                errors.append(exc)
                continue
            texts.append(core.format_broker_epoch(target.address, answer.payload))
            caches.append(core.broker_epoch_json(target.address, answer.payload))
    fail_if_any(ctx, errors, ("".join(texts), {"brokers": caches}) if caches else None)
    if not caches:
        raise core.failed(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, "no replica of the broker set is alive")
    return "".join(texts), {"brokers": caches}


async def run_ha_status(ctx: Context) -> Output:
    args = ctx.args
    if args.brokerAddr:
        targets = [core.check_address(args.brokerAddr)]
    elif args.clusterName:
        if not args.controllerAddress:
            raise UsageError("-c needs -a controllerAddress to find the masters of the cluster")
        controllers = ctx.controllers()
        groups = core.require_success(await controllers.leader_call(core.groups_call()))
        names = core.broker_names_of_cluster(groups, args.clusterName)
        answer = core.require_success(await controllers.leader_call(core.sync_state_data_call(names)))
        table = core.sync_state_table(answer)
        targets = []
        for name in sorted(table):
            master = core.master_target(name, table[name])
            if master is None:
                ctx.note(f"skipped broker set {name}: no master")
            else:
                targets.append(master.address)
        if not targets:
            raise core.failed(
                ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                f"no broker set of cluster '{args.clusterName}' has a master",
                answer.address,
            )
    else:
        raise UsageError("one of -b brokerAddr or -c clusterName is required")
    texts: list[str] = []
    infos: list[dict[str, Any]] = []
    errors: list[CommandFailed] = []
    for address in targets:
        try:
            answer = core.require_success(
                await ctx.http.send(address, core.broker_ha_status_call(), auth=False)
            )
        except CommandFailed as exc:
            errors.append(exc)
            continue
        texts.append(core.format_ha_status(address, answer.payload))
        infos.append(core.ha_status_json(address, answer.payload))
    fail_if_any(ctx, errors, ("".join(texts), {"brokers": infos}) if infos else None)
    return "".join(texts), {"brokers": infos}


async def run_elect_master(ctx: Context) -> Output:
    args = ctx.args
    call = core.elect_call(args.clusterName, args.brokerName, args.brokerId)
    answer = core.require_success(await ctx.controllers().leader_call(call))
    payload = core.elect_payload(answer)
    return (
        core.format_elect_master(args.clusterName, args.brokerName, payload),
        core.elect_master_json(args.clusterName, args.brokerName, payload),
    )


async def run_clean_broker_metadata(ctx: Context) -> Output:
    args = ctx.args
    core.check_clean_args(args.clusterName, args.cleanLivingBroker)
    call = core.clean_call(
        args.clusterName, args.brokerName, args.brokerControllerIdsToClean, args.cleanLivingBroker
    )
    core.require_success(await ctx.controllers().leader_call(call))
    return core.format_clean(args.brokerName), {"brokerName": args.brokerName, "cleaned": True}


async def run_get_controller_config(ctx: Context) -> Output:
    texts: list[str] = []
    configs: dict[str, Any] = {}
    errors: list[CommandFailed] = []
    for address in core.split_addresses(ctx.args.controllerAddress):
        try:
            answer = core.require_success(await ctx.http.send(address, core.get_config_call()))
            config = core.controller_config_of(answer)
        except CommandFailed as exc:
            errors.append(exc)
            continue
        texts.append(core.format_controller_config(address, config))
        configs[address] = config
    fail_if_any(ctx, errors, ("".join(texts), {"configs": configs}) if configs else None)
    return "".join(texts), {"configs": configs}


async def run_update_controller_config(ctx: Context) -> Output:
    args = ctx.args
    addresses = core.split_addresses(args.controllerAddress)
    errors: list[CommandFailed] = []
    for address in addresses:
        try:
            answer = core.require_success(
                await ctx.http.send(address, core.update_config_call(args.key, args.value))
            )
        except CommandFailed as exc:
            errors.append(exc)
            continue
        if answer.remark:
            ctx.note(f"{address}: {answer.remark}")
    fail_if_any(ctx, errors, None)
    return (
        core.format_update_config(addresses, args.key, args.value),
        {"addresses": addresses, "key": args.key, "value": args.value},
    )
