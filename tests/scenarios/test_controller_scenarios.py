"""Controller scenario transcripts (etcd ``datadriven`` style): ``tests/scenarios/controller/*.txt``.

Each block of a transcript is a command line, a ``----`` line and the expected output, ended by a blank
line; ``#`` lines before a command are comments. The interpreter drives the pure controller core —
decisions, ``apply`` of the resulting records, reply from the outcome — with a heartbeat table and a
fake clock. ``UPDATE_GOLDEN=1`` rewrites the expected output (commit only what you understood).

Commands (``<ids>`` is a comma list such as ``1,2,3``):

    register <group> <id> <addr> [ha=<addr>] [cluster=<c>]   apply-id then register-broker
    apply-id <group> <id> <addr> [code=<checkCode>]          §5.2
    register-broker <group> <id> <addr> [ha=<addr>]          §5.3
    next-id <group>                                          §5.1
    heartbeat <group> <ids> [epoch= maxOffset= confirmOffset= timeout= priority=]
    tick <ms>                                                advance the clock, drop expired heartbeats
    scan                                                     the leader's inactive-master scan (§3.4)
    elect <group> [<id>] [designate]                         §5.4 (no id: controller trigger)
    alter <group> <ids> [master= masterEpoch= sssEpoch=]     §5.5 (defaults: the current values)
    clean <group> [ids=<ids>|ids=<text>] [living]            §5.10
    replica-info <group> | sync-state-data <group>...        §5.6 / §5.7
    set unclean=<true|false>
    decide <name> <write command>                            decide now, commit later (a second leader)
    commit <name>                                            apply a decided write to the current state
    state                                                    every group
    snapshot                                                 snapshot + replay checks
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mqha.controller.apply import apply, replay
from mqha.controller.election import ElectionPolicy
from mqha.controller.liveness import HeartbeatTable
from mqha.controller.operations import (
    handle_alter_sync_state_set,
    handle_apply_broker_id,
    handle_clean_broker_data,
    handle_elect_master,
    handle_get_next_broker_id,
    handle_get_replica_info,
    handle_get_sync_state_data,
    handle_register_broker,
    reply_from_outcome,
)
from mqha.controller.records import Record, decode_record, encode_record
from mqha.controller.result import ControllerResult, Reply
from mqha.controller.state import ControllerState, decode_state, encode_state
from mqha.wire.controller_api import (
    AlterSyncStateSetRequest,
    ApplyBrokerIdRequest,
    BrokerHeartbeatRequest,
    CleanBrokerDataRequest,
    ElectMasterRequest,
    GetNextBrokerIdRequest,
    GetReplicaInfoRequest,
    GetSyncStateDataRequest,
    RegisterBrokerRequest,
)

HERE = Path(__file__).parent / "controller"
CLUSTER = "c1"


class ScenarioError(Exception):
    pass


def ids(text: str) -> frozenset[int]:
    return frozenset(int(part) for part in text.split(",") if part)


@dataclass
class Controller:
    state: ControllerState = field(default_factory=ControllerState.empty)
    table: HeartbeatTable = field(default_factory=HeartbeatTable)
    now: int = 0
    policy: ElectionPolicy = field(default_factory=ElectionPolicy)
    log: list[Record] = field(default_factory=list)
    pending: dict[str, ControllerResult] = field(default_factory=dict)

    # --- output helpers ---------------------------------------------------------------------------

    @staticmethod
    def show_reply(api: str, reply: Reply) -> list[str]:
        line = f"{api}: {int(reply.code)} {reply.code.name}"
        if reply.remark:
            line += f" {json.dumps(reply.remark)}"
        lines = [line]
        if reply.payload_json():
            lines.append("  " + json.dumps(reply.payload_json(), sort_keys=True, separators=(",", ":")))
        return lines

    def show_group(self, name: str) -> str:
        group = self.state.group(name)
        return f"  = {group.describe()}" if group is not None else f"  = {name} (absent)"

    def commit(self, api: str, name: str, result: ControllerResult) -> list[str]:
        """Append the result's records to the log, apply them, answer from the outcome."""
        if not result.records:
            return self.show_reply(api, result.reply)
        lines: list[str] = []
        reply = result.reply
        for decided in result.records:
            # Every record goes through the log codec, as it would through Raft.
            record = decode_record(encode_record(decided))
            self.log.append(record)
            self.state, outcome = apply(self.state, record, len(self.log))
            reply = reply_from_outcome(result, outcome)
            unclean = " (unclean)" if getattr(record, "unclean", False) else ""
            lines.append(f"  log[{len(self.log)}] {record.TYPE}{unclean} -> {outcome.code.name}")
        return self.show_reply(api, reply) + lines + [self.show_group(name)]

    # --- commands ---------------------------------------------------------------------------------

    def decide(self, verb: str, args: list[str], opts: dict[str, str]) -> tuple[str, str, ControllerResult]:
        """A write decision from the current state and liveness: (api name, group, result)."""
        view = self.table.view(self.now)
        group = args[0]
        if verb == "apply-id":
            broker_id, addr = int(args[1]), args[2]
            code = opts.get("code", f"{addr};{self.now}")
            request = ApplyBrokerIdRequest(
                cluster_name=opts.get("cluster", CLUSTER),
                broker_name=group,
                applied_broker_id=broker_id,
                register_check_code=code,
            )
            return "apply-id", group, handle_apply_broker_id(self.state, request)
        if verb == "register-broker":
            register = RegisterBrokerRequest(
                cluster_name=opts.get("cluster", CLUSTER),
                broker_name=group,
                broker_id=int(args[1]),
                broker_address=args[2],
                ha_address=opts.get("ha"),
            )
            return "register-broker", group, handle_register_broker(self.state, register, view)
        if verb == "elect":
            broker_id = int(args[1]) if len(args) > 1 and args[1] != "designate" else None
            elect = ElectMasterRequest(
                broker_name=group,
                cluster_name=CLUSTER,
                broker_id=broker_id,
                designate_elect="designate" in args,
            )
            return "elect", group, handle_elect_master(self.state, elect, view, self.policy)
        if verb == "alter":
            current = self.state.group(group)
            alter = AlterSyncStateSetRequest(
                broker_name=group,
                master_broker_id=int(opts.get("master", getattr(current, "master_broker_id", None) or 0)),
                master_epoch=int(opts.get("masterEpoch", getattr(current, "master_epoch", 0))),
                sync_state_set=ids(args[1]),
                sync_state_set_epoch=int(opts.get("sssEpoch", getattr(current, "sync_state_set_epoch", 0))),
            )
            return "alter", group, handle_alter_sync_state_set(self.state, alter, view)
        if verb == "clean":
            raw = opts.get("ids")
            to_clean: tuple[int, ...] | str | None = None
            if raw is not None:
                to_clean = (
                    raw if ";" in raw or not raw.replace(",", "").isdigit() else tuple(sorted(ids(raw)))
                )
            clean = CleanBrokerDataRequest(
                broker_name=group,
                cluster_name=CLUSTER,
                broker_controller_ids_to_clean=to_clean,
                clean_living_broker="living" in args,
            )
            return "clean", group, handle_clean_broker_data(self.state, clean, view)
        raise ScenarioError(f"not a write command: {verb}")

    def run(self, line: str) -> list[str]:
        words = shlex.split(line)
        verb, rest = words[0], words[1:]
        args = [w for w in rest if "=" not in w]
        opts = dict(w.split("=", 1) for w in rest if "=" in w)
        if verb == "register":
            group, broker_id, addr = args[0], args[1], args[2]
            out = self.run(
                f"apply-id {group} {broker_id} {addr}"
                + (f" cluster={opts['cluster']}" if "cluster" in opts else "")
            )
            ha = f" ha={opts['ha']}" if "ha" in opts else ""
            return out + self.run(f"register-broker {group} {broker_id} {addr}{ha}")
        if verb in ("apply-id", "register-broker", "elect", "alter", "clean"):
            api, group, result = self.decide(verb, args, opts)
            return self.commit(api, group, result)
        if verb == "decide":
            name = args[0]
            inner = shlex.split(line)[2:]
            inner_args = [w for w in inner[1:] if "=" not in w]
            inner_opts = dict(w.split("=", 1) for w in inner[1:] if "=" in w)
            api, group, result = self.decide(inner[0], inner_args, inner_opts)
            self.pending[name] = result
            records = ", ".join(r.TYPE for r in result.records) or "none"
            return [f"decided {name}: records={records}", *self.show_reply(f"predicted {api}", result.reply)]
        if verb == "commit":
            result = self.pending.pop(args[0])
            record = result.records[0] if result.records else None
            group = getattr(record, "broker_name", "?")
            return self.commit(f"commit {args[0]}", group, result)
        if verb == "next-id":
            request = GetNextBrokerIdRequest(cluster_name=CLUSTER, broker_name=args[0])
            return self.show_reply("next-id", handle_get_next_broker_id(self.state, request).reply)
        if verb == "replica-info":
            result = handle_get_replica_info(self.state, GetReplicaInfoRequest(broker_name=args[0]))
            return self.show_reply("replica-info", result.reply)
        if verb == "sync-state-data":
            request = GetSyncStateDataRequest(broker_names=tuple(args))
            return self.show_reply(
                "sync-state-data",
                handle_get_sync_state_data(self.state, request, self.table.view(self.now)).reply,
            )
        if verb == "heartbeat":
            group = args[0]
            for broker_id in sorted(ids(args[1])):
                info = self.state.group(group)
                addr = info.address_of(broker_id) if info is not None else None
                self.table.record(
                    self.now,
                    BrokerHeartbeatRequest(
                        cluster_name=CLUSTER,
                        broker_name=group,
                        broker_addr=addr or "?",
                        broker_id=broker_id,
                        epoch=int(opts.get("epoch", -1)),
                        max_offset=int(opts.get("maxOffset", -1)),
                        confirm_offset=int(opts.get("confirmOffset", -1)),
                        heartbeat_timeout_mills=int(opts.get("timeout", 10_000)),
                        election_priority=int(opts.get("priority", 2**31 - 1)),
                    ),
                )
            alive = [f"{i.broker_name}/{i.broker_id}" for i in self.table.entries() if i.is_alive(self.now)]
            return [f"t={self.now} alive: {' '.join(alive) or '-'}"]
        if verb == "tick":
            self.now += int(args[0])
            expired = self.table.pop_expired(self.now)
            gone = " ".join(f"{i.broker_name}/{i.broker_id}" for i in expired) or "-"
            return [f"t={self.now} expired: {gone}"]
        if verb == "scan":
            out: list[str] = []
            view = self.table.view(self.now)
            for name, group_state in sorted(self.state.groups.items()):
                master = group_state.master_broker_id
                if master is None or view.is_alive(name, master):
                    continue
                if not any(view.is_alive(name, broker_id) for broker_id in group_state.replicas):
                    continue
                out += self.run(f"elect {name}")
            return out or ["scan: nothing to do"]
        if verb == "set":
            self.policy = ElectionPolicy(enable_elect_unclean_master=opts["unclean"] == "true")
            return [f"unclean={str(self.policy.enable_elect_unclean_master).lower()}"]
        if verb == "state":
            return [self.show_group(name).strip("= ").strip() for name in sorted(self.state.groups)] or [
                "(empty)"
            ]
        if verb == "snapshot":
            data = encode_state(self.state)
            if decode_state(data) != self.state:
                raise ScenarioError("snapshot does not round-trip")
            if replay(self.log) != self.state:
                raise ScenarioError("replaying the log does not give the state")
            return [f"snapshot ok: {len(self.state.groups)} groups, appliedIndex={self.state.applied_index}"]
        raise ScenarioError(f"unknown command: {line}")


