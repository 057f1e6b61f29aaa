"""The one exception tree of mqha. Raise precisely; translate only at boundaries (HTTP, CLI, process main).

    MqhaError                      every error we raise on purpose; has ``code`` and ``http_status``
    ├── ConfigError                a config key is unknown, malformed or missing (names the key)
    ├── StorageError               on-disk state we cannot use as is (names the file)
    │   ├── CorruptFileError       a file of ours fails its format or checksum
    │   ├── ForeignFileError       a file in a store directory that is not ours
    │   └── NotAlignedError        an offset that is not a message boundary
    ├── ProtocolError              a peer or caller broke a wire contract
    │   ├── LocalProtocolError     we were asked to send something invalid
    │   └── RemoteProtocolError    the peer sent something invalid (the connection closes)
    ├── FencedError                a request carried a stale epoch
    ├── RequestError               a request rejected with a RocketMQ response code
    └── MissingExtraError          a command needs an optional part not installed (names the extra)

Batch operations return per-item results instead of raising.
"""

from mqha.codes import ResponseCode, http_status_for


class MqhaError(Exception):
    code: ResponseCode = ResponseCode.SYSTEM_ERROR

    @property
    def http_status(self) -> int:
        return http_status_for(self.code)


class ConfigError(MqhaError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config key '{key}': {message}")
        self.key = key


class StorageError(MqhaError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


class CorruptFileError(StorageError):
    pass


class ForeignFileError(StorageError):
    pass


class NotAlignedError(StorageError):
    pass


class ProtocolError(MqhaError):
    pass


class LocalProtocolError(ProtocolError):
    pass


class RemoteProtocolError(ProtocolError):
    pass


class FencedError(MqhaError):
    code = ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH


class RequestError(MqhaError):
    """A request rejected with a specific response code and a remark for the caller."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(f"{code.name} ({int(code)}): {remark}")
        self.code = code
        self.remark = remark


class MissingExtraError(MqhaError):
    def __init__(self, extra: str, purpose: str) -> None:
        super().__init__(f"install mqha[{extra}] {purpose}")
        self.extra = extra
