"""The shell of mqadmin's ACL 2.0 commands (createUser .. listAcl; docs/architecture.md §12.11): each
asks the controller leader; what to ask and print is ``mqha.admin_cli.commands.acl`` (pure)."""

from __future__ import annotations

from typing import Any

from mqha.admin_cli import commands as core
from mqha.admin_cli.commands import acl
from mqha.admin_cli.context import Context, Output


async def _done(ctx: Context, call: Any, what: str) -> Output:
    core.require_success(await ctx.controllers().leader_call(call))
    return f"{what} succeeded.\n", {"command": ctx.args.command, "ok": True}


async def run_user_change(ctx: Context) -> Output:
    args = ctx.args
    password = getattr(args, "password", None)
    user_type = getattr(args, "userType", None)
    call = acl.user_call(args.command, args.username, password, user_type)
    return await _done(ctx, call, f"{args.command} of {args.username}")


async def run_list_users(ctx: Context) -> Output:
    args = ctx.args
    call = acl.list_users_call(getattr(args, "username", None), getattr(args, "filter", None))
    users = acl.users_of(core.require_success(await ctx.controllers().leader_call(call)))
    return acl.format_users(users), {"users": users}


async def run_put_acl(ctx: Context) -> Output:
    args = ctx.args
    call = acl.put_acl_call(
        args.command,
        subject=args.subject,
        resources=args.resources,
        actions=args.actions,
        decision=args.decision,
        source_ips=args.sourceIp,
    )
    return await _done(ctx, call, f"{args.command} of {args.subject}")


async def run_delete_acl(ctx: Context) -> Output:
    args = ctx.args
    return await _done(ctx, acl.delete_acl_call(args.subject, args.resources), f"deleteAcl of {args.subject}")


async def run_list_acls(ctx: Context) -> Output:
    args = ctx.args
    call = acl.list_acls_call(args.subject, getattr(args, "resource", None))
    acls = acl.acls_of(core.require_success(await ctx.controllers().leader_call(call)))
    return acl.format_acls(acls), {"acls": acls}


RUNNERS = {
    "createUser": run_user_change,
    "updateUser": run_user_change,
    "deleteUser": run_user_change,
    "getUser": run_list_users,
    "listUser": run_list_users,
    "createAcl": run_put_acl,
    "updateAcl": run_put_acl,
    "deleteAcl": run_delete_acl,
    "getAcl": run_list_acls,
    "listAcl": run_list_acls,
}
