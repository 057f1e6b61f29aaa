"""The one exception tree of mqha. Raise precisely; translate only at boundaries (HTTP, CLI, process main).

    MqhaError                      every error we raise on purpose; has ``code`` and ``http_status``
    ├── ConfigError                a config key is unknown, malformed or missing (names the key)
    ├── StorageError               on-disk state we cannot use as is (names the file)
    │   ├── CorruptFileError       a file of ours fails its format or checksum
    │   ├── ForeignFileError       a file in a store directory that is not ours
    │   ├── NotAlignedError        an offset that is not a message boundary
    │   └── CorruptRecordError     a commit-log record at a boundary fails its CRC or checks
    ├── ProtocolError              a peer or caller broke a wire contract
    │   ├── LocalProtocolError     we were asked to send something invalid
    │   └── RemoteProtocolError    the peer sent something invalid (the connection closes)
    ├── FencedError                a request carried a stale epoch
    ├── RequestError               a request rejected with a RocketMQ response code
    ├── MissingExtraError          a command needs an optional part not installed (names the extra)
    └── the packages' own errors, each beside the code that raises it: the client's ``ClientError``
        (``mqha.client.results``), the replicated log's ``ReplicationError`` and ``StopApplying``
        (``mqha.controller.raft.errors``), mqadmin's ``UsageError`` and ``CommandFailed``, mqproxy's
        ``NotSent``, ``NoAnswer`` and ``MessageRefused``, ``AclError``, ...

Every exception class of mqha derives from ``MqhaError`` (``tests/unit/mqha/test_error_tree.py``). One
that callers used to catch as a builtin keeps that base too (``class AclError(MqhaError, ValueError)``).
``code`` is a ``ResponseCode`` except where a class says otherwise (``AclError``: an ACL 2.0 code name;
``MessageRefused``: a gRPC v2 ``Code``). Batch operations return per-item results instead of raising.
"""

from typing import Any

from mqha.codes import ResponseCode, http_status_for


class MqhaError(Exception):
    """Root of every error mqha raises on purpose; carries a response ``code`` and its HTTP status."""

    code: ResponseCode = ResponseCode.SYSTEM_ERROR

    @property
    def http_status(self) -> int:
        return http_status_for(self.code)


class ConfigError(MqhaError):
    """Reports a config key that is unknown, malformed or missing, naming the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config key '{key}': {message}")
        self.key = key


class StorageError(MqhaError):
    """Reports on-disk state that cannot be used as is, naming the file."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


class CorruptFileError(StorageError):
    """Reports a file of ours that fails its format or checksum."""


class ForeignFileError(StorageError):
    """Reports a file in a store directory that is not ours."""


class NotAlignedError(StorageError):
    """Reports an offset that is not a message boundary."""


class CorruptRecordError(StorageError):
    """Reports a commit-log record at a known boundary that fails its checks (a flipped bit).

    Nothing of it is served or replicated (docs/architecture.md §4.7).

    ``offset``: where it starts; ``resume``: where valid data goes on after it; ``messages``: the good
    messages a read found before it, in order (the read answers with them).
    """

    def __init__(
        self, path: str, offset: int, why: str, resume: int, messages: list[Any] | None = None
    ) -> None:
        super().__init__(path, f"corrupt record at offset {offset} ({why})")
        self.offset = offset
        self.why = why
        self.resume = resume
        self.messages = messages or []


class ProtocolError(MqhaError):
    """Reports a broken wire contract, by a peer or by a caller."""


class LocalProtocolError(ProtocolError):
    """Reports that we were asked to send something invalid."""


class RemoteProtocolError(ProtocolError):
    """Reports that the peer sent something invalid (the connection closes)."""


class FencedError(MqhaError):
    """Reports a request that carried a stale epoch."""

    code = ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH


class RequestError(MqhaError):
    """A request rejected with a specific response code and a remark for the caller."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(f"{code.name} ({int(code)}): {remark}")
        self.code = code
        self.remark = remark


class MissingExtraError(MqhaError):
    """Reports a command that needs an optional part not installed, naming the extra."""

    def __init__(self, extra: str, purpose: str) -> None:
        super().__init__(f"install mqha[{extra}] {purpose}")
        self.extra = extra
