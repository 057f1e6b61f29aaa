"""mqadmin's commands as data (RocketMQ names, docs/reference-behaviour.md §19), the command list
and closest-match text, and the checks of command-line arguments."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from mqha.admin_cli.commands.failures import DEFAULT_INTERVAL, PROG, UsageError
from mqha.admin_cli.commands.voters import DEFAULT_CHANGE_TIMEOUT
from mqha.table_text import columns


@dataclass(frozen=True)
class Option:
    """One command-line option of a command (RocketMQ's flags and dest name)."""

    flags: tuple[str, ...]
    dest: str
    help: str
    required: bool = False
    kind: str = "str"  # str | int | flag | interval
    metavar: str | None = None


@dataclass(frozen=True)
class Command:
    """One mqadmin command: its name, summary, options and whether it needs the admin token."""

    name: str
    summary: str
    options: tuple[Option, ...]
    mutating: bool = False  # needs the admin token when the controller has one
    epilog: str = ""
    timeout: float | None = None  # --timeout bounds the whole command (default this), not one request


def _opt(*flags: str, dest: str, help: str, required: bool = False, kind: str = "str") -> Option:
    metavar = {"int": "N", "interval": "SECONDS", "flag": None}.get(kind, dest)
    return Option(tuple(flags), dest, help, required, kind, metavar)


_ADDR_HELP = "controller address host:port, or a ';' list (any of them finds the leader)"
_INTERVAL_HELP = f"repeat every SECONDS until interrupted ({DEFAULT_INTERVAL:g} when given without a value)"

# getControllerConfig and updateControllerConfig ask every listed controller, not only the leader.
_CONTROLLER_LIST = _opt(
    "-a",
    "--controllerAddress",
    dest="controllerAddress",
    help="controller address list host:port;host:port",
    required=True,
)

# getSyncStateSet and getBrokerEpoch: the broker sets of -b or -c, from the controller leader of -a.
_BROKER_SETS_OPTIONS = (
    _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
    _opt("-b", "--brokerName", dest="brokerName", help="broker set name"),
    _opt("-c", "--clusterName", dest="clusterName", help="every broker set of this cluster"),
    _opt("-i", "--interval", dest="interval", help=_INTERVAL_HELP, kind="interval"),
)

# brokerStatus, getBrokerConfig, updateBrokerConfig: one broker (-b), or every live broker of -c (-a).
_BROKER_TARGET_OPTIONS = (
    _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP + "; needed by -c"),
    _opt("-b", "--brokerAddr", dest="brokerAddr", help="broker address host:port"),
    _opt("-c", "--clusterName", dest="clusterName", help="every live broker of this cluster"),
    _opt("-i", "--interval", dest="interval", help=_INTERVAL_HELP, kind="interval"),
)
_BROKER_TARGET_EPILOG = "One of -b or -c is required; -c finds the brokers through the controller (-a)."

_PEER_HELP = "API address host:port of the controller (as in controllerDLegerPeers)"


def _voter_change(name: str, summary: str, what: str) -> Command:
    """addControllerPeer / removeControllerPeer: -a finds the leader, -p names the controller."""
    return Command(
        name,
        summary,
        (
            _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
            _opt("-p", "--peerAddress", dest="peerAddress", help=f"{_PEER_HELP} {what}", required=True),
        ),
        mutating=True,
        epilog=_CHANGE_EPILOG,
        timeout=DEFAULT_CHANGE_TIMEOUT,
    )


_CHANGE_EPILOG = (
    "The leader is asked again every 0.5 s while it cannot make the change yet (the observer is "
    "catching up, leadership is moving) until --timeout, which bounds the whole command here."
)

_TOPIC = _opt("-t", "--topic", dest="topic", help="topic name", required=True)

