"""mqadmin's exit statuses and failures as values: a step's code, name, remark and node, the
stderr line and ``--json`` document of a failed command (docs/reference-behaviour.md §19)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mqha.codes import ResponseCode
from mqha.errors import MqhaError

PROG = "mqadmin"
TOKEN_ENV = "MQHA_ADMIN_TOKEN"
TLS_CA_ENV = "MQHA_TLS_CA"  # a CA bundle: talk https to a tlsEnable=true cluster (docs/architecture.md §12.5)
DEFAULT_INTERVAL = 3.0  # docs/reference-behaviour.md §19: "-i" without a value repeats every 3 s

EXIT_OK = 0
EXIT_FAILED = 1  # a node answered, but not SUCCESS (or the answer says the target does not exist)
EXIT_USAGE = 2  # bad command line (argparse's own status for usage errors)
EXIT_UNREACHABLE = 3  # no listed node could be reached at all

# Transport failures have no server code. 10001 and 10002 are the RocketMQ client's numbers for the
# same cases; 10100 is mqadmin's own. Only CONNECT_FAILED is sure to have sent nothing.
CONNECT_FAILED = 10001  # no connection: the request was not sent
ACCESS_TIMEOUT = 10002  # sent (maybe), no answer in time
CONNECTION_LOST = 10100  # sent, the connection broke before a complete answer
_CLIENT_CODE_NAMES = {
    CONNECT_FAILED: "CONNECT_FAILED",
    ACCESS_TIMEOUT: "ACCESS_TIMEOUT",
    CONNECTION_LOST: "CONNECTION_LOST",
}


def code_name(code: int, given: str | None = None) -> str:
    if code in ResponseCode._value2member_map_:
        return ResponseCode(code).name
    return _CLIENT_CODE_NAMES.get(code) or given or f"CODE_{code}"


# --------------------------------------------------------------------------------------------------
# Failures


class UsageError(MqhaError):
    """The command line is wrong (exit 2 with the command's usage)."""


@dataclass(frozen=True)
class Failure:
    """Why a step failed: the code (and its name), the remark and the node that answered."""

    code: int
    remark: str
    address: str | None = None  # the node that answered (or could not be reached)
    name: str | None = None

    @property
    def code_name(self) -> str:
        return code_name(self.code, self.name)


class CommandFailed(MqhaError):
    """A step failed; the command ends with ``exit_code`` and ``failure`` on stderr."""

    def __init__(self, failure: Failure, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(f"{failure.code_name} ({failure.code}): {failure.remark}")
        self.failure = failure
        self.exit_code = exit_code


def failed(code: int, remark: str, address: str | None = None) -> CommandFailed:
    return CommandFailed(Failure(int(code), remark, address))


def unreachable(code: int, remark: str, address: str | None = None) -> CommandFailed:
    return CommandFailed(Failure(code, remark, address), EXIT_UNREACHABLE)


def failure_text(command: str, failure: Failure) -> str:
    """The stderr line of a failed command: its name, the code (number and name) and the remark."""
    where = f" (from {failure.address})" if failure.address else ""
    return f"{command} command failed: [{failure.code} {failure.code_name}] {failure.remark}{where}"


def failure_json(command: str, failure: Failure) -> str:
    return dumps(
        {
            "command": command,
            "code": failure.code,
            "codeName": failure.code_name,
            "remark": failure.remark,
            "address": failure.address,
        }
    )


def dumps(obj: Any) -> str:
    """``--json`` output: one compact JSON document per line (interval runs print one per round)."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=False)