@dataclass
class Block:
    comments: list[str]
    command: str
    expected: list[str]


def parse(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    comments: list[str] = []
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            comments.append(line)
            i += 1
            continue
        command = line
        i += 1
        if i >= len(lines) or lines[i] != "----":
            raise ScenarioError(f"line {i}: expected '----' after {command!r}")
        i += 1
        expected: list[str] = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        i += 1  # the blank line that ends the block
        blocks.append(Block(comments, command, expected))
        comments = []
    if comments:
        blocks.append(Block(comments, "", []))
    return blocks


def render(blocks: list[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        out.extend(block.comments)
        if block.command:
            out.append(block.command)
            out.append("----")
            out.extend(block.expected)
            out.append("")
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out) + "\n"


TRANSCRIPTS = sorted(HERE.glob("*.txt"))


def test_transcripts_exist() -> None:
    names = {path.stem for path in TRANSCRIPTS}
    assert {
        "first_election",
        "failover_unclean_off",
        "failover_unclean_on",
        "designated_elect",
        "stale_cas_fenced",
        "partial_clean",
    } <= names


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
def test_transcript(path: Path) -> None:
    blocks = parse(path.read_text())
    controller = Controller()
    actual = [
        Block(block.comments, block.command, controller.run(block.command) if block.command else [])
        for block in blocks
    ]
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(render(actual))
        return
    assert render(actual) == render(blocks)