_TOPIC_COMMANDS = (
    Command(
        "updateTopic",
        "Create a topic, or change its queues, in every broker set of a cluster.",
        (
            _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
            _opt(
                "-c",
                "--clusterName",
                dest="clusterName",
                help="every broker set of this cluster",
                required=True,
            ),
            _TOPIC,
            _opt(
                "-r",
                "--readQueueNums",
                dest="readQueueNums",
                help="read queues per broker set (8)",
                kind="int",
            ),
            _opt(
                "-w",
                "--writeQueueNums",
                dest="writeQueueNums",
                help="write queues per broker set (8)",
                kind="int",
            ),
            _opt(
                "-p",
                "--perm",
                dest="perm",
                help="permission: 2 write, 4 read, 6 read and write (6)",
                kind="int",
            ),
        ),
        mutating=True,
        epilog="The topic lives in the controller's replicated state; mqproxy routes by it.",
    ),
    Command(
        "deleteTopic",
        "Delete a topic from every broker set of a cluster.",
        (
            _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
            _opt("-c", "--clusterName", dest="clusterName", help="cluster name", required=True),
            _TOPIC,
        ),
        mutating=True,
    ),
    Command(
        "topicList",
        "List the topics (with -c: those of the cluster, with their cluster).",
        (
            _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
            _opt("-c", "--clusterName", dest="clusterName", help="only this cluster, in RocketMQ's columns"),
        ),
    ),
    Command(
        "consumerProgress",
        "Show a consumer group's progress: per queue the messages, the consumed ones and the backlog.",
        (
            _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
            _opt("-g", "--groupName", dest="groupName", help="consumer group name", required=True),
            _opt(
                "-t", "--topicName", dest="topic", help="only this topic (also one the group never consumed)"
            ),
        ),
        epilog="Offsets are the controllers' committed ones (mqproxy commits them); #Broker Offset and "
        "#Consumer Offset count the messages in each queue of the broker set's master, and below the "
        "group's committed position.",
    ),
    Command(
        "topicRoute",
        "Show a topic's route: its broker sets and their read and write queues.",
        (
            _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
            _TOPIC,
            _opt("-l", "--list", dest="list", help="a row per broker set instead of JSON", kind="flag"),
        ),
    ),
)

# ACL 2.0 (docs/architecture.md §12.11): -a is RocketMQ's actions option here, so the controllers are -n
# (where RocketMQ users name their NameServer) or --controllerAddress; -c is required as RocketMQ's, and
# the users and policies are the whole controller group's.
_ACL_CONTROLLERS = _opt("-n", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True)
_ACL_CLUSTER = _opt("-c", "--clusterName", dest="clusterName", help="the cluster (RocketMQ's)", required=True)
_USERNAME = _opt("-u", "--username", dest="username", help="the user's name (its access key)", required=True)
_SUBJECT = _opt("-s", "--subject", dest="subject", help="User:NAME", required=True)
_RESOURCES = _opt("-r", "--resources", dest="resources", help="Topic:A,Group:G (prefix X*, any *)")


def _acl_command(name: str, summary: str, *options: Option, mutating: bool = True) -> Command:
    return Command(name, summary, (_ACL_CONTROLLERS, _ACL_CLUSTER, *options), mutating=mutating)


def _policy(name: str, summary: str) -> Command:
    return _acl_command(
        name,
        summary,
        _SUBJECT,
        _opt("-r", "--resources", dest="resources", help="Topic:A,Group:G (prefix X*, any *)", required=True),
        _opt(
            "-a", "--actions", dest="actions", help="Pub,Sub,Create,Update,Delete,Get,List,All", required=True
        ),
        _opt("-d", "--decision", dest="decision", help="Allow or Deny", required=True),
        _opt("-i", "--sourceIp", dest="sourceIp", help="source addresses or CIDR ranges, a,b (none: any)"),
    )


_PASSWORD = _opt("-p", "--password", dest="password", help="the password (the clients' secret key)")
_USER_TYPE = _opt("-t", "--userType", dest="userType", help="Super or Normal (Normal)")
_ACL_COMMANDS = (
    _acl_command(
        "createUser",
        "Create an ACL user.",
        _USERNAME,
        _opt(
            "-p", "--password", dest="password", help="the password (the clients' secret key)", required=True
        ),
        _USER_TYPE,
    ),
    _acl_command("updateUser", "Change an ACL user's password or type.", _USERNAME, _PASSWORD, _USER_TYPE),
    _acl_command("deleteUser", "Delete an ACL user and its policy.", _USERNAME),
    _acl_command("getUser", "Show an ACL user (never its password).", _USERNAME, mutating=False),
    _acl_command(
        "listUser",
        "List the ACL users (never their passwords).",
        _opt("-f", "--filter", dest="filter", help="names containing this"),
        mutating=False,
    ),
    _policy("createAcl", "Add or replace a user's policy entries, one per resource."),
    _policy("updateAcl", "Add or replace a user's policy entries, one per resource."),
    _acl_command(
        "deleteAcl", "Delete a user's policy entries (of -r), or its whole policy.", _SUBJECT, _RESOURCES
    ),
    _acl_command("getAcl", "Show a user's policy.", _SUBJECT, mutating=False),
    _acl_command(
        "listAcl",
        "List the policies.",
        _opt("-s", "--subject", dest="subject", help="only User:NAME's"),
        _opt("-r", "--resource", dest="resource", help="only those with an entry of this resource"),
        mutating=False,
    ),
)

COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "getControllerMetaData",
            "Show the controller group, its leader and peers as one controller sees them.",
            (_opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),),
        ),
        Command(
            "getSyncStateSet",
            "Show the master, epochs and SyncStateSet of broker sets, from the controller leader.",
            _BROKER_SETS_OPTIONS,
            epilog="One of -b or -c is required (-b wins when both are given).",
        ),
        Command(
            "getBrokerEpoch",
            "Show the epoch entries of every replica of a broker set (addresses from the controller).",
            _BROKER_SETS_OPTIONS,
            epilog="One of -b or -c is required. Replicas the controller reports not alive are skipped.",
        ),
        Command(
            "haStatus",
            "Show the HA runtime info of a broker, or of every master of a cluster.",
            (
                _opt(
                    "-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP + "; needed by -c"
                ),
                _opt("-b", "--brokerAddr", dest="brokerAddr", help="broker address host:port"),
                _opt("-c", "--clusterName", dest="clusterName", help="every master of this cluster"),
                _opt("-i", "--interval", dest="interval", help=_INTERVAL_HELP, kind="interval"),
            ),
            epilog="One of -b or -c is required; -c finds the masters through the controller (-a).",
        ),
        Command(
            "electMaster",
            "Elect the given broker as master of its set (admin-designated election).",
            (
                _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
                _opt(
                    "-b",
                    "--brokerId",
                    dest="brokerId",
                    help="controller broker id to elect",
                    required=True,
                    kind="int",
                ),
                _opt("-bn", "--brokerName", dest="brokerName", help="broker set name", required=True),
                _opt("-c", "--clusterName", dest="clusterName", help="cluster name", required=True),
            ),
            mutating=True,
        ),
        Command(
            "cleanBrokerMetadata",
            "Remove broker replicas (or a whole broker set) from the controller's metadata.",
            (
                _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
                _opt("-bn", "--brokerName", dest="brokerName", help="broker set name", required=True),
                _opt(
                    "-b",
                    "--brokerControllerIdsToClean",
                    dest="brokerControllerIdsToClean",
                    help="controller broker ids to remove, e.g. '1;2;3' (blank: the whole set)",
                ),
                _opt("-c", "--clusterName", dest="clusterName", help="cluster name (required unless -l)"),
                _opt(
                    "-l",
                    "--cleanLivingBroker",
                    dest="cleanLivingBroker",
                    kind="flag",
                    help="also clean living brokers (the whole set; the id list is ignored)",
                ),
            ),
            mutating=True,
        ),
        Command(
            "getControllerConfig",
            "Show the configuration of each listed controller.",
            (_CONTROLLER_LIST,),
        ),
        Command(
            "updateControllerConfig",
            "Change one configuration key on each listed controller.",
            (
                _CONTROLLER_LIST,
                _opt("-k", "--key", dest="key", help="config key", required=True),
                _opt("-v", "--value", dest="value", help="config value", required=True),
            ),
            mutating=True,
        ),
        Command(
            "getControllerQuorum",
            "Show the controller cluster's id, leader, voters and observers (from the leader).",
            (_opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),),
            epilog="Without a serving leader, the view of the first listed controller that answers.",
        ),
        Command(
            "clusterList",
            "List the brokers of every cluster (or of -c): set, id, address, version, disk, activated.",
            (
                _opt("-a", "--controllerAddress", dest="controllerAddress", help=_ADDR_HELP, required=True),
                _opt("-c", "--clusterName", dest="clusterName", help="only this cluster"),
                _opt("-i", "--interval", dest="interval", help=_INTERVAL_HELP, kind="interval"),
            ),
            epilog="#BID is 0 for a master (as RocketMQ shows it), else the controller's broker id. "
            "Replicas the controller reports not alive are skipped (noted on stderr).",
        ),
        Command(
            "brokerStatus",
            "Show a broker's runtime status, or that of every broker of a cluster.",
            _BROKER_TARGET_OPTIONS,
            epilog=_BROKER_TARGET_EPILOG,
        ),
        Command(
            "getBrokerConfig",
            "Show the configuration of a broker, or of every broker of a cluster.",
            _BROKER_TARGET_OPTIONS,
            epilog=_BROKER_TARGET_EPILOG,
        ),
        Command(
            "updateBrokerConfig",
            "Change one runtime configuration key of a broker, or of every broker of a cluster.",
            (
                *_BROKER_TARGET_OPTIONS[:3],
                _opt(
                    "-k",
                    "--key",
                    dest="key",
                    help="config key (a runtime key: docs/config.md)",
                    required=True,
                ),
                _opt("-v", "--value", dest="value", help="config value", required=True),
            ),
            mutating=True,
            epilog=_BROKER_TARGET_EPILOG + " The change takes effect at once and is written into the "
            "broker's config file; keys that need a restart are refused.",
        ),
        _voter_change(
            "addControllerPeer",
            "Make a new controller (an observer: a blank store that joined) a voter.",
            "to add",
        ),
        _voter_change(
            "removeControllerPeer",
            "Remove a controller from the voter set (it may be down; it is never contacted).",
            "to remove",
        ),
        *_TOPIC_COMMANDS,
        *_ACL_COMMANDS,
    )
}


def command_list_text() -> str:
    lines = [f"usage: {PROG} <command> [options]   ({PROG} <command> -h for its options)", "", "Commands:"]
    lines += columns([(c.name, c.summary) for c in COMMANDS.values()], indent="  ")
    return "\n".join(lines) + "\n"


def closest_command(name: str) -> str | None:
    by_lower = {c.lower(): c for c in COMMANDS}
    if name.lower() in by_lower:  # a case slip is the most likely mistake
        return by_lower[name.lower()]
    matches = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.5)
    return by_lower[matches[0]] if matches else None


def unknown_command_text(name: str) -> str:
    best = closest_command(name)
    hint = f" Did you mean '{best}'?" if best else ""
    return f"{PROG}: unknown command '{name}'.{hint}\n\n" + command_list_text()


def split_addresses(text: str | None) -> list[str]:
    """``"a;b; c;"`` -> ``["a", "b", "c"]`` (order kept, duplicates dropped); empty -> UsageError."""
    items = list(dict.fromkeys(part.strip() for part in (text or "").split(";") if part.strip()))
    if not items:
        raise UsageError("no controller address given (-a host:port or 'host:port;host:port')")
    for item in items:
        check_address(item)
    return items


def check_address(address: str) -> str:
    bare = address.removeprefix("http://")
    host, colon, port = bare.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"bad address {address!r}: expected host:port")
    return bare


def base_url(address: str) -> str:
    return "http://" + address.removeprefix("http://")


def check_clean_args(cluster_name: str | None, clean_living: bool) -> None:
    # The reference's own client-side rule and message (docs/reference-behaviour.md §19).
    if not clean_living and not (cluster_name or "").strip():
        raise UsageError("cleanLivingBroker option is false, clusterName option can not be empty.")
